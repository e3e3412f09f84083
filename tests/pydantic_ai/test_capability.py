"""The PydanticAI capability on real agents (``FunctionModel``/``TestModel``, no network):
the projection reaches each model request and nothing PydanticAI stores (ADR D2)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from contextplane import PluginHost, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.errors import SectionError
from contextplane.runtime import Runtime, open_runtime
from contextplane_pydantic_ai import ContextPlaneCapability
from contextplane_pydantic_ai.codec import message_text, projection_request, tool_key
from tests.adapter_helpers import BrokenSection

from .conftest import CONFIG, MARK, MEMTEXT, MarkerSections, Recorder, tag, tool_then_answer

Run = Callable[..., Any]


def run_sync(agent: Agent[Any, Any], prompt: str, **kwargs: Any) -> Any:
    return agent.run_sync(prompt, **kwargs)


def run_async(agent: Agent[Any, Any], prompt: str, **kwargs: Any) -> Any:
    return asyncio.run(agent.run(prompt, **kwargs))


PATHS = pytest.mark.parametrize("run", [run_sync, run_async], ids=["run_sync", "run"])


def stored(messages: list[ModelMessage]) -> str:
    """Everything PydanticAI keeps of a run, as it would be saved (its own JSON)."""
    return ModelMessagesTypeAdapter.dump_json(messages).decode()


def sent(messages: list[ModelMessage]) -> str:
    return "\n".join(message_text(m) for m in messages)


@PATHS
def test_two_turns_see_their_projection_and_the_history_never_holds_it(
    run: Run, runtime: Runtime, backend: SQLiteBackend, sections: MarkerSections
) -> None:
    model = Recorder()
    agent = Agent(model.model(), capabilities=[ContextPlaneCapability(runtime)])
    first = run(agent, "when is the deploy window?", deps={"session_id": "s1"})
    given = first.all_messages()
    second = run(agent, "and the freeze?", message_history=given, deps={"session_id": "s1"})

    one, two = model.seen
    # Each request saw its own turn's projection, after the history, and only that one.
    assert tag("s1", 0, "when is the deploy window?") in sent(one.messages)
    assert tag("s1", 1, "and the freeze?") in sent(two.messages)
    assert tag("s1", 0, "when is the deploy window?") not in sent(two.messages)
    last = two.messages[-1]
    assert isinstance(last, ModelRequest) and isinstance(last.parts[-1], UserPromptPart)
    assert tag("s1", 1, "and the freeze?") in str(last.parts[-1].content)
    # What PydanticAI stores and what the second run was handed hold none of it.
    for messages in (given, second.all_messages(), second.new_messages()):
        assert MARK not in stored(messages) and MEMTEXT not in stored(messages)
    assert [type(m) for m in second.all_messages()] == [ModelRequest, ModelResponse] * 2
    # One composition per turn: each section drafted once per run.
    assert [(d.section, d.session_id, d.turn_index) for d in sections.draws] == [
        ("working", "s1", 0), ("memory", "s1", 0), ("working", "s1", 1), ("memory", "s1", 1)
    ]  # fmt: skip
    # One injection row per turn, one snapshot per model request, the turn inputs of each turn.
    assert [(r.session_id, r.turn_index) for r in backend.injections.rows("s1")] == [("s1", 0), ("s1", 1)]
    assert [s.key for s in backend.snapshots.list("s1")] == [("s1", 0, 0), ("s1", 1, 0)]
    assert [(i.session_id, i.turn_index) for i in backend.snapshots.list_inputs("s1")] == [
        ("s1", 0),
        ("s1", 1),
    ]


@PATHS
def test_the_stable_prefix_is_the_instructions_byte_identical_across_turns(
    run: Run, runtime: Runtime, backend: SQLiteBackend
) -> None:
    model = Recorder()
    agent = Agent(model.model(), capabilities=[ContextPlaneCapability(runtime)])
    history: list[ModelMessage] = []
    for query in ("one", "two", "three"):
        history = run(agent, query, message_history=history, deps={"session_id": "p"}).all_messages()
    prefix = runtime.prefix
    assert prefix is not None and not isinstance(prefix, str)
    assert [s.instructions for s in model.seen] == [prefix.text] * 3
    assert "PREFIX-IDENTITY" in prefix.text and MARK not in prefix.text
    assert {s.prefix_sha256 for s in backend.snapshots.list("p")} == {prefix.sha256}
    # The instructions are not re-sent from the history: no message part carries the prefix.
    assert all("PREFIX-IDENTITY" not in sent(s.messages) for s in model.seen)


@PATHS
def test_a_tool_calling_turn_keeps_the_pair_and_snapshots_each_model_request(
    run: Run, runtime: Runtime, backend: SQLiteBackend, sections: MarkerSections
) -> None:
    model = Recorder(tool_then_answer())
    agent = Agent(model.model(), capabilities=[ContextPlaneCapability(runtime)])

    @agent.tool_plain
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"looked up {topic}"

    result = run(agent, "check the deploy", deps={"session_id": "t"})
    assert result.output == "done"
    calls = model.seen
    assert len(calls) == 2
    for call in calls:  # the projection is the last thing of every request
        last = call.messages[-1]
        assert isinstance(last, ModelRequest) and isinstance(last.parts[-1], UserPromptPart)
        assert tag("t", 0, "check the deploy") in str(last.parts[-1].content)
    # The second request: the tool call, then its result, in order and unsplit, then the projection.
    response, request = calls[1].messages[-2], calls[1].messages[-1]
    assert isinstance(response, ModelResponse) and isinstance(request, ModelRequest)
    [call_part] = [p for p in response.parts if isinstance(p, ToolCallPart)]
    kinds = [type(p) for p in request.parts]
    assert kinds[0] is ToolReturnPart and issubclass(kinds[-1], UserPromptPart)
    assert request.parts[0].tool_call_id == call_part.tool_call_id == "call-1"
    # Stored: request, tool call, tool result, answer; no projection anywhere.
    stored_messages = result.all_messages()
    assert MARK not in stored(stored_messages)
    assert [type(p).__name__ for m in stored_messages for p in m.parts] == [
        "UserPromptPart", "ToolCallPart", "ToolReturnPart", "TextPart"
    ]  # fmt: skip
    # One composition, one injection row, one snapshot per model request.
    assert [d.section for d in sections.draws] == ["working", "memory"]
    assert len(backend.injections.rows("t")) == 1
    assert [s.key for s in backend.snapshots.list("t")] == [("t", 0, 0), ("t", 0, 1)]


def test_testmodel_turns_with_tools_never_store_the_projection(
    runtime: Runtime, backend: SQLiteBackend
) -> None:
    agent = Agent(TestModel(), capabilities=[ContextPlaneCapability(runtime, session_id="tm")])

    @agent.tool_plain
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"looked up {topic}"

    first = agent.run_sync("first")
    second = agent.run_sync("second", message_history=first.all_messages())
    assert MARK not in stored(second.all_messages())
    assert [(r.turn_index) for r in backend.injections.rows("tm")] == [0, 1]
    # Turn 0 called the tool (two model requests), turn 1 answered at once.
    assert [s.key for s in backend.snapshots.list("tm")] == [("tm", 0, 0), ("tm", 0, 1), ("tm", 1, 0)]


@PATHS
def test_incognito_writes_no_row_no_inputs_and_no_text(
    run: Run, runtime: Runtime, backend: SQLiteBackend, sections: MarkerSections
) -> None:
    model = Recorder()
    agent = Agent(model.model(), capabilities=[ContextPlaneCapability(runtime, session_id="inc")])
    result = run(agent, "secret question", deps={"incognito": True})
    [call] = model.seen
    assert MEMTEXT not in sent(call.messages)  # memory sections are not drafted incognito
    assert tag("inc", 0, "secret question") in sent(call.messages)
    assert {d.incognito for d in sections.draws} == {True}
    assert MARK not in stored(result.all_messages())
    assert backend.injections.rows() == []
    assert backend.snapshots.list_inputs() == []
    # The call's snapshot is flagged and holds no text or hashes (as on every surface).
    [snap] = backend.snapshots.list("inc")
    assert (snap.mode, snap.incognito, snap.projection_sha256, snap.full_text) == (
        "incognito",
        True,
        None,
        None,
    )


def test_goal_turn_flag_from_the_capability_reaches_the_request(
    runtime: Runtime, backend: SQLiteBackend
) -> None:
    model = Recorder()
    agent = Agent(
        model.model(),
        capabilities=[
            ContextPlaneCapability(runtime, session_id="g", goal_turn=lambda ctx: ctx.deps == "goal")
        ],
    )
    first = agent.run_sync("plan it", deps="goal")
    agent.run_sync("next", deps="plain", message_history=first.all_messages())
    assert [r.mode for r in backend.injections.rows("g")] == ["goal_turn", "native"]


def test_session_and_turn_from_deps_attributes(runtime: Runtime, backend: SQLiteBackend) -> None:
    class Deps:
        session_id = "from-deps"
        turn_index = 7

    model = Recorder()
    agent = Agent(model.model(), deps_type=Deps, capabilities=[ContextPlaneCapability(runtime)])
    agent.run_sync("hello", deps=Deps())
    assert tag("from-deps", 7, "hello") in sent(model.seen[0].messages)
    assert [s.key for s in backend.snapshots.list("from-deps")] == [("from-deps", 7, 0)]


def test_without_a_session_the_conversation_id_carries_across_runs(
    runtime: Runtime, backend: SQLiteBackend
) -> None:
    agent = Agent(Recorder().model(), capabilities=[ContextPlaneCapability(runtime)])
    first = agent.run_sync("one")
    agent.run_sync("two", message_history=first.all_messages())
    rows = backend.injections.rows()
    assert len({r.session_id for r in rows}) == 1 and rows[0].session_id
    assert [r.turn_index for r in rows] == [0, 1]


def test_a_history_processor_listed_inside_never_sees_or_stores_the_projection(runtime: Runtime) -> None:
    """``ProcessHistory`` writes ``ctx.messages`` back: were it to run after the projection was
    placed, the projection would be stored. The capability's ordering puts it inside."""
    given: list[str] = []

    def keep(messages: list[ModelMessage]) -> list[ModelMessage]:
        given.append(stored(messages))
        return messages

    model = Recorder()
    agent = Agent(
        model.model(), capabilities=[ContextPlaneCapability(runtime, session_id="h"), ProcessHistory(keep)]
    )
    first = agent.run_sync("one")
    second = agent.run_sync("two", message_history=first.all_messages())
    assert len(given) == 2 and all(MARK not in g for g in given)
    assert MARK not in stored(second.all_messages())
    assert tag("h", 1, "two") in sent(model.seen[1].messages)


