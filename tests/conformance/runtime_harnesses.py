"""Runtime-kit harnesses for the two adapters in this repository, and three broken adapters.

``LangGraphHarness`` drives a real ``create_agent`` graph with ``ContextPlaneMiddleware`` and a
scripted chat model; ``ExternalHarness`` is the loop an external runtime writes around
``ContextAssembler`` (its own plain-message history, its own scripted model). The broken
adapters are each a one-hook change to ``ExternalHarness``: the bugs the kit exists to catch.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from contextplane.projection import ProjectedContext
from contextplane.testing import KIT_TOOL, ModelCall, RuntimeKit, SeenMessage, ToolCall, kit_lookup
from contextplane_external import ContextAssembler
from contextplane_langgraph import ContextPlaneMiddleware, is_context_frame
from contextplane_langgraph.frames import message_text
from contextplane_langgraph.middleware import PROJECTION_KEY, projection_message
from tests.runtime.fakes import RecordingChatModel

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


# --- LangGraph / LangChain v1 ----------------------------------------------------------------


@tool(KIT_TOOL)
def kit_lookup_tool(topic: str) -> str:
    """Look a topic up."""
    return kit_lookup(topic)


@tool
def kit_pause(question: str) -> str:
    """Ask the operator and wait for the answer."""
    return f"operator said {interrupt({'question': question})}"


def _seen(message: BaseMessage) -> SeenMessage:
    ids = tuple(str(c["id"]) for c in getattr(message, "tool_calls", None) or ())
    return SeenMessage(
        _ROLES.get(str(message.type), str(message.type)),
        message_text(message),
        ids,
        getattr(message, "tool_call_id", None),
    )


class LangGraphHarness:
    """A ``create_agent`` graph with the middleware, an in-memory checkpointer, a scripted model."""

    def __init__(
        self,
        kit: RuntimeKit,
        middleware: type[ContextPlaneMiddleware] = ContextPlaneMiddleware,
        *,
        asynchronous: bool = False,
    ) -> None:
        #: Drive the graph with ``ainvoke`` (the middleware's async hooks) instead of ``invoke``.
        self.asynchronous = asynchronous
        self.middleware = middleware(host=kit.host, backend=kit.backend, stable_prefix=True, tools=[KIT_TOOL])
        self.saver = InMemorySaver()
        self.agent = create_agent(
            RecordingChatModel(policy=self._reply),
            tools=[kit_lookup_tool, kit_pause],
            middleware=[self.middleware],
            checkpointer=self.saver,
        )
        self._session = ""
        self._next: ToolCall | None = None
        self._calls: dict[str, list[ModelCall]] = {}

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        self._calls.setdefault(self._session, []).append(ModelCall(_seen(m) for m in messages))
        last = [m for m in messages if not is_context_frame(m) and m.type != "system"][-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"answer after {last.content}")
        call, self._next = self._next, None
        if call is None:
            return AIMessage("answer")
        return AIMessage("", tool_calls=[{"name": call.name, "args": call.args, "id": call.call_id}])

    def _invoke(self, session_id: str, payload: Any, **context: bool) -> None:
        self._session = session_id
        config = {"configurable": {"thread_id": session_id}}
        if self.asynchronous:
            asyncio.run(self.agent.ainvoke(payload, config, context=context))
        else:
            self.agent.invoke(payload, config, context=context)

    def run_turn(
        self,
        session_id: str,
        text: str,
        *,
        tool_call: ToolCall | None = None,
        incognito: bool = False,
        goal_turn: bool = False,
    ) -> None:
        self._next = tool_call
        self._invoke(session_id, {"messages": [HumanMessage(text)]}, incognito=incognito, goal_turn=goal_turn)

    def pause_turn(self, session_id: str, text: str) -> None:
        self._next = ToolCall("kit_pause", {"question": "ok?"}, "kit-pause")
        self._invoke(session_id, {"messages": [HumanMessage(text)]})

    def resume(self, session_id: str) -> None:
        self._invoke(session_id, Command(resume="yes"))

    def model_calls(self, session_id: str) -> Sequence[ModelCall]:
        return list(self._calls.get(session_id, ()))

    def stored(self, session_id: str) -> str:
        state = self.agent.get_state({"configurable": {"thread_id": session_id}})
        return (
            repr(state.values) + repr(self.saver.storage) + repr(self.saver.writes) + repr(self.saver.blobs)
        )


# --- the external assembler ------------------------------------------------------------------


class ExternalHarness:
    """A hand-written agent loop over ``ContextAssembler``: plain messages, a scripted model."""

    def __init__(self, kit: RuntimeKit, *, asynchronous: bool = False) -> None:
        #: Use ``aassemble`` / ``adeliver`` (the async path) instead of ``assemble`` / ``deliver``.
        self.asynchronous = asynchronous
        self.assembler = ContextAssembler(host=kit.host, backend=kit.backend, tools=[KIT_TOOL])
        self.histories: dict[str, list[dict[str, Any]]] = {}
        self._calls: dict[str, list[ModelCall]] = {}

    def _model(
        self, session_id: str, messages: Sequence[dict[str, Any]], tool_call: ToolCall | None, call: int
    ) -> dict[str, Any]:
        seen = [SeenMessage("system", self.system_prompt())]
        seen += [
            SeenMessage(
                m["role"],
                str(m["content"]),
                [c["id"] for c in m.get("tool_calls", ())],
                m.get("tool_call_id"),
            )
            for m in messages
        ]
        self._calls.setdefault(session_id, []).append(ModelCall(seen))
        if tool_call is None or call > 0:
            return {"role": "assistant", "content": "answer"}
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": tool_call.call_id, "name": tool_call.name, "args": tool_call.args}],
        }

    def system_prompt(self) -> str:
        """What the loop sends as the system prompt: the assembler's stable prefix."""
        return self.assembler.stable_prefix.text

    def compose(self, text: str, session_id: str, history: list[dict[str, Any]], **flags: Any) -> Any:
        """The turn's composition and its first call's messages (one ``assemble``)."""
        turn_index = sum(1 for m in history if m["role"] == "user") - 1
        kw = {"session_id": session_id, "turn_index": turn_index, "history": history, "call_index": 0}
        if self.asynchronous:
            return asyncio.run(self.assembler.aassemble(text, **kw, **flags))
        return self.assembler.assemble(text, **kw, **flags)

    def deliver(
        self, projection: ProjectedContext, history: list[dict[str, Any]], call_index: int, **flags: Any
    ) -> list[dict[str, Any]]:
        """A later call's messages (``deliver``: no new composition)."""
        if self.asynchronous:
            return asyncio.run(self.assembler.adeliver(projection, history, call_index=call_index))
        return self.assembler.deliver(projection, history, call_index=call_index)

    def remember(
        self, history: list[dict[str, Any]], delivered: list[dict[str, Any]], reply: dict[str, Any]
    ) -> None:
        """What the loop stores after a call: the model's reply, never the delivered messages."""
        history.append(reply)

    def run_turn(
        self,
        session_id: str,
        text: str,
        *,
        tool_call: ToolCall | None = None,
        incognito: bool = False,
        goal_turn: bool = False,
    ) -> None:
        history = self.histories.setdefault(session_id, [])
        history.append({"role": "user", "content": text})
        flags = {"incognito": incognito, "goal_turn": goal_turn}
        assembly = self.compose(text, session_id, history, **flags)
        messages = list(assembly.messages)
        call = 0
        while True:
            reply = self._model(session_id, messages, tool_call, call)
            self.remember(history, messages, reply)
            if not reply.get("tool_calls"):
                return
            for c in reply["tool_calls"]:
                history.append({"role": "tool", "tool_call_id": c["id"], "content": kit_lookup(**c["args"])})
            call += 1
            messages = self.deliver(assembly.projected_context, history, call, text=text, **flags)

    def model_calls(self, session_id: str) -> Sequence[ModelCall]:
        return list(self._calls.get(session_id, ()))

    def stored(self, session_id: str) -> str:
        return json.dumps(self.histories.get(session_id, []))


