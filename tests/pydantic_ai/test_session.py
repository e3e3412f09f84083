"""A 20-turn PydanticAI session through the capability (ADR D2): the history PydanticAI carries
between runs, saved as its own JSON and loaded back each turn as an application would, holds no
byte of projected context on any turn; every request's projection fits the budget; the stable
prefix (the instructions) is byte-identical on every request of the session.

The sections offer far more than the budget (a growing memory section), so the budget is
actually enforced, not met by accident."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo

from contextplane import ContextSection, PromptSection, Row, Shed, hookimpl, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.runtime import Runtime, open_runtime
from contextplane_pydantic_ai import PROJECTION_MARKER, ContextPlaneCapability
from contextplane_pydantic_ai.codec import ProjectionPart

from .conftest import CONFIG, MEMORY, WS, Recorder
from .test_capability import PATHS, Run
from .test_kit import seen_messages

TURNS = 20
BUDGET_TOKENS = 600
#: In every projected row; the stored history must never hold it.
ROW = "SESSION-ROW{"


class GrowingSections:
    """A working-state row, and a memory section offering 10 rows of ~300 chars per turn so
    far (turn 19: 200 rows, ~15k tokens), against a budget of 600 tokens."""

    plugin_name = "growing"

    @staticmethod
    def _working(req: Any) -> list[Row]:
        return [Row("ws", 1, f"working on {req.query} {ROW}{req.turn_index}}}")]

    @staticmethod
    def _memory(req: Any) -> list[Row]:
        offered = 10 * (req.turn_index + 1)
        return [
            Row(f"m{n}", offered - n, f"{ROW}{req.turn_index}|{n}}} recalled fact {n}: " + "x" * 280)
            for n in range(offered)
        ]

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        register(ContextSection("working", 10, Shed.NEVER, self._working, WS))
        register(ContextSection("memory", 20, Shed.DROP_ROWS, self._memory, MEMORY, carries_memory=True))

    @hookimpl
    def register_prompt_sections(self, register: Callable[[PromptSection], None]) -> None:
        register(PromptSection("identity", lambda _ctx: "You are the session agent.", authority=10))
        register(PromptSection("operator_guidelines", lambda _ctx: "Answer in one line.", authority=50))


@pytest.fixture
def session_runtime(tmp_path: Path) -> Iterator[tuple[Runtime, SQLiteBackend]]:
    host = plugin_host_with([GrowingSections()], structure(CONFIG))
    with (
        closing(SQLiteBackend(tmp_path / "session.sqlite3", config=host.config)) as backend,
        open_runtime(host.config, backend=backend, host=host) as runtime,
    ):
        yield runtime, backend


def every_fifth_turn_looks_up(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
    """Answer, except on turns 4, 9, 14, 19, which call ``lookup`` first (two model requests)."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    if any(isinstance(p, ToolReturnPart) for p in last.parts):
        return ModelResponse(parts=[TextPart("found it")])
    turn = sum(
        1 for m in messages if isinstance(m, ModelResponse) and m.parts and isinstance(m.parts[-1], TextPart)
    )
    if turn % 5 == 4:
        return ModelResponse(parts=[ToolCallPart("lookup", {"topic": f"t{turn}"}, tool_call_id=f"c{turn}")])
    return ModelResponse(parts=[TextPart(f"answer {turn}")])


def projection_of(messages: list[ModelMessage]) -> str:
    """The projection a model request carried (the capability's marked part)."""
    parts = [
        p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ProjectionPart)
    ]
    assert len(parts) == 1, f"{len(parts)} projection parts in one request"
    content = parts[0].content
    assert isinstance(content, str)
    return content


@PATHS
def test_twenty_turns_store_no_derived_context_fit_the_budget_and_keep_the_prefix(
    run: Run, session_runtime: tuple[Runtime, SQLiteBackend]
) -> None:
    runtime, backend = session_runtime
    model = Recorder(every_fifth_turn_looks_up)
    agent = Agent(
        model.model(),
        capabilities=[ContextPlaneCapability(runtime, session_id="long", budget_tokens=BUDGET_TOKENS)],
    )

    @agent.tool_plain
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"looked up {topic}"

    saved = b"[]"  # the history as the application keeps it between runs: PydanticAI's JSON
    prefix = runtime.prefix
    assert prefix is not None and not isinstance(prefix, str)
    shed_turns = 0
    for turn in range(TURNS):
        before = len(model.seen)
        history = ModelMessagesTypeAdapter.validate_json(saved)
        result = run(agent, f"question {turn}", message_history=history)
        saved = ModelMessagesTypeAdapter.dump_json(result.all_messages())
        calls = model.seen[before:]
        assert len(calls) == (2 if turn % 5 == 4 else 1), f"turn {turn}: {len(calls)} model requests"

        # 0 bytes of derived context in what PydanticAI stores, which still holds the conversation.
        text = saved.decode()
        assert ROW not in text and PROJECTION_MARKER not in text, f"turn {turn} stored projected context"
        for call in calls:
            assert projection_of(call.messages) not in text
        assert all(f"question {n}" in text for n in range(turn + 1))
        kinds = [type(p).__name__ for m in result.all_messages() for p in m.parts]
        assert "ProjectionPart" not in kinds and kinds.count("UserPromptPart") == turn + 1

        # Every request's projection within the budget (tokens = chars // 4), this turn's own.
        for call in calls:
            projected = projection_of(call.messages)
            assert len(projected) // 4 <= BUDGET_TOKENS, f"turn {turn}: {len(projected)} chars"
            assert f"working on question {turn} {ROW}{turn}}}" in projected
        # The offer outgrows the budget from turn 1 on: the budget, not the offer, bounds it.
        delivered = projection_of(calls[0].messages).count(f"{ROW}{turn}|")
        shed_turns += delivered < 10 * (turn + 1)

        # The stable prefix: the instructions of every request, byte for byte.
        assert [c.instructions for c in calls] == [prefix.text] * len(calls)

    assert shed_turns >= TURNS - 1
    # The conversation before the projection only grows: each request's is a prefix of the next
    # one's, so a provider's prefix cache holds across the session (the projection comes last).
    history = [
        [m for m in seen_messages(c.messages, c.instructions) if ROW not in m.text] for c in model.seen
    ]
    for n in range(1, len(history)):
        assert history[n][: len(history[n - 1])] == history[n - 1], f"request {n}"
    assert len(history[-1]) > 2 * TURNS
    snapshots = backend.snapshots.list("long")
    assert len(snapshots) == TURNS + TURNS // 5
    assert {s.prefix_sha256 for s in snapshots} == {prefix.sha256}