def test_concurrent_runs_on_one_agent_each_see_their_own_turn(
    runtime: Runtime, backend: SQLiteBackend
) -> None:
    model = Recorder()
    agent = Agent(model.model(), capabilities=[ContextPlaneCapability(runtime)])

    async def both() -> None:
        await asyncio.gather(*(agent.run(f"q-{s}", deps={"session_id": s}) for s in ("a", "b", "c")))

    asyncio.run(both())
    for s in ("a", "b", "c"):
        [call] = [c for c in model.seen if f"q-{s}" in sent(c.messages)]
        assert tag(s, 0, f"q-{s}") in sent(call.messages)
        assert sent(call.messages).count(MARK) == 1
        assert [x.key for x in backend.snapshots.list(s)] == [(s, 0, 0)]


def broken_host(strict: bool) -> PluginHost:
    config = structure({**CONFIG, "plugins": {"strict": strict}})
    return plugin_host_with([MarkerSections(), BrokenSection()], config)


@PATHS
def test_a_broken_section_plugin_does_not_take_down_the_run(
    run: Run, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    host = broken_host(strict=False)
    with (
        closing(SQLiteBackend(tmp_path / "b.sqlite3", config=host.config)) as backend,
        open_runtime(host.config, backend=backend, host=host) as runtime,
        caplog.at_level(logging.WARNING, logger="contextplane"),
    ):
        model = Recorder()
        agent = Agent(model.model(), capabilities=[ContextPlaneCapability(runtime, session_id="x")])
        result = run(agent, "still works")
        assert result.output == "ok"
        assert tag("x", 0, "still works") in sent(model.seen[0].messages)
        assert len(backend.injections.rows("x")) == 1
    failures = [r for r in caplog.records if "'broken' of plugin 'broken_plugin' failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].name.startswith("contextplane")


def test_strict_mode_turns_a_broken_section_into_a_failed_run(tmp_path: Any) -> None:
    host = broken_host(strict=True)
    with (
        closing(SQLiteBackend(tmp_path / "s.sqlite3", config=host.config)) as backend,
        open_runtime(host.config, backend=backend, host=host) as runtime,
    ):
        agent = Agent(Recorder().model(), capabilities=[ContextPlaneCapability(runtime, session_id="x")])
        with pytest.raises(SectionError, match="'broken' of plugin 'broken_plugin' failed"):
            agent.run_sync("fails")


def test_importing_contextplane_does_not_import_pydantic_ai() -> None:
    code = (
        "import sys, contextplane, contextplane.runtime\n"
        "assert 'pydantic_ai' not in sys.modules, 'pydantic_ai imported'\n"
        "assert 'contextplane_pydantic_ai' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_stored_projection_handed_back_is_stripped_by_its_marker(
    runtime: Runtime, backend: SQLiteBackend
) -> None:
    """A caller that did store a projection request (by its own hand) hands it back as history:
    the model never sees it again, and the snapshot records it as stripped."""
    model = Recorder()
    agent = Agent(model.model(), capabilities=[ContextPlaneCapability(runtime, session_id="f")])
    first = agent.run_sync("one")
    leaked = [first.all_messages()[0], projection_request("OLD-PROJECTION"), *first.all_messages()[1:]]
    agent.run_sync("two", message_history=leaked)
    assert "OLD-PROJECTION" not in sent(model.seen[1].messages)
    assert tag("f", 1, "two") in sent(model.seen[1].messages)
    snap = backend.snapshots.list("f")[-1]
    assert [f.chars for f in snap.stripped] == [len("OLD-PROJECTION")]


def test_full_text_capture_shows_what_the_model_was_sent_with_chat_roles(tmp_path: Any) -> None:
    """The codec's roles and text: a tool step's snapshot reads as the other surfaces' do."""
    host = plugin_host_with(
        [MarkerSections()], structure({"context": {**CONFIG["context"], "capture_full_text": True}})
    )
    with (
        closing(SQLiteBackend(tmp_path / "ft.sqlite3", config=host.config)) as backend,
        open_runtime(host.config, backend=backend, host=host) as runtime,
    ):
        agent = Agent(
            Recorder(tool_then_answer()).model(),
            capabilities=[ContextPlaneCapability(runtime, session_id="ft")],
        )

        @agent.tool_plain
        def lookup(topic: str) -> str:
            """Look a topic up."""
            return f"looked up {topic}"

        agent.run_sync("check the deploy")
        first, second = backend.snapshots.list("ft")
        assert first.full_text is not None and second.full_text is not None
        prefix = runtime.prefix
        assert prefix is not None and not isinstance(prefix, str)
        assert first.full_text.startswith(f"[system]\n{prefix.text}\n\n[user]\ncheck the deploy\n\n[user]\n")
        assert '[assistant]\nlookup({"topic":"deploy"})' in second.full_text
        assert "[tool]\nlooked up deploy" in second.full_text
        # The projection is the last message, after the tool result.
        text = second.full_text
        assert text.index("[tool]\nlooked up") < text.rindex("[user]\n") < text.index(MARK)


def test_a_run_resuming_a_turn_recomposes_once_and_numbers_its_calls_on(
    runtime: Runtime, backend: SQLiteBackend, sections: MarkerSections
) -> None:
    """Deferred tool approval: the first run stops at the tool call, a second run (no prompt)
    resumes the same turn. It composes once, as a resume of that turn, and its model call is
    the turn's call 1: the first run's snapshot (call 0) is kept, not overwritten."""
    model = Recorder(tool_then_answer())
    agent = Agent(
        model.model(),
        output_type=[str, DeferredToolRequests],
        capabilities=[ContextPlaneCapability(runtime, session_id="r")],
    )

    @agent.tool_plain(requires_approval=True)
    def lookup(topic: str) -> str:
        """Look a topic up (after approval)."""
        return f"looked up {topic}"

    first = agent.run_sync("check the deploy")
    assert isinstance(first.output, DeferredToolRequests)
    second = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"call-1": True}),
    )
    assert second.output == "done"
    assert [(d.section, d.query, d.turn_index, d.reason) for d in sections.draws] == [
        ("working", "check the deploy", 0, "turn"),
        ("memory", "check the deploy", 0, "turn"),
        ("working", "check the deploy", 0, "resume"),
        ("memory", "check the deploy", 0, "resume"),
    ]
    assert [s.key for s in backend.snapshots.list("r")] == [("r", 0, 0), ("r", 0, 1)]
    assert len(backend.injections.rows("r")) == 2  # one per composition
    assert tag("r", 0, "check the deploy") in sent(model.seen[1].messages)
    assert MARK not in stored(second.all_messages())


