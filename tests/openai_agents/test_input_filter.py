"""The OpenAI Agents SDK adapter on the real SDK (``Runner.run`` / ``run_sync``, its
``SQLiteSession`` and its ``ScriptedModel``): the projection reaches each model call of a turn
and nothing the SDK stores; one composition per turn; one injection row per turn and one
snapshot per model call; tool call/result items intact and in order; incognito writes no
text; the stable prefix byte-identical across turns; a broken section isolated."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.memory import SessionSettings
from agents.run_config import ModelInputData
from agents.testing import ScriptedModel, assistant_message, function_call

from contextplane.backends.sqlite import SQLiteBackend
from contextplane.errors import SectionError
from contextplane.runtime import Runtime, open_runtime
from contextplane.types import StablePrefix
from contextplane_openai_agents import ContextPlaneInputFilter, run_config

from .conftest import MARK, MEMTEXT, BrokenSection, MarkerSections, lookup, make_host

SESSION = "s1"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def marked(items: list[Any]) -> list[Any]:
    """The items that carry a projection (the marker sections' rows)."""
    return [i for i in items if MARK in repr(i) or MEMTEXT in repr(i)]


def stored(session: SQLiteSession) -> list[Any]:
    return asyncio.run(session.get_items())


def test_two_turns_see_their_projection_and_the_session_holds_none_of_it(
    runtime: Runtime, backend: SQLiteBackend, sections: MarkerSections, tmp_path: Path
) -> None:
    model = ScriptedModel([[assistant_message("first")], [assistant_message("second")]])
    agent = Agent(name="a", model=model)
    session = SQLiteSession(SESSION, tmp_path / "sdk.sqlite3")

    async def turns() -> list[Any]:
        results = []
        for query in ("deploy window?", "and the freeze?"):
            results.append(
                await Runner.run(
                    agent, query, session=session, run_config=run_config(runtime, session=session)
                )
            )
        return results

    results = asyncio.run(turns())
    calls = model.calls
    assert len(calls) == 2
    for turn, (call, query) in enumerate(zip(calls, ("deploy window?", "and the freeze?"), strict=True)):
        # The projection is the last item the model saw, composed for this turn's own query.
        *history, last = call.input
        assert last["role"] == "user" and f"{MARK}{SESSION}|{turn}|{query}}}" in last["content"]
        assert marked(history) == []
        assert history[-1] == {"content": query, "role": "user"}
    assert [(d.session_id, d.turn_index, d.query) for d in sections.of("working")] == [
        (SESSION, 0, "deploy window?"),
        (SESSION, 1, "and the freeze?"),
    ]
    # Nothing the SDK keeps holds it: the session (in its own SQLite file) and the result.
    items = stored(session)
    assert [i.get("role") for i in items] == ["user", "assistant", "user", "assistant"]
    assert marked(items) == [] and marked(results[-1].to_input_list()) == []
    sdk_file = (tmp_path / "sdk.sqlite3").read_bytes()
    assert MARK.encode() not in sdk_file and MEMTEXT.encode() not in sdk_file
    # One injection row per turn, one snapshot per call, the turn inputs, all through the runtime.
    assert [r.turn_index for r in backend.injections.rows(SESSION)] == [0, 1]
    snaps = backend.snapshots.list(SESSION)
    assert [s.key for s in snaps] == [(SESSION, 0, 0), (SESSION, 1, 0)]
    for snap, call in zip(snaps, calls, strict=True):
        assert snap.projection_sha256 == sha(call.input[-1]["content"])
    assert [backend.snapshots.get_inputs(SESSION, n).query for n in (0, 1)] == [
        "deploy window?",
        "and the freeze?",
    ]  # type: ignore[union-attr]


def test_a_tool_calling_turn_keeps_call_and_result_in_order_and_composes_once(
    runtime: Runtime, backend: SQLiteBackend, sections: MarkerSections
) -> None:
    model = ScriptedModel(
        [[function_call("lookup", {"topic": "deploy"}, call_id="call-1")], [assistant_message("done")]]
    )
    agent = Agent(name="a", model=model, tools=[lookup])
    session = SQLiteSession(SESSION)
    flt_config = run_config(runtime, session=session)
    result = Runner.run_sync(agent, "deploy window?", session=session, run_config=flt_config)  # the sync path
    assert result.final_output == "done"
    first, second = model.calls
    projection = first.input[-1]
    assert MARK in projection["content"] and second.input[-1] == projection  # composed once, sent twice
    history = second.input[:-1]
    assert [i.get("type", "message") for i in history] == ["message", "function_call", "function_call_output"]
    assert history[1]["call_id"] == history[2]["call_id"] == "call-1"
    assert history[2]["output"] == "looked up deploy"
    # What the session stores is the run's own items, in the order the model saw them, no projection.
    items = stored(session)
    assert items[:3] == history and marked(items) == []
    assert [i.get("type", "message") for i in items] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert len(sections.of("working")) == 1 and flt_config.call_model_input_filter.compositions == 1  # type: ignore[union-attr]
    assert [r.turn_index for r in backend.injections.rows(SESSION)] == [0]
    assert [s.key for s in backend.snapshots.list(SESSION)] == [(SESSION, 0, 0), (SESSION, 0, 1)]


def test_a_reused_run_config_still_composes_once_per_turn(
    runtime: Runtime, backend: SQLiteBackend, sections: MarkerSections
) -> None:
    model = ScriptedModel(
        [
            [function_call("lookup", {"topic": "a"}, call_id="c1")],
            [assistant_message("one")],
            [function_call("lookup", {"topic": "b"}, call_id="c2")],
            [assistant_message("two")],
        ]
    )
    agent = Agent(name="a", model=model, tools=[lookup])
    session = SQLiteSession(SESSION)
    config = run_config(runtime, session=session)
    for query in ("q0", "q1"):
        Runner.run_sync(agent, query, session=session, run_config=config)
    assert [(d.turn_index, d.query) for d in sections.of("working")] == [(0, "q0"), (1, "q1")]
    assert [r.turn_index for r in backend.injections.rows(SESSION)] == [0, 1]
    assert [s.key for s in backend.snapshots.list(SESSION)] == [
        (SESSION, t, c) for t in (0, 1) for c in (0, 1)
    ]


def test_the_stable_prefix_is_the_instructions_byte_identical_across_turns(
    runtime: Runtime, backend: SQLiteBackend
) -> None:
    model = ScriptedModel([[assistant_message(f"r{n}")] for n in range(3)])
    agent = Agent(name="a", model=model)  # no instructions of its own
    session = SQLiteSession(SESSION)
    for n in range(3):
        Runner.run_sync(agent, f"q{n}", session=session, run_config=run_config(runtime, session=session))
    prefix = runtime.prefix
    assert isinstance(prefix, StablePrefix) and "PREFIX-IDENTITY" in prefix.text
    seen = {call.system_instructions for call in model.calls}
    assert seen == {prefix.text}
    assert {s.prefix_sha256 for s in backend.snapshots.list(SESSION)} == {prefix.sha256}


def test_an_agent_s_own_instructions_are_kept_with_one_warning(
    runtime: Runtime, backend: SQLiteBackend
) -> None:
    model = ScriptedModel([[assistant_message("r0")], [assistant_message("r1")]])
    agent = Agent(name="a", instructions="OWN INSTRUCTIONS", model=model)
    config = run_config(runtime, session_id=SESSION)
    with pytest.warns(UserWarning, match="instructions of its own") as warned:
        Runner.run_sync(agent, "q0", run_config=config)
        Runner.run_sync(
            agent, [{"role": "user", "content": "q0"}, {"role": "user", "content": "q1"}], run_config=config
        )
    assert len(warned) == 1
    assert [c.system_instructions for c in model.calls] == ["OWN INSTRUCTIONS"] * 2
    assert {s.prefix_sha256 for s in backend.snapshots.list(SESSION)} == {sha("OWN INSTRUCTIONS")}


@pytest.mark.parametrize("how", ["flag", "run_context"])
def test_an_incognito_turn_writes_no_text_anywhere(host: Any, tmp_path: Path, how: str) -> None:
    store = tmp_path / "store"
    store.mkdir()
    backend = SQLiteBackend(store / "m.sqlite3", config=host.config)
    model = ScriptedModel([[assistant_message("ok")]])
    agent = Agent(name="a", model=model)
    secret = "SECRET-QUERY-42"
    with open_runtime(host=host, backend=backend) as runtime:
        if how == "flag":
            Runner.run_sync(agent, secret, run_config=run_config(runtime, session_id=SESSION, incognito=True))
        else:
            Runner.run_sync(
                agent, secret, context={"incognito": True}, run_config=run_config(runtime, session_id=SESSION)
            )
        # Memory is not projected; the model still sees the working state.
        (call,) = model.calls
        assert MEMTEXT not in repr(call.input) and MARK in call.input[-1]["content"]
        assert backend.injections.rows() == []
        (snap,) = backend.snapshots.list(SESSION)  # references and sizes only, flagged
        assert snap.incognito and snap.projection_sha256 is None and snap.full_text is None
        assert backend.snapshots.get_inputs(SESSION, 0) is None
    backend.close()
    for path in store.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for text in (secret, MARK, MEMTEXT):
                assert text.encode() not in data, (path, text)


def test_a_goal_turn_is_composed_as_one(runtime: Runtime) -> None:
    def goal(ctx: Any) -> bool:
        return bool(ctx and ctx.get("goal"))

    filters = [ContextPlaneInputFilter(runtime, session_id=SESSION, goal_turn=goal) for _ in range(2)]
    for flt, context in zip(filters, ({"goal": True}, None), strict=True):
        model = ScriptedModel([[assistant_message("ok")]])
        Runner.run_sync(
            Agent(name="a", model=model),
            "q",
            context=context,
            run_config=RunConfig(call_model_input_filter=flt),
        )
    turns = [flt.turn for flt in filters if flt.turn is not None]
    assert [t.projection.goal_turn for t in turns] == [True, False]
    assert [t.request.goal_turn for t in turns if t.request is not None] == [True, False]


def test_sections_read_the_working_state_from_the_run_context(runtime: Runtime) -> None:
    seen: list[dict[str, Any]] = []

    def state(ctx: Any) -> dict[str, Any]:
        seen.append(dict(ctx))
        return {"plan": ctx["plan"]}

    model = ScriptedModel([[assistant_message("ok")]])
    config = run_config(runtime, session_id=SESSION, state=state)
    Runner.run_sync(Agent(name="a", model=model), "q", context={"plan": "ship"}, run_config=config)
    flt = config.call_model_input_filter
    assert isinstance(flt, ContextPlaneInputFilter) and flt.turn is not None and flt.turn.request is not None
    assert dict(flt.turn.request.state) == {"plan": "ship"} and seen == [{"plan": "ship"}]


def test_a_broken_section_does_not_take_down_the_run(
    sections: MarkerSections, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    host = make_host(sections, BrokenSection())
    backend = SQLiteBackend(tmp_path / "m.sqlite3", config=host.config)
    model = ScriptedModel([[assistant_message("r0")], [assistant_message("r1")]])
    agent = Agent(name="a", model=model)
    session = SQLiteSession(SESSION)
    filters = []
    with (
        caplog.at_level(logging.WARNING, logger="contextplane"),
        open_runtime(host=host, backend=backend) as runtime,
    ):
        for q in ("q0", "q1"):
            config = run_config(runtime, session=session)
            result = Runner.run_sync(agent, q, session=session, run_config=config)
            assert result.final_output == f"r{q[1]}"
            filters.append(config.call_model_input_filter)
    for flt in filters:  # the failure is reported on the turn
        report = flt.turn.projection.section("broken")
        assert report is not None and "BROKEN-ERR" in report.error
    for call in model.calls:
        assert MARK in call.input[-1]["content"] and "BROKEN-ERR" not in call.input[-1]["content"]
    assert [r.turn_index for r in backend.injections.rows(SESSION)] == [0, 1]
    logged = [r for r in caplog.records if "broken_plugin" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None  # once, with its traceback
    backend.close()
    # Strict mode turns it into a failure of the run.
    backend = SQLiteBackend(tmp_path / "strict.sqlite3", config=host.config)
    with (
        open_runtime(host=host, backend=backend, strict=True) as runtime,
        pytest.raises(SectionError, match="broken"),
    ):
        Runner.run_sync(
            Agent(name="a", model=ScriptedModel([[assistant_message("x")]])),
            "q",
            run_config=run_config(runtime, session_id=SESSION),
        )
    backend.close()


def test_a_filter_already_in_the_run_config_runs_first(runtime: Runtime) -> None:
    def trim(data: Any) -> ModelInputData:
        return ModelInputData(
            input=[i for i in data.model_data.input if i.get("content") != "drop me"], instructions=None
        )

    model = ScriptedModel([[assistant_message("ok")]])
    config = run_config(
        runtime, session_id=SESSION, base=RunConfig(call_model_input_filter=trim, workflow_name="w")
    )
    Runner.run_sync(
        Agent(name="a", model=model),
        [{"role": "user", "content": "drop me"}, {"role": "user", "content": "keep"}],
        run_config=config,
    )
    (call,) = model.calls
    assert [i["content"] for i in call.input[:-1]] == ["keep"] and MARK in call.input[-1]["content"]
    assert config.workflow_name == "w"


def test_without_the_sdk_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextplane_openai_agents

    for name in list(sys.modules):
        if name.startswith("contextplane_openai_agents."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.setitem(sys.modules, "agents.run_config", None)
    with pytest.raises(ModuleNotFoundError, match=r"contextplane\[openai-agents\]"):
        contextplane_openai_agents.run_config  # noqa: B018


def test_a_handoff_stays_in_the_turn_and_a_streamed_run_is_delivered_too(
    runtime: Runtime, backend: SQLiteBackend, sections: MarkerSections
) -> None:
    model = ScriptedModel(
        [
            [function_call("transfer_to_specialist", {}, call_id="h1")],
            [assistant_message("from the specialist")],
        ]
    )
    specialist = Agent(name="specialist", model=model)
    triage = Agent(name="triage", model=model, handoffs=[specialist])
    session = SQLiteSession(SESSION)

    async def streamed() -> Any:
        result = Runner.run_streamed(
            triage, "q0", session=session, run_config=run_config(runtime, session=session)
        )
        async for _event in result.stream_events():
            pass
        return result

    result = asyncio.run(streamed())
    assert result.final_output == "from the specialist" and result.last_agent is specialist
    first, second = model.calls
    assert first.streamed and second.streamed
    assert second.input[-1] == first.input[-1] and MARK in first.input[-1]["content"]
    assert [i.get("type", "message") for i in second.input[:-1]] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    assert len(sections.of("working")) == 1  # the handoff did not start a new turn
    assert [r.turn_index for r in backend.injections.rows(SESSION)] == [0]
    assert [s.key for s in backend.snapshots.list(SESSION)] == [(SESSION, 0, 0), (SESSION, 0, 1)]
    assert marked(stored(session)) == [] and marked(result.to_input_list()) == []


def test_a_resumed_run_recomposes_once_and_numbers_its_calls_on(
    runtime: Runtime, backend: SQLiteBackend, sections: MarkerSections
) -> None:
    """A tool that needs approval interrupts the run; the run resumed from its ``RunState``
    (a new run, a new filter) composes the turn once more and its call is call 1, not 0."""

    @function_tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Deploy a target."""
        return f"deployed {target}"

    model = ScriptedModel(
        [[function_call("deploy", {"target": "prod"}, call_id="d1")], [assistant_message("deployed")]]
    )
    agent = Agent(name="a", model=model, tools=[deploy])
    first = Runner.run_sync(agent, "ship it", run_config=run_config(runtime, session_id=SESSION))
    (interruption,) = first.interruptions
    state = first.to_state()
    state.approve(interruption)
    resumed = Runner.run_sync(agent, state, run_config=run_config(runtime, session_id=SESSION))
    assert resumed.final_output == "deployed"
    before, after = model.calls
    assert [i.get("type", "message") for i in after.input[:-1]] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    assert MARK in before.input[-1]["content"] and after.input[-1]["content"] == before.input[-1]["content"]
    assert [(d.turn_index, d.query) for d in sections.of("working")] == [(0, "ship it"), (0, "ship it")]
    rows = backend.injections.rows(SESSION)
    assert [r.turn_index for r in rows] == [0, 0]
    assert [s.key for s in backend.snapshots.list(SESSION)] == [(SESSION, 0, 0), (SESSION, 0, 1)]


def test_the_filter_returns_a_new_input_and_leaves_the_sdk_s_copy_alone(runtime: Runtime) -> None:
    """The projection goes into the ``ModelInputData`` the filter returns, never into the
    list or the items the SDK handed it (which it goes on to persist)."""
    from agents.run_config import CallModelData

    items: list[Any] = [
        {"role": "user", "content": "q"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "r"},
    ]
    before = repr(items)
    given = ModelInputData(input=items, instructions=None)
    flt = ContextPlaneInputFilter(runtime, session_id=SESSION)
    out = asyncio.run(flt(CallModelData(model_data=given, agent=Agent(name="a"), context=None)))
    assert repr(items) == before and given.input is items and given.instructions is None
    assert out is not given and out.input is not items
    assert out.input[:3] == items and all(a is b for a, b in zip(out.input, items, strict=False))
    assert MARK in out.input[3]["content"] and out.instructions == runtime.prefix.text  # type: ignore[union-attr]


@pytest.mark.parametrize("trim", ["session_limit", "session_input_callback"])
def test_a_trimmed_history_still_numbers_each_turn_once(
    runtime: Runtime, backend: SQLiteBackend, sections: MarkerSections, trim: str
) -> None:
    """The model input holds only the newest items of the session (its ``limit``, or a
    ``session_input_callback``): the turns are still numbered 0, 1, 2, ... from the session,
    so no two turns share an injection row's or a snapshot's key."""
    model = ScriptedModel([[assistant_message(f"r{n}")] for n in range(6)])
    agent = Agent(name="a", model=model)
    if trim == "session_limit":
        session = SQLiteSession(SESSION, session_settings=SessionSettings(limit=3))
        base = RunConfig()
    else:
        session = SQLiteSession(SESSION)
        base = RunConfig(session_input_callback=lambda history, new: [*history[-3:], *new])
    for n in range(6):
        Runner.run_sync(
            agent, f"q{n}", session=session, run_config=run_config(runtime, session=session, base=base)
        )
    assert len(model.calls[-1].input) == 5  # three stored items, the new input, the projection
    assert [(d.turn_index, d.query) for d in sections.of("working")] == [(n, f"q{n}") for n in range(6)]
    assert [r.turn_index for r in backend.injections.rows(SESSION)] == list(range(6))
    assert [s.key for s in backend.snapshots.list(SESSION)] == [(SESSION, n, 0) for n in range(6)]
