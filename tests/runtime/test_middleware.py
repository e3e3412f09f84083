"""ContextPlaneMiddleware on a real create_agent graph: project per turn, never persist (D2)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.types import Command, interrupt

from contextplane.backends.sqlite import SQLiteBackend
from contextplane_langgraph import PROJECTION_KEY, ProjectionCarrier, is_context_frame, without_projection

from .conftest import (
    MARK,
    MEMTEXT,
    TOOL_SPANS,
    cfg,
    make_agent,
    meeting,
    overlapped,
    projection_messages,
    saver_dump,
    tool_then_answer,
)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Any, host: Any) -> Iterator[Any]:
    """The runtime tests' backend, on the embedded SQLite file and on PostgreSQL."""
    if request.param == "postgres":
        yield request.getfixturevalue("pg_backend_factory")(config=host.config)
        return
    b = SQLiteBackend(tmp_path / "m.sqlite3", config=host.config)
    yield b
    b.close()


MARKER_RE = re.compile(r"MARK\{([^|}]*)\|(\d+)\|([^}]*)\}")


def markers_in(text: str) -> set[tuple[str, int, str]]:
    return {(s, int(t), q) for s, t, q in MARKER_RE.findall(text)}


def operator_text(messages: list[Any]) -> str:
    return next(m.content for m in reversed(messages) if m.type == "human" and not is_context_frame(m))


def assert_each_call_sees_only_its_own_turn(model: Any) -> None:
    for messages in model.calls:
        frames = projection_messages(messages)
        assert len(frames) == 1, f"expected exactly one projection, got {len(frames)}"
        assert messages[-1] is frames[0], "the projection must be the last message"
        question = operator_text(messages)
        thread = question.split(":")[0]
        turn = sum(1 for m in messages if m.type == "human" and not is_context_frame(m)) - 1
        # Exactly one marker in the whole model input: this thread, this turn, this question.
        everything = "\n".join(str(m.content) for m in messages)
        assert markers_in(everything) == {(thread, turn, question)}


# --- concurrency --------------------------------------------------------------------------


def test_concurrent_sync_turns_stay_separate(host, sections, backend) -> None:
    TOOL_SPANS.clear()
    agent, model, saver, _mw = make_agent(host, backend=backend)

    async def main() -> None:
        await asyncio.gather(
            *(
                asyncio.to_thread(agent.invoke, {"messages": [HumanMessage(f"{t}:question one")]}, cfg(t))
                for t in ("alpha", "beta")
            )
        )
        await asyncio.gather(
            *(
                asyncio.to_thread(agent.invoke, {"messages": [HumanMessage(f"{t}:question two")]}, cfg(t))
                for t in ("alpha", "beta")
            )
        )

    with meeting(2):
        asyncio.run(main())
    assert overlapped("alpha", "beta"), "the two threads' turns did not run concurrently"
    # 2 threads x 2 turns x (tool call + answer) model calls, each with its own projection.
    assert len(model.calls) == 8
    assert_each_call_sees_only_its_own_turn(model)
    assert MARK not in saver_dump(saver)
    for t in ("alpha", "beta"):
        state = agent.get_state(cfg(t))
        assert PROJECTION_KEY not in state.values
        assert MARK not in repr(state)
        assert all(MARK not in repr(s) for s in agent.get_state_history(cfg(t)))
    # Composed once per turn (before_agent), never per model call.
    assert sorted((d.session_id, d.turn_index, d.reason) for d in sections.of("working")) == [
        ("alpha", 0, "turn"),
        ("alpha", 1, "turn"),
        ("beta", 0, "turn"),
        ("beta", 1, "turn"),
    ]
    assert sorted(s.key for s in backend.snapshots.list()) == [
        (t, turn, call) for t in ("alpha", "beta") for turn in (0, 1) for call in (0, 1)
    ]


def test_concurrent_async_turns_stay_separate(host, sections, backend) -> None:
    TOOL_SPANS.clear()
    agent, model, saver, _mw = make_agent(host, backend=backend)

    async def main() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(
                agent.ainvoke({"messages": [HumanMessage(f"{t}:async question")]}, cfg(t))
                for t in ("a1", "a2", "a3")
            )
        )

    with meeting(3):
        results = asyncio.run(main())
    assert overlapped("a1", "a2") and overlapped("a2", "a3")
    assert all(PROJECTION_KEY not in r for r in results)
    assert all(MARK not in repr(r) for r in results)
    assert len(model.calls) == 6
    assert_each_call_sees_only_its_own_turn(model)
    assert MARK not in saver_dump(saver)
    assert all(MARK not in repr(agent.get_state(cfg(t))) for t in ("a1", "a2", "a3"))
    # Capture survived asyncio: one snapshot per model call, keyed (session, turn, call).
    keys = sorted(s.key for s in backend.snapshots.list())
    assert keys == [(t, 0, c) for t in ("a1", "a2", "a3") for c in (0, 1)]