# --- three broken adapters ----------------------------------------------------------------


class PersistingHarness(ExternalHarness):
    """Stores the delivered messages, projection included, as the session's history (the v1
    bug ADR D2 forbids: context persisted, then piling up)."""

    def remember(
        self, history: list[dict[str, Any]], delivered: list[dict[str, Any]], reply: dict[str, Any]
    ) -> None:
        history[:] = [*delivered, reply]


class ComposingTwiceHarness(ExternalHarness):
    """Composes again for every model call of a turn instead of delivering the turn's projection."""

    def deliver(
        self, projection: ProjectedContext, history: list[dict[str, Any]], call_index: int, **flags: Any
    ) -> list[dict[str, Any]]:
        text = flags.pop("text")
        session_id = projection.session_id
        turn_index = projection.turn_index
        return list(
            self.assembler.assemble(
                text,
                session_id=session_id,
                turn_index=turn_index,
                history=history,
                call_index=call_index,
                **flags,
            ).messages
        )


class SplittingHarness(ExternalHarness):
    """Places the projection right after the assistant's tool call, before its result."""

    def deliver(
        self, projection: ProjectedContext, history: list[dict[str, Any]], call_index: int, **flags: Any
    ) -> list[dict[str, Any]]:
        messages = super().deliver(projection, history, call_index)
        *rest, frame = messages
        at = max(i for i, m in enumerate(rest) if m.get("tool_calls")) + 1
        return [*rest[:at], frame, *rest[at:]]


