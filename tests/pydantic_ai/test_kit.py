"""The runtime conformance kit on the PydanticAI capability, against the real framework.

``PydanticAIHarness`` drives a real ``Agent`` with ``ContextPlaneCapability`` and PydanticAI's
own ``FunctionModel`` (no network): the kit's ``kit_lookup`` tool is a plain tool the model
calls when the kit asks, ``kit_pause`` needs approval, so a run stops with
``DeferredToolRequests`` and a second run resumes the turn with ``DeferredToolResults``
(PydanticAI's human-in-the-loop pause, which is what ``ResumableHarness`` means). What the
framework stores is the message history carried between runs, as PydanticAI's own JSON.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from contextplane.backends.sqlite import SQLiteBackend
from contextplane.runtime import Runtime, open_runtime
from contextplane.testing import (
    KIT_TOOL,
    ModelCall,
    Requirement,
    RuntimeConformance,
    RuntimeKit,
    SeenMessage,
    ToolCall,
    kit_lookup,
    new_runtime_kit,
    run_checks,
)
from contextplane_pydantic_ai import ContextPlaneCapability
from contextplane_pydantic_ai.codec import message_text

PAUSE_TOOL = "kit_pause"


def _content(part: UserPromptPart | SystemPromptPart) -> str:
    content = part.content
    return content if isinstance(content, str) else "".join(c for c in content if isinstance(c, str))


def seen_messages(messages: Sequence[ModelMessage], instructions: str | None) -> list[SeenMessage]:
    """What a model call received, in the kit's plain form: the instructions as the system
    prompt, then one message per request part (a request of a tool result and the projection
    is two messages to a provider: the tool result, then a user message) and one per response."""
    seen = [SeenMessage("system", instructions)] if instructions else []
    for message in messages:
        if isinstance(message, ModelResponse):
            calls = tuple(p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart))
            seen.append(SeenMessage("assistant", message_text(message), calls))
            continue
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                seen.append(SeenMessage("system", _content(part)))
            elif isinstance(part, UserPromptPart):
                seen.append(SeenMessage("user", _content(part)))
            elif isinstance(part, ToolReturnPart):
                seen.append(SeenMessage("tool", part.model_response_str(), (), part.tool_call_id))
            elif isinstance(part, RetryPromptPart):
                role = "tool" if part.tool_name else "user"
                seen.append(
                    SeenMessage(
                        role, part.model_response(), (), part.tool_call_id if part.tool_name else None
                    )
                )
    return seen


class PydanticAIHarness:
    """One ``Agent`` with the capability on the kit's runtime, a scripted ``FunctionModel``, and
    the message history of each session kept as the application would keep it."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        asynchronous: bool = False,
        capability: type[ContextPlaneCapability] = ContextPlaneCapability,
    ) -> None:
        #: Drive the agent with ``agent.run`` (awaited) instead of ``agent.run_sync``.
        self.asynchronous = asynchronous
        self.agent: Agent[dict[str, Any], str | DeferredToolRequests] = Agent(
            FunctionModel(self._reply),
            output_type=[str, DeferredToolRequests],
            capabilities=[capability(runtime)],
        )
        self.agent.tool_plain(name=KIT_TOOL)(kit_lookup)

        @self.agent.tool_plain(name=PAUSE_TOOL, requires_approval=True)
        def kit_pause(question: str) -> str:
            """Ask the operator and wait for the answer."""
            return f"operator approved {question}"

        self.histories: dict[str, list[ModelMessage]] = {}
        self._session = ""
        self._next: ToolCall | None = None
        self._calls: dict[str, list[ModelCall]] = {}

    def _reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self._calls.setdefault(self._session, []).append(
            ModelCall(seen_messages(messages, info.instructions))
        )
        last = messages[-1]
        results = (
            [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        )
        if results:
            return ModelResponse(parts=[TextPart(f"answer after {results[-1].model_response_str()}")])
        call, self._next = self._next, None
        if call is None:
            return ModelResponse(parts=[TextPart("answer")])
        return ModelResponse(parts=[ToolCallPart(call.name, call.args, tool_call_id=call.call_id)])

    def _run(self, session_id: str, prompt: str | None, **kwargs: Any) -> Any:
        self._session = session_id
        history = self.histories.get(session_id, [])
        if self.asynchronous:
            result = asyncio.run(self.agent.run(prompt, message_history=history, **kwargs))
        else:
            result = self.agent.run_sync(prompt, message_history=history, **kwargs)
        self.histories[session_id] = result.all_messages()
        return result

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
        deps = {"session_id": session_id, "incognito": incognito, "goal_turn": goal_turn}
        result = self._run(session_id, text, deps=deps)
        assert isinstance(result.output, str), result.output

    def pause_turn(self, session_id: str, text: str) -> None:
        self._next = ToolCall(PAUSE_TOOL, {"question": "ok?"}, "kit-pause")
        result = self._run(session_id, text, deps={"session_id": session_id})
        assert isinstance(result.output, DeferredToolRequests), result.output

    def resume(self, session_id: str) -> None:
        approvals = DeferredToolResults(approvals={"kit-pause": True})
        result = self._run(session_id, None, deps={"session_id": session_id}, deferred_tool_results=approvals)
        assert isinstance(result.output, str), result.output

    def model_calls(self, session_id: str) -> Sequence[ModelCall]:
        return list(self._calls.get(session_id, ()))

    def stored(self, session_id: str) -> str:
        return ModelMessagesTypeAdapter.dump_json(self.histories.get(session_id, [])).decode()


@pytest.fixture
def kit_runtime(runtime_kit: RuntimeKit) -> Iterator[Runtime]:
    with open_runtime(runtime_kit.host.config, backend=runtime_kit.backend, host=runtime_kit.host) as rt:
        yield rt


class TestPydanticAICapability(RuntimeConformance):
    capabilities: ClassVar[frozenset[str]] = frozenset({"tools", "incognito", "goal_turn", "resume"})

    @pytest.fixture
    def runtime_harness(self, kit_runtime: Runtime) -> PydanticAIHarness:
        return PydanticAIHarness(kit_runtime)


class TestPydanticAICapabilityAsync(TestPydanticAICapability):
    @pytest.fixture
    def runtime_harness(self, kit_runtime: Runtime) -> PydanticAIHarness:
        return PydanticAIHarness(kit_runtime, asynchronous=True)


# --- the harness catches a broken capability, by requirement id --------------------------------


class PersistingCapability(ContextPlaneCapability):
    """Appends the projection to the run's own messages (what the issue's v1 bug and a history
    processor do), so PydanticAI stores it."""

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        delivered = await super().before_model_request(ctx, request_context)
        ctx.messages.append(delivered.messages[-1])
        return delivered


class ComposingTwiceCapability(ContextPlaneCapability):
    """Forgets the run's turn after each model request, so a tool round composes again."""

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        delivered = await super().before_model_request(ctx, request_context)
        self._turn = None
        return delivered


class SplittingCapability(ContextPlaneCapability):
    """Places the projection right after the newest model response, before its tool results.
    PydanticAI re-pairs it: its history cleaning (``_clean_message_history``, run on every
    model request) merges the consecutive requests with the tool results first, so this bug
    never reaches the model; the test pins that, since the capability relies on it nowhere."""

    async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
        delivered = await super().before_model_request(ctx, request_context)
        *rest, frame = delivered.messages
        at = max((i for i, m in enumerate(rest) if isinstance(m, ModelResponse)), default=len(rest) - 1)
        return replace(delivered, messages=[*rest[: at + 1], frame, *rest[at + 1 :]])


def _failures(capability: type[ContextPlaneCapability], tmp_path: Path) -> dict[str, str]:
    """Every runtime check, run on a fresh kit with ``capability`` in the harness: the failing
    ids and their messages."""

    @contextmanager
    def fixtures(req: Requirement) -> Iterator[dict[str, Any]]:
        backend = SQLiteBackend(tmp_path / f"{req.id}.sqlite3")
        kit = new_runtime_kit(backend)
        try:
            with open_runtime(kit.host.config, backend=backend, host=kit.host) as runtime:
                yield {
                    "runtime_harness": PydanticAIHarness(runtime, capability=capability),
                    "runtime_kit": kit,
                }
        finally:
            backend.close()

    return run_checks(TestPydanticAICapability, fixtures).failed


@pytest.mark.parametrize(
    ("capability", "broken"),
    [
        (ContextPlaneCapability, set()),
        (PersistingCapability, {"RUNTIME-NEVER-STORED", "RUNTIME-INCOGNITO-WRITES-NOTHING"}),
        (ComposingTwiceCapability, {"RUNTIME-ONE-COMPOSE-PER-TURN"}),
        (SplittingCapability, set()),
    ],
    ids=["the-capability", "persists", "composes-twice", "splits-a-pair"],
)
def test_the_harness_fails_a_broken_capability_by_requirement_id(
    capability: type[ContextPlaneCapability], broken: set[str], tmp_path: Path
) -> None:
    failed = _failures(capability, tmp_path)
    assert set(failed) == broken, failed