def test_turns_do_not_accumulate(host) -> None:
    agent, model, saver, _mw = make_agent(host, policy=lambda _m: AIMessage("ok"), tools=[])
    for n in range(5):
        agent.invoke({"messages": [HumanMessage(f"solo:turn {n}")]}, cfg("solo"))
    assert len(model.calls) == 5
    for n, messages in enumerate(model.calls):
        frames = projection_messages(messages)
        assert len(frames) == 1
        assert markers_in(frames[0].content) == {("solo", n, f"solo:turn {n}")}
        # History carries the operator's and the model's messages only.
        assert [m.type for m in messages] == ["human", "ai"] * n + ["human", "human"]
    stored = agent.get_state(cfg("solo")).values["messages"]
    assert len(stored) == 10
    assert not any(is_context_frame(m) for m in stored)
    assert MARK not in saver_dump(saver)


# --- resume -------------------------------------------------------------------------------


@tool
def ask_operator(question: str) -> str:
    """Ask the operator and wait for the answer."""
    answer = interrupt({"question": question})
    return f"operator said {answer}"


def invoker(agent: Any, mode: str) -> Any:
    """``agent.invoke``, or ``agent.ainvoke`` run to completion: the sync hooks or the async ones."""
    if mode == "invoke":
        return agent.invoke
    return lambda payload, config: asyncio.run(agent.ainvoke(payload, config))


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_resume_after_interrupt_in_a_tool_recomposes_with_the_turns_input(
    host, sections, injection_log, mode: str
) -> None:
    agent, model, saver, _mw = make_agent(
        host, tools=[ask_operator], policy=tool_then_answer("ask_operator", {"question": "ok?"})
    )
    invoke = invoker(agent, mode)
    first = invoke({"messages": [HumanMessage("hitl:first")]}, cfg("hitl"))
    assert [i.value for i in first["__interrupt__"]] == [{"question": "ok?"}]
    invoke(Command(resume="fine"), cfg("hitl"))
    second = invoke({"messages": [HumanMessage("hitl:second")]}, cfg("hitl"))
    assert [i.value for i in second["__interrupt__"]] == [{"question": "ok?"}]
    calls_before = len(model.calls)
    log_before = len(injection_log.rows)

    invoke(Command(resume="yes"), cfg("hitl"))

    # One recomposition per resumed run, each queried with its own turn's operator input.
    resumed = [d for d in sections.of("working") if d.reason == "resume"]
    assert [(d.session_id, d.turn_index, d.query) for d in resumed] == [
        ("hitl", 0, "hitl:first"),
        ("hitl", 1, "hitl:second"),
    ]
    assert injection_log.rows[log_before:] == [
        ("hitl", 1, {"working": ("ws-1", "ws-2"), "memory": ("mem-1",), "digest": ("digest-1",)})
    ]
    after = model.calls[calls_before:]
    assert len(after) == 1
    assert markers_in(projection_messages(after[0])[0].content) == {("hitl", 1, "hitl:second")}
    assert after[0][-2].content == "operator said yes"
    assert MARK not in saver_dump(saver)


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def test_resume_through_human_in_the_loop_middleware(host, sections) -> None:
    agent, model, saver, _mw = make_agent(
        host,
        tools=[delete_file],
        policy=tool_then_answer("delete_file", {"path": "/tmp/x"}),
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"delete_file": True})],
    )
    result = agent.invoke({"messages": [HumanMessage("gate:please delete")]}, cfg("gate"))
    assert result["__interrupt__"]
    assert len(model.calls) == 1

    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg("gate"))

    resumed = [d for d in sections.of("working") if d.reason == "resume"]
    assert [(d.turn_index, d.query) for d in resumed] == [(0, "gate:please delete")]
    assert len(model.calls) == 2
    second = model.calls[1]
    assert second[-2].content == "deleted /tmp/x"
    assert len(projection_messages(second)) == 1
    assert markers_in(second[-1].content) == {("gate", 0, "gate:please delete")}
    assert MARK not in saver_dump(saver)


def test_a_folded_steer_is_the_query_but_guard_notes_and_summaries_are_not(host, sections) -> None:
    agent, _model, _saver, _mw = make_agent(host, policy=lambda _m: AIMessage("ok"), tools=[])
    agent.invoke(
        {
            "messages": [
                HumanMessage("steer:start"),
                HumanMessage("steer:actually, this instead", additional_kwargs={"steer": True}),
                HumanMessage("GUARD note", additional_kwargs={"guard_note": True}),
                HumanMessage("SUMMARY of earlier", additional_kwargs={"lc_source": "summarization"}),
            ]
        },
        cfg("steer"),
    )
    [draw] = sections.of("working")
    assert (draw.turn_index, draw.query) == (0, "steer:actually, this instead")