def test_with_instructions_off_the_agent_keeps_its_own_and_no_prefix_is_recorded(
    runtime: Runtime, backend: SQLiteBackend
) -> None:
    model = Recorder()
    agent = Agent(
        model.model(),
        instructions="The agent's own instructions.",
        capabilities=[ContextPlaneCapability(runtime, session_id="o", instructions=False)],
    )
    agent.run_sync("hi")
    assert model.seen[0].instructions == "The agent's own instructions."
    assert tag("o", 0, "hi") in sent(model.seen[0].messages)
    [snap] = backend.snapshots.list("o")
    assert snap.prefix_sha256 is None


def test_a_streamed_run_sees_the_projection_and_stores_none_of_it(
    runtime: Runtime, backend: SQLiteBackend
) -> None:
    seen: list[list[ModelMessage]] = []

    async def stream(messages: list[ModelMessage], _info: AgentInfo) -> AsyncIterator[str]:
        seen.append(list(messages))
        yield "streamed "
        yield "answer"

    agent = Agent(
        FunctionModel(stream_function=stream), capabilities=[ContextPlaneCapability(runtime, session_id="st")]
    )

    async def go() -> list[ModelMessage]:
        async with agent.run_stream("stream it") as result:
            assert await result.get_output() == "streamed answer"
        return result.all_messages()

    messages = asyncio.run(go())
    assert tag("st", 0, "stream it") in sent(seen[0])
    assert MARK not in stored(messages)
    assert [s.key for s in backend.snapshots.list("st")] == [("st", 0, 0)]
    assert len(backend.injections.rows("st")) == 1


def test_the_codec_keys_tool_call_ids_and_arguments() -> None:
    """The cacheable prefix's digests see a rewrite of only a tool call's id or arguments, or a
    result's id (issue 24): the codec's key changes although the text may not."""
    def call(args: dict[str, str], call_id: str) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("lookup", args, tool_call_id=call_id)])

    def result(call_id: str) -> ModelRequest:
        return ModelRequest(parts=[ToolReturnPart("lookup", "found", tool_call_id=call_id)])

    base = tool_key(call({"topic": "a"}, "c1"))
    assert base and base != tool_key(call({"topic": "b"}, "c1")) != tool_key(call({"topic": "a"}, "c2"))
    assert tool_key(result("c1")) != tool_key(result("c2"))
    assert tool_key(ModelRequest(parts=[UserPromptPart("hi")])) == ""
