"""The runtime conformance kit on the Agent Framework provider, against the real framework.

``AgentFrameworkHarness`` drives a real ``agent_framework.Agent`` with ``ContextPlaneProvider``
built on the kit's host and backend, the framework's own ``InMemoryHistoryProvider`` and
``AgentSession`` as the stored state, and the fake chat client of the adapter's tests (the
framework's function-invocation and chat-middleware layers over ``BaseChatClient``), scripted
to call the kit's ``kit_lookup`` tool when the kit asks. Agent Framework runs agents on an
event loop only, so there is no sync twin: each turn is one ``asyncio.run(agent.run(...))``.

Incognito and goal turns are decided per run from the session's state, the way a framework
user marks a run (``ContextPlaneProvider(incognito=lambda session, context: ...)``). The
"resume" capability is the framework's tool approval: the model calls a tool that requires
approval, the run returns with a ``user_input_request`` (the turn paused), and a second run
carrying only the approval response continues the turn. The kit runs three ways: plain runs,
streamed runs, and with the framework's per-service-call history persistence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import pytest
from agent_framework import (
    Agent,
    AgentSession,
    ChatResponse,
    Content,
    InMemoryHistoryProvider,
    Message,
    SessionContext,
    tool,
)

from contextplane.request import ProjectionRequest
from contextplane.runtime import open_runtime
from contextplane.testing import (
    KIT_TOOL,
    ModelCall,
    Requirement,
    RuntimeConformance,
    RuntimeKit,
    SeenMessage,
    ToolCall,
    kit_lookup,
)
from contextplane_agent_framework import PROJECTION_MARKER, ContextPlaneProvider
from contextplane_agent_framework.provider import TURN_KEY, run_query

from .conftest import FakeChatClient, stored_json

#: The tool the paused turn's model calls: it needs the operator's approval.
PAUSE_TOOL = "kit_guarded_delete"


@tool(name=KIT_TOOL)
def kit_lookup_tool(topic: str) -> str:
    """Look a topic up."""
    return kit_lookup(topic)


@tool(name=PAUSE_TOOL, approval_mode="always_require")
def kit_guarded_delete(branch: str) -> str:
    """Delete a branch, after the operator approves."""
    return f"deleted {branch}"


def seen_messages(message: Message) -> list[SeenMessage]:
    """A framework message as the kit reads it: one ``SeenMessage`` per function result (the
    framework may carry several results in one tool message), else one for the message."""
    role = str(message.role)
    results = [c for c in message.contents if c.type == "function_result"]
    if results:
        return [SeenMessage("tool", str(c.result), (), c.call_id) for c in results]
    calls = tuple(str(c.call_id) for c in message.contents if c.type == "function_call")
    return [SeenMessage(role, str(message.text or ""), calls)]


def is_projection(message: Message) -> bool:
    return PROJECTION_MARKER in (message.additional_properties or {})


class AgentFrameworkHarness:
    """An ``Agent`` with the provider, an in-memory history provider, and a scripted fake client."""

    def __init__(
        self,
        kit: RuntimeKit,
        *,
        provider: type[ContextPlaneProvider] = ContextPlaneProvider,
        store_context_messages: bool = False,
        per_call_persistence: bool = False,
        streaming: bool = False,
    ) -> None:
        #: Run with ``stream=True`` (drain the updates, then the final response).
        self.streaming = streaming
        runtime = open_runtime(kit.host.config, backend=kit.backend, host=kit.host)
        self.provider = provider(
            runtime,
            incognito=lambda session, _context: bool(session.state.get("kit", {}).get("incognito")),
            goal_turn=lambda session, _context: bool(session.state.get("kit", {}).get("goal_turn")),
        )
        self.client = FakeChatClient(self._reply)
        self.agent = Agent(
            self.client,
            tools=[kit_lookup_tool, kit_guarded_delete],
            context_providers=[InMemoryHistoryProvider(store_context_messages=store_context_messages), self.provider],
            require_per_service_call_history_persistence=per_call_persistence,
        )
        self.sessions: dict[str, AgentSession] = {}
        self._session = ""
        self._next: ToolCall | None = None
        self._pending: Any = None  # the paused run's approval request
        self._calls: dict[str, list[ModelCall]] = {}

    def _reply(self, messages: Sequence[Message]) -> ChatResponse:
        seen = self.client.seen[-1]  # the client records the call (with its instructions) first
        instructions = seen.instructions if isinstance(seen.instructions, str) else ""
        model_call = [SeenMessage("system", instructions)] if instructions else []
        model_call += [s for m in messages for s in seen_messages(m)]
        self._calls.setdefault(self._session, []).append(ModelCall(model_call))
        last = [m for m in messages if not is_projection(m)][-1]
        if any(c.type in ("function_result", "function_approval_response") for c in last.contents):
            result = next((str(c.result) for c in last.contents if c.type == "function_result"), "")
            return ChatResponse(messages=[Message(role="assistant", contents=[f"answer after {result}"])])
        call, self._next = self._next, None
        if call is None:
            return ChatResponse(messages=[Message(role="assistant", contents=["answer"])])
        content = Content.from_function_call(call_id=call.call_id, name=call.name, arguments=call.args)
        return ChatResponse(messages=[Message(role="assistant", contents=[content])])

    def _run(self, message: str | Message, session: AgentSession) -> Any:
        if not self.streaming:
            return asyncio.run(self.agent.run(message, session=session))

        async def streamed() -> Any:
            stream = self.agent.run(message, session=session, stream=True)
            async for _update in stream:
                pass
            return await stream.get_final_response()

        return asyncio.run(streamed())

    def _session_for(self, session_id: str, **flags: bool) -> AgentSession:
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = self.agent.create_session(session_id=session_id)
        session.state["kit"] = dict(flags)
        self._session = session_id
        return session

    def run_turn(
        self,
        session_id: str,
        text: str,
        *,
        tool_call: ToolCall | None = None,
        incognito: bool = False,
        goal_turn: bool = False,
    ) -> None:
        session = self._session_for(session_id, incognito=incognito, goal_turn=goal_turn)
        self._next = tool_call
        self._run(text, session)

    def pause_turn(self, session_id: str, text: str) -> None:
        session = self._session_for(session_id)
        self._next = ToolCall(PAUSE_TOOL, {"branch": "old"}, "kit-pause")
        response = self._run(text, session)
        if len(response.user_input_requests) != 1:
            raise AssertionError(f"the guarded tool did not pause the run: {response.user_input_requests}")
        self._pending = response.user_input_requests[0]

    def resume(self, session_id: str) -> None:
        session = self._session_for(session_id)
        approval = Message(role="user", contents=[self._pending.to_function_approval_response(True)])
        self._run(approval, session)

    def model_calls(self, session_id: str) -> Sequence[ModelCall]:
        return list(self._calls.get(session_id, ()))

    def stored(self, session_id: str) -> str:
        session = self.sessions.get(session_id)
        return stored_json(session) if session is not None else ""


class TestAgentFrameworkProvider(RuntimeConformance):
    # Async only: the framework has no sync run. Resume is the tool-approval round trip.
    capabilities: ClassVar[frozenset[str]] = frozenset({"tools", "incognito", "goal_turn", "resume"})

    @pytest.fixture
    def runtime_harness(self, runtime_kit: RuntimeKit) -> AgentFrameworkHarness:
        return AgentFrameworkHarness(runtime_kit)


class TestAgentFrameworkProviderPerCallPersistence(TestAgentFrameworkProvider):
    """The framework's per-service-call history persistence (it loads and persists around every
    model call, splitting context from input by attribution): the same contract holds."""

    @pytest.fixture
    def runtime_harness(self, runtime_kit: RuntimeKit) -> AgentFrameworkHarness:
        return AgentFrameworkHarness(runtime_kit, per_call_persistence=True)


class TestAgentFrameworkProviderStreaming(TestAgentFrameworkProvider):
    """The same contract on streamed runs (``agent.run(..., stream=True)``)."""

    @pytest.fixture
    def runtime_harness(self, runtime_kit: RuntimeKit) -> AgentFrameworkHarness:
        return AgentFrameworkHarness(runtime_kit, streaming=True)


def test_the_harness_reports_what_the_framework_stores_and_the_model_saw(tmp_path: Any) -> None:
    """The harness itself: stored() is the serialised session (it holds the conversation), and a
    tool turn's second call shows the call/result pair with the kit's call id."""
    from contextplane.backends.sqlite import SQLiteBackend
    from contextplane.testing import new_runtime_kit

    backend = SQLiteBackend(tmp_path / "k.sqlite3")
    try:
        harness = AgentFrameworkHarness(new_runtime_kit(backend))
        harness.run_turn("h", "look it up", tool_call=ToolCall(KIT_TOOL, {"topic": "t"}, "c-1"))
        first, second = harness.model_calls("h")
        assert [m.role for m in first.conversation] == ["user", "user"]
        assert [(m.role, m.tool_call_ids, m.tool_call_id) for m in second.conversation[1:3]] == [
            ("assistant", ("c-1",), None),
            ("tool", (), "c-1"),
        ]
        assert second.conversation[2].text == "looked up t"
        stored = harness.stored("h")
        assert "look it up" in stored and "looked up t" in stored
    finally:
        backend.close()


class ResumeBlindProvider(ContextPlaneProvider):
    """Broken: treats the approval run as a new turn (a fresh counter, an empty query)."""

    def request(
        self, session: AgentSession, context: SessionContext, state: dict[str, Any], history: Sequence[Message] = ()
    ) -> ProjectionRequest:
        if not run_query(context.input_messages):
            state.pop(TURN_KEY, None)
        return super().request(session, context, state, history)


def _failures(harness: Callable[[RuntimeKit], Any], tmp_path: Any, ids: set[str]) -> dict[str, str]:
    """The checks ``ids`` run on a fresh kit with ``harness``: the failing ids and messages."""
    from contextplane.backends.sqlite import SQLiteBackend
    from contextplane.testing import new_runtime_kit, run_checks

    @contextmanager
    def fixtures(req: Requirement) -> Iterator[dict[str, Any]]:
        backend = SQLiteBackend(tmp_path / f"{req.id}.sqlite3")
        try:
            kit = new_runtime_kit(backend)
            yield {"runtime_harness": harness(kit), "runtime_kit": kit}
        finally:
            backend.close()

    return run_checks(TestAgentFrameworkProvider, fixtures, only=ids).failed


def test_the_kit_fails_a_history_provider_that_stores_the_projection(tmp_path: Any) -> None:
    """The framework's opt-in ``store_context_messages=True`` persists the projection: the kit
    must see it in the session, so this harness's ``stored()`` is proven to bite."""
    ids = {"RUNTIME-NEVER-STORED", "RUNTIME-INCOGNITO-WRITES-NOTHING", "RUNTIME-PROJECTION-SEEN"}
    failed = _failures(lambda kit: AgentFrameworkHarness(kit, store_context_messages=True), tmp_path, ids)
    assert set(failed) == {"RUNTIME-NEVER-STORED", "RUNTIME-INCOGNITO-WRITES-NOTHING"}, failed
    assert "KITROW{" in failed["RUNTIME-NEVER-STORED"]


def test_the_kit_fails_a_provider_that_opens_a_new_turn_on_the_approval_run(tmp_path: Any) -> None:
    failed = _failures(
        lambda kit: AgentFrameworkHarness(kit, provider=ResumeBlindProvider), tmp_path, {"RUNTIME-RECOMPOSE-ON-RESUME"}
    )
    assert set(failed) == {"RUNTIME-RECOMPOSE-ON-RESUME"}, failed