# --- migration ----------------------------------------------------------------------------


def test_legacy_frames_are_stripped_from_the_model_view_and_kept_in_the_checkpoint(host, backend) -> None:
    agent, model, _saver, _mw = make_agent(
        host, policy=lambda _m: AIMessage("ok"), tools=[], backend=backend
    )
    legacy = HumanMessage(
        "<injected_memory>LEGACY-FRAME stale fact</injected_memory>",
        additional_kwargs={"context_frame": True},
        id="legacy-frame-1",
    )
    # A v1 thread: operator message, its stored frame, the answer.
    agent.update_state(
        cfg("old"),
        {"messages": [HumanMessage("old:v1 question", id="h0"), legacy, AIMessage("v1 answer", id="a0")]},
    )
    agent.invoke({"messages": [HumanMessage("old:v2 question")]}, cfg("old"))

    [seen] = model.calls
    assert "LEGACY-FRAME" not in "".join(str(m.content) for m in seen)
    assert [m.content for m in seen[:-1]] == ["old:v1 question", "v1 answer", "old:v2 question"]
    assert markers_in(seen[-1].content) == {("old", 1, "old:v2 question")}
    stored = agent.get_state(cfg("old")).values["messages"]
    assert [m.id for m in stored if is_context_frame(m)] == ["legacy-frame-1"]
    [snap] = backend.snapshots.list("old")
    assert [(f.message_id, f.chars) for f in snap.stripped] == [("legacy-frame-1", len(legacy.content))]


# --- modes --------------------------------------------------------------------------------


def test_incognito_turn_has_no_memory_anywhere_in_streams(host, sections, injection_log) -> None:
    agent, model, saver, _mw = make_agent(host, incognito=True)
    chunks = list(
        agent.stream(
            {"messages": [HumanMessage("inc:secret question")]},
            cfg("inc"),
            stream_mode=["values", "updates", "debug", "tasks", "checkpoints", "messages"],
        )
    )

    async def events() -> list[Any]:
        return [
            e
            async for e in agent.astream_events(
                {"messages": [HumanMessage("inc:second")]}, cfg("inc"), version="v2"
            )
        ]

    evs = asyncio.run(events())
    assert sections.of("memory") == [] and sections.of("digest") == []
    assert [d.incognito for d in sections.of("working")] == [True, True]
    assert injection_log.rows == []
    assert all(MEMTEXT not in "".join(str(m.content) for m in call) for call in model.calls)
    assert MEMTEXT not in repr(chunks) and MEMTEXT not in repr(evs)
    # The carrier shows up in streams by reference only, never as text.
    assert any(PROJECTION_KEY in repr(c) for c in chunks)
    assert MARK not in repr(chunks)
    assert MARK not in saver_dump(saver)


def test_incognito_from_runtime_context(host, sections) -> None:
    agent, model, _saver, _mw = make_agent(host, policy=lambda _m: AIMessage("ok"), tools=[])
    agent.invoke({"messages": [HumanMessage("ctx:q")]}, cfg("ctx"), context={"incognito": True})
    agent.invoke({"messages": [HumanMessage("ctx:q2")]}, cfg("ctx"))
    assert [d.incognito for d in sections.of("working")] == [True, False]
    assert len(sections.of("memory")) == 1
    assert MEMTEXT not in model.calls[0][-1].content
    assert MEMTEXT in model.calls[1][-1].content


def test_goal_turn_has_no_digest(host, sections) -> None:
    agent, model, _saver, _mw = make_agent(host, policy=lambda _m: AIMessage("ok"), tools=[], goal_turn=True)
    agent.invoke({"messages": [HumanMessage("goal:work")]}, cfg("goal"))
    assert sections.of("digest") == []
    assert len(sections.of("memory")) == 1
    assert "DIGEST" not in model.calls[0][-1].content
    assert "prior_sessions" not in model.calls[0][-1].content


# --- prefix, caching, streams -------------------------------------------------------------


def test_stable_prefix_is_the_system_message(host) -> None:
    agent, model, _saver, mw = make_agent(
        host, policy=lambda _m: AIMessage("ok"), tools=[], stable_prefix=True
    )
    agent.invoke({"messages": [HumanMessage("sys:q")]}, cfg("sys"))
    system = model.calls[0][0]
    assert system.type == "system"
    assert system.content == "You are the test agent. PREFIX-IDENTITY\n\nBe exact. PREFIX-RULES"
    assert mw.stable_prefix is not None and mw.stable_prefix.order == ("identity", "operator_guidelines")