# Bugs each requirement is there to catch, so no check is one that cannot fail.


class BlindHarness(ExternalHarness):
    """Sends the model the history without the delivered projection."""

    def _model(
        self, session_id: str, messages: Sequence[dict[str, Any]], tool_call: ToolCall | None, call: int
    ) -> dict[str, Any]:
        kept = [m for m in messages if not m.get("metadata", {}).get("contextplane_projection")]
        return super()._model(session_id, kept, tool_call, call)


class UnrecordedHarness(ExternalHarness):
    """Composes every turn as a preview (``record=False``): nothing reaches the records."""

    def compose(self, text: str, session_id: str, history: list[dict[str, Any]], **flags: Any) -> Any:
        return super().compose(text, session_id, history, record=False, **flags)


class FlagBlindHarness(ExternalHarness):
    """Drops the turn's incognito and goal-turn flags on the way to the request."""

    def compose(self, text: str, session_id: str, history: list[dict[str, Any]], **flags: Any) -> Any:
        return super().compose(text, session_id, history)


class StampedPrefixHarness(ExternalHarness):
    """Appends the time of the call to the system prompt (a cache breaker)."""

    def system_prompt(self) -> str:
        return f"{super().system_prompt()}\nNow: {time.time_ns()}"


class ResumeBlindMiddleware(ContextPlaneMiddleware):
    """Composes in ``before_agent`` only: a resumed run (which skips it) gets no projection."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return None

    def _prepare(self, request: Any) -> Any:
        return super()._prepare(request) if request.state.get(PROJECTION_KEY) is not None else request


# The same three bugs in LangGraph middleware: each a one-hook subclass of the real one.


class PersistingMiddleware(ContextPlaneMiddleware):
    """Adds the projection to the agent's messages, so the checkpointer stores it (marked as a
    frame, the model input is still right: only the stored state shows the bug)."""

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        update = super().before_agent(state, runtime) or {}
        carrier = update[PROJECTION_KEY]
        return {**update, "messages": [projection_message(carrier.text, carrier.projection.turn_index)]}


class ComposingTwiceMiddleware(ContextPlaneMiddleware):
    """Composes before every model call as well as before the agent."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return {PROJECTION_KEY: self.compose(state, runtime, reason="model_call")}


class SplittingMiddleware(ContextPlaneMiddleware):
    """Places the projection right after the newest assistant message, tool calls or not."""

    def _override(self, request: Any, carrier: Any, system: Any, messages: list[BaseMessage]) -> Any:
        if carrier.projection.text:
            *rest, frame = messages
            at = max((i for i, m in enumerate(rest) if isinstance(m, AIMessage)), default=len(rest) - 1) + 1
            messages = [*rest[:at], frame, *rest[at:]]
        return super()._override(request, carrier, system, messages)


def langgraph_with(middleware: type[ContextPlaneMiddleware]) -> Any:
    """A harness factory for ``LangGraphHarness`` with another middleware class."""
    return lambda kit: LangGraphHarness(kit, middleware)