class OuterCaching(AgentMiddleware):
    """Stands in for langchain_anthropic's AnthropicPromptCachingMiddleware (same mechanism)."""

    def wrap_model_call(self, request, handler):
        return handler(
            request.override(
                model_settings={**request.model_settings, "cache_control": {"type": "ephemeral"}}
            )
        )


def test_cache_breakpoints_go_on_the_prefix_and_last_history_block_never_the_projection(host) -> None:
    agent, model, _saver, _mw = make_agent(
        host, policy=lambda _m: AIMessage("ok"), tools=[], stable_prefix=True, middleware=[OuterCaching()]
    )
    agent.invoke({"messages": [HumanMessage("cache:one")]}, cfg("cache"))
    agent.invoke({"messages": [HumanMessage("cache:two")]}, cfg("cache"))
    seen = model.calls[1]
    marked = [
        i
        for i, m in enumerate(seen)
        if isinstance(m.content, list) and any("cache_control" in b for b in m.content)
    ]
    assert marked == [0, len(seen) - 2]
    assert seen[0].content[0]["cache_control"] == {"type": "ephemeral"}
    assert isinstance(seen[-1].content, str) and is_context_frame(seen[-1])
    # The provider never sees the setting that would mark the last (volatile) block.
    assert all("cache_control" not in kw for kw in model.call_kwargs)
    # Stored messages were copied, not marked in place.
    stored = agent.get_state(cfg("cache")).values["messages"]
    assert all(isinstance(m.content, str) for m in stored)


def test_without_projection_filters_stream_chunks(host) -> None:
    agent, _model, _saver, _mw = make_agent(host, policy=lambda _m: AIMessage("ok"), tools=[])
    chunks = list(
        agent.stream(
            {"messages": [HumanMessage("st:q")]}, cfg("st"), stream_mode=["values", "updates", "debug"]
        )
    )
    assert any(PROJECTION_KEY in repr(c) for c in chunks)
    assert not any(PROJECTION_KEY in repr(without_projection(c)) for c in chunks)
    carrier = next(
        c[1]["ContextPlaneMiddleware.before_agent"][PROJECTION_KEY]
        for c in chunks
        if c[0] == "updates" and "ContextPlaneMiddleware.before_agent" in c[1]
    )
    assert isinstance(carrier, ProjectionCarrier)
    assert MARK in carrier.text and MARK not in repr(carrier)


def test_snapshot_rows_for_every_model_call_with_keys_and_ids(host, backend) -> None:
    agent, model, _saver, mw = make_agent(host, backend=backend, stable_prefix=True)
    agent.invoke({"messages": [HumanMessage("snap:one")]}, cfg("snap"))
    agent.invoke({"messages": [HumanMessage("snap:two")]}, cfg("snap"))
    snaps = backend.snapshots.list("snap")
    assert [s.key for s in snaps] == [("snap", 0, 0), ("snap", 0, 1), ("snap", 1, 0), ("snap", 1, 1)]
    assert len(model.calls) == 4
    for s in snaps:
        assert s.delivered_ids == {
            "working": ("ws-1", "ws-2"),
            "memory": (f"mem-{s.turn_index}",),
            "digest": ("digest-1",),
        }
        assert s.prefix_sha256 == mw.stable_prefix.sha256
        assert [p.name for p in s.prefix_sections] == ["identity", "operator_guidelines"]
        assert s.full_text is None
    assert snaps[1].history_messages == 3  # question, tool call, tool result
    # The prefix text is stored once, and the trajectory holds the projection text by reference.
    assert backend.snapshots.prefix_text(mw.stable_prefix.sha256) == mw.stable_prefix.text
    traj = backend.trajectory.read("snap")
    kinds = [e.kind for e in traj.entries]
    assert kinds == ["projection", "stable_prefix", "projection"]
    for s in snaps:
        entries = [traj.get(r) for r in s.trajectory_refs]
        assert {e.kind for e in entries} == {"stable_prefix", "projection"}
        proj = next(e for e in entries if e.kind == "projection")
        assert proj.data["turn_index"] == s.turn_index
        assert proj.data["sha256"] == s.projection_sha256
    assert traj.get(snaps[2].trajectory_refs[-1]).data["text"] == model.calls[2][-1].content
    assert [e.data["reason"] for e in traj.entries if e.kind == "projection"] == ["turn", "turn"]
    # One injection-log row per turn (not per call), in the same backend.
    rows = backend.injections.rows("snap")
    assert [(r.turn_index, r.mode, r.delivered) for r in rows] == [
        (t, "native", {"working": ["ws-1", "ws-2"], "memory": [f"mem-{t}"], "digest": ["digest-1"]})
        for t in (0, 1)
    ]
