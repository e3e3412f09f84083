"""The Agent Framework context provider on a real ``Agent`` with a fake chat client.

The projection must reach every model call of its run and nothing the framework stores (the
history provider's messages, the session as a session store writes it); each run composes
once, writes one injection row and one snapshot per model call; tool call/result pairs stay
intact and in order; incognito and goal turns are honoured; the stable prefix is
byte-identical across turns; a broken section does not take down the run.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from agent_framework import Agent, BaseChatClient, ChatResponse, InMemoryHistoryProvider, Message

from contextplane.runtime import open_runtime
from contextplane_agent_framework import PROJECTION_MARKER, ContextPlaneProvider

from .conftest import (
    MARK,
    MEMTEXT,
    BrokenSection,
    FakeChatClient,
    lookup,
    lookup_then_answer,
    make_host,
    stored_json,
    text_reply,
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def make_agent(host: Any, backend: Any, policy: Any = None, *, tools: Any = (), **provider: Any) -> tuple[Agent, FakeChatClient, ContextPlaneProvider, InMemoryHistoryProvider]:
    runtime = open_runtime(host.config, backend=backend, host=host)
    cp = ContextPlaneProvider(runtime, **provider)
    client = FakeChatClient(policy or text_reply())
    history = InMemoryHistoryProvider()
    agent = Agent(client, tools=list(tools), context_providers=[history, cp])
    return agent, client, cp, history


async def two_turns(agent: Agent, queries: tuple[str, str] = ("q-one", "q-two")) -> Any:
    session = agent.create_session(session_id="s1")
    for q in queries:
        await agent.run(q, session=session)
    return session


def projections_in(messages: list[Message]) -> list[Message]:
    return [m for m in messages if PROJECTION_MARKER in (m.additional_properties or {})]


def test_two_turns_the_model_saw_the_projection_and_the_session_stores_none(host, backend, sections) -> None:
    agent, client, _cp, _history = make_agent(host, backend)
    session = run(two_turns(agent))

    assert len(client.seen) == 2
    for turn, (seen, query) in enumerate(zip(client.seen, ("q-one", "q-two"), strict=True)):
        [projection] = projections_in(seen.messages)
        assert seen.messages[-1] is projection, "the projection goes after the history and the input"
        assert f"{MARK}s1|{turn}|{query}}}" in projection.text
        assert str(projection.role) == "user"
    # The second call saw the first turn's exchange as history, without its projection.
    assert [m.text for m in client.seen[1].messages[:-1]] == ["q-one", "ok", "q-two"]

    stored = session.state["in_memory"]["messages"]
    assert [m.text for m in stored] == ["q-one", "ok", "q-two", "ok"]
    everything = stored_json(session)
    assert "q-two" in everything, "the serialised session must hold the history, or the next check proves nothing"
    assert MARK not in everything and MEMTEXT not in everything and PROJECTION_MARKER not in everything
    # The provider keeps only its counters in the session (the turn, the turn's model calls).
    assert session.state["contextplane"] == {"turn_index": 1, "calls": 1}


def test_one_composition_one_injection_row_per_turn_one_snapshot_per_model_call(host, backend, sections) -> None:
    agent, client, _cp, _history = make_agent(host, backend, lookup_then_answer, tools=[lookup])
    session = run(two_turns(agent))

    assert len(client.seen) == 4, "each turn calls the tool, then answers: two model calls per turn"
    assert [(d.turn_index, d.query) for d in sections.of("working")] == [(0, "q-one"), (1, "q-two")]
    assert [(r.session_id, r.turn_index) for r in backend.injections.rows("s1")] == [("s1", 0), ("s1", 1)]
    snaps = backend.snapshots.list("s1")
    assert [s.key for s in snaps] == [("s1", 0, 0), ("s1", 0, 1), ("s1", 1, 0), ("s1", 1, 1)]
    # Every call of a turn saw that turn's projection, the one its snapshot hashes.
    for seen, snap in zip(client.seen, snaps, strict=True):
        [projection] = projections_in(seen.messages)
        assert f"|{snap.turn_index}|" in projection.text
        assert snap.projection_sha256 is not None
        assert snap.history_messages == len(seen.messages) - 1
    assert MARK not in stored_json(session)
    # The turn inputs, once per composition (what explain and replay read).
    inputs = backend.snapshots.list_inputs("s1")
    assert [(i.turn_index, i.query) for i in inputs] == [(0, "q-one"), (1, "q-two")]


def test_a_tool_calling_turn_keeps_call_and_result_intact_and_in_order(host, backend) -> None:
    agent, client, _cp, _history = make_agent(host, backend, lookup_then_answer, tools=[lookup])
    session = run(two_turns(agent))

    second = client.seen[1].messages  # turn 0, the call after the tool ran
    kinds = [(str(m.role), [c.type for c in m.contents]) for m in second]
    assert kinds == [
        ("user", ["text"]),
        ("assistant", ["function_call"]),
        ("tool", ["function_result"]),
        ("user", ["text"]),  # the projection, after the pair
    ]
    call, result = second[1].contents[0], second[2].contents[0]
    assert call.call_id == result.call_id and call.name == "lookup"
    assert result.result == "sunny in Oslo"

    stored = session.state["in_memory"]["messages"]
    kinds = [(str(m.role), [c.type for c in m.contents]) for m in stored]
    turn = [("user", ["text"]), ("assistant", ["function_call"]), ("tool", ["function_result"]), ("assistant", ["text"])]
    assert kinds == turn + turn
    for i in (1, 5):
        assert stored[i].contents[0].call_id == stored[i + 1].contents[0].call_id
    # Turn 1's calls see turn 0's pair in the history, still adjacent and unsplit.
    later = client.seen[3].messages
    roles = [str(m.role) for m in later]
    assert roles[:4] == ["user", "assistant", "tool", "assistant"] and roles[-1] == "user"
    assert len(projections_in(later)) == 1


def test_incognito_writes_nothing_and_shows_no_memory(host, backend, sections) -> None:
    agent, client, _cp, _history = make_agent(host, backend, incognito=True)
    session = run(two_turns(agent))

    assert sections.of("memory") == [] and sections.of("digest") == []
    assert all(d.incognito for d in sections.of("working"))
    for seen in client.seen:
        assert MEMTEXT not in "".join(seen.texts())
        assert MARK in seen.messages[-1].text  # the working state still reaches the model
    assert backend.injections.rows() == []
    assert backend.snapshots.list_inputs() == []
    snaps = backend.snapshots.list("s1")
    assert [s.key for s in snaps] == [("s1", 0, 0), ("s1", 1, 0)]
    for snap in snaps:
        assert snap.incognito and snap.projection_sha256 is None and snap.full_text is None
        assert backend.snapshots.prefix_text(snap.prefix_sha256) is None
    written = backend.trajectory.path_for("s1").read_text()
    for secret in ("q-one", "q-two", MARK, MEMTEXT):
        assert secret not in written
    assert MARK not in stored_json(session)


def test_incognito_decided_per_run(host, backend, sections) -> None:
    agent, _client, _cp, _history = make_agent(
        host, backend, incognito=lambda _session, context: context.input_messages[-1].text == "secret"
    )
    run(two_turns(agent, ("secret", "public")))
    assert [(d.turn_index, d.incognito) for d in sections.of("working")] == [(0, True), (1, False)]
    assert [r.turn_index for r in backend.injections.rows("s1")] == [1]


def test_a_goal_turn_skips_the_prior_session_digest(host, backend, sections) -> None:
    agent, client, _cp, _history = make_agent(host, backend, goal_turn=True)
    run(two_turns(agent))
    assert sections.of("digest") == [] and len(sections.of("memory")) == 2
    assert all(d.goal_turn for d in sections.of("working"))
    assert "DIGEST" not in "".join(client.seen[0].texts())
    assert {s.mode for s in backend.snapshots.list("s1")} == {"goal_turn"}


def test_the_stable_prefix_is_byte_identical_across_turns(host, backend) -> None:
    agent, client, cp, _history = make_agent(host, backend, lookup_then_answer, tools=[lookup])
    run(two_turns(agent))
    prefix = cp.runtime.prefix
    assert "PREFIX-IDENTITY" in prefix.text and "PREFIX-RULES" in prefix.text
    assert [seen.instructions for seen in client.seen] == [prefix.text] * 4
    assert {s.prefix_sha256 for s in backend.snapshots.list("s1")} == {prefix.sha256}
    # The snapshot names the prefix's sections (the instructions were exactly the prefix).
    assert [p.name for p in backend.snapshots.list("s1")[0].prefix_sections] == ["identity", "operator_guidelines"]


def test_the_agents_own_instructions_come_first_and_the_snapshot_records_what_was_sent(host, backend) -> None:
    runtime = open_runtime(host.config, backend=backend, host=host)
    client = FakeChatClient(text_reply())
    agent = Agent(client, "You answer in French.", context_providers=[ContextPlaneProvider(runtime)])
    run(agent.run("bonjour", session=agent.create_session(session_id="fr")))
    sent = client.seen[0].instructions
    assert sent == f"You answer in French.\n{runtime.prefix.text}"
    [snap] = backend.snapshots.list("fr")
    import hashlib

    assert snap.prefix_sha256 == hashlib.sha256(sent.encode()).hexdigest()


def test_a_broken_section_plugin_does_not_take_down_the_run(tmp_path, sections, caplog) -> None:
    from contextplane.backends.sqlite import SQLiteBackend

    host = make_host(sections, BrokenSection())
    backend = SQLiteBackend(tmp_path / "b.sqlite3", config=host.config)
    try:
        agent, client, _cp, _history = make_agent(host, backend)
        with caplog.at_level(logging.WARNING, logger="contextplane"):
            session = run(two_turns(agent))
        assert [m.text for m in session.state["in_memory"]["messages"]] == ["q-one", "ok", "q-two", "ok"]
        for seen in client.seen:
            assert MARK in seen.messages[-1].text
        entries = [e for e in backend.trajectory.read("s1").entries if e.kind == "projection"]
        assert len(entries) == 2
        for entry in entries:
            rows = {r["name"]: r for r in entry.data["budget"]}
            assert "broken plugin detail" in rows["broken"]["error"]
        # Logged once (not once per turn), with its traceback.
        [logged] = [r for r in caplog.records if "'broken'" in r.getMessage()]
        assert logged.exc_info is not None and "broken plugin detail" in logged.getMessage()
        assert len(backend.injections.rows("s1")) == 2
    finally:
        backend.close()


def test_strict_mode_turns_a_broken_section_into_a_failed_run(tmp_path, sections) -> None:
    from contextplane.backends.sqlite import SQLiteBackend

    host = make_host(sections, BrokenSection())
    backend = SQLiteBackend(tmp_path / "b.sqlite3", config=host.config)
    try:
        runtime = open_runtime(host.config, backend=backend, host=host, strict=True)
        client = FakeChatClient(text_reply())
        agent = Agent(client, context_providers=[ContextPlaneProvider(runtime)])
        with pytest.raises(Exception, match="broken"):
            run(agent.run("q", session=agent.create_session(session_id="s")))
        assert client.seen == []
    finally:
        backend.close()


def test_a_projection_a_misconfigured_history_stored_is_stripped_from_later_calls(host, backend) -> None:
    """``store_context_messages=True`` makes the history provider store the projection (the
    framework's opt-in): later calls still see only the fresh one, and the snapshot names the
    stale frame it stripped (ADR D2's migration rule)."""
    runtime = open_runtime(host.config, backend=backend, host=host)
    client = FakeChatClient(text_reply())
    history = InMemoryHistoryProvider(store_context_messages=True)
    agent = Agent(client, context_providers=[history, ContextPlaneProvider(runtime)])
    session = run(two_turns(agent))

    assert MARK in stored_json(session), "the opt-in stores context messages, or this proves nothing"
    [projection] = projections_in(client.seen[1].messages)
    assert "|1|q-two}" in projection.text and client.seen[1].messages[-1] is projection
    snaps = backend.snapshots.list("s1")
    assert [len(s.stripped) for s in snaps] == [0, 1]


def test_a_client_without_chat_middleware_still_gets_the_projection_and_says_why_no_snapshot(host, backend, caplog) -> None:
    class Bare(BaseChatClient[Any]):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[list[Message]] = []

        def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
            self.seen.append(list(messages))

            async def reply() -> ChatResponse:
                return ChatResponse(messages=[Message(role="assistant", contents=["ok"])])

            return reply()

    runtime = open_runtime(host.config, backend=backend, host=host)
    client = Bare()
    agent = Agent(client, context_providers=[InMemoryHistoryProvider(), ContextPlaneProvider(runtime)])
    with caplog.at_level(logging.WARNING, logger="contextplane"):
        session = run(two_turns(agent))
    assert [len(projections_in(seen)) for seen in client.seen] == [1, 1]
    assert backend.snapshots.list("s1") == [] and len(backend.injections.rows("s1")) == 2
    assert sum("no chat middleware" in r.getMessage() for r in caplog.records) == 1
    assert MARK not in stored_json(session)


def test_a_streamed_run_records_and_stores_the_same(host, backend, sections) -> None:
    agent, client, _cp, _history = make_agent(host, backend, lookup_then_answer, tools=[lookup])

    async def streamed() -> Any:
        session = agent.create_session(session_id="s1")
        for q in ("q-one", "q-two"):
            stream = agent.run(q, session=session, stream=True)
            async for _update in stream:
                pass
            await stream.get_final_response()
        return session

    session = run(streamed())
    assert len(client.seen) == 4
    assert len(sections.of("working")) == 2
    assert [r.turn_index for r in backend.injections.rows("s1")] == [0, 1]
    assert [s.key for s in backend.snapshots.list("s1")] == [("s1", 0, 0), ("s1", 0, 1), ("s1", 1, 0), ("s1", 1, 1)]
    for seen in client.seen:
        assert len(projections_in(seen.messages)) == 1 and MARK in seen.messages[-1].text
    stored = session.state["in_memory"]["messages"]
    assert [str(m.role) for m in stored] == ["user", "assistant", "tool", "assistant"] * 2
    assert MARK not in stored_json(session)


def test_per_service_call_history_persistence_does_not_store_the_projection_either(host, backend) -> None:
    """With ``require_per_service_call_history_persistence`` the framework loads and persists
    around every model call, splitting context from input by attribution: the projection is
    context, so it is still never stored."""
    runtime = open_runtime(host.config, backend=backend, host=host)
    client = FakeChatClient(lookup_then_answer)
    agent = Agent(
        client,
        tools=[lookup],
        context_providers=[InMemoryHistoryProvider(), ContextPlaneProvider(runtime)],
        require_per_service_call_history_persistence=True,
    )
    session = run(two_turns(agent))
    assert len(client.seen) == 4
    for seen in client.seen:
        # The framework's per-call middleware runs inside ours and rebuilds the call from its
        # context messages first, so in this mode the projection leads (documented).
        assert projections_in(seen.messages) == [seen.messages[0]]
    stored = session.state["in_memory"]["messages"]
    assert "q-one" in [m.text for m in stored] and "q-two" in [m.text for m in stored]
    assert MARK not in stored_json(session)
    assert len(backend.snapshots.list("s1")) == 4 and len(backend.injections.rows("s1")) == 2


def test_concurrent_runs_each_see_their_own_turn(host, backend) -> None:
    agent, client, _cp, _history = make_agent(host, backend, lookup_then_answer, tools=[lookup])

    async def many() -> list[Any]:
        sessions = [agent.create_session(session_id=f"c{i}") for i in range(6)]
        await asyncio.gather(*(agent.run(f"q{i}", session=s) for i, s in enumerate(sessions)))
        return sessions

    sessions = run(many())
    assert len(client.seen) == 12
    for seen in client.seen:
        [projection] = projections_in(seen.messages)
        query = seen.messages[0].text
        assert f"{MARK}c{query[1:]}|0|{query}}}" in projection.text
    for i, session in enumerate(sessions):
        assert [s.key for s in backend.snapshots.list(f"c{i}")] == [(f"c{i}", 0, 0), (f"c{i}", 0, 1)]
        assert MARK not in stored_json(session)


def test_a_run_answering_a_tool_approval_resumes_the_turn(host, backend, sections) -> None:
    """The approval answer is a new run with no operator text: it recomposes the same turn once
    (reason "resume", queried with the turn's operator input) and continues its call numbering."""
    from agent_framework import tool

    @tool(approval_mode="always_require")
    def guarded_lookup(city: str) -> str:
        """Look the weather in a city up, after the operator approves."""
        return f"sunny in {city}"

    runtime = open_runtime(host.config, backend=backend, host=host)
    client = FakeChatClient(lambda m: _renamed(lookup_then_answer(m), "guarded_lookup"))
    agent = Agent(client, tools=[guarded_lookup], context_providers=[InMemoryHistoryProvider(), ContextPlaneProvider(runtime)])

    async def turns() -> Any:
        session = agent.create_session(session_id="s1")
        first = await agent.run("q-one", session=session)
        [request] = first.user_input_requests
        await agent.run(Message(role="user", contents=[request.to_function_approval_response(True)]), session=session)
        return session

    session = run(turns())
    assert [(d.turn_index, d.query) for d in sections.of("working")] == [(0, "q-one"), (0, "q-one")]
    entries = [e for e in backend.trajectory.read("s1").entries if e.kind == "projection"]
    assert [(e.data["turn_index"], e.data["reason"]) for e in entries] == [(0, "turn"), (0, "resume")]
    assert [s.key for s in backend.snapshots.list("s1")] == [("s1", 0, 0), ("s1", 0, 1)]
    assert len(client.seen) == 2
    kinds = [(str(m.role), [c.type for c in m.contents]) for m in client.seen[1].messages]
    assert kinds == [("user", ["text"]), ("assistant", ["function_call"]), ("tool", ["function_result"]), ("user", ["text"])]
    assert client.seen[1].messages[2].contents[0].result == "sunny in Oslo"
    [projection] = projections_in(client.seen[1].messages)
    assert "|0|q-one}" in projection.text and client.seen[1].messages[-1] is projection
    assert session.state["contextplane"] == {"turn_index": 0, "calls": 2}
    assert MARK not in stored_json(session)


def test_an_approval_run_resumes_the_turn_with_its_input_when_history_loads_per_model_call(host, backend, sections) -> None:
    """With ``require_per_service_call_history_persistence`` the framework loads history per
    model call, after ``before_run``: the resumed turn is still queried with its operator input,
    read from the history provider's stored messages (it was composed for "" before)."""
    from agent_framework import tool

    @tool(approval_mode="always_require")
    def guarded_lookup(city: str) -> str:
        """Look the weather in a city up, after the operator approves."""
        return f"sunny in {city}"

    runtime = open_runtime(host.config, backend=backend, host=host)
    client = FakeChatClient(lambda m: _renamed(lookup_then_answer(m), "guarded_lookup"))
    agent = Agent(
        client,
        tools=[guarded_lookup],
        context_providers=[InMemoryHistoryProvider(), ContextPlaneProvider(runtime)],
        require_per_service_call_history_persistence=True,
    )

    async def turns() -> Any:
        session = agent.create_session(session_id="s1")
        first = await agent.run("q-one", session=session)
        [request] = first.user_input_requests
        await agent.run(Message(role="user", contents=[request.to_function_approval_response(True)]), session=session)
        return session

    session = run(turns())
    assert [(d.turn_index, d.query) for d in sections.of("working")] == [(0, "q-one"), (0, "q-one")]
    [projection] = projections_in(client.seen[-1].messages)
    assert "|0|q-one}" in projection.text
    assert [s.key for s in backend.snapshots.list("s1")] == [("s1", 0, 0), ("s1", 0, 1)]
    assert MARK not in stored_json(session)


def _renamed(response: ChatResponse, name: str) -> ChatResponse:
    for message in response.messages:
        for content in message.contents:
            if content.type == "function_call":
                content.name = name
    return response


def test_a_runtime_and_wiring_of_its_own_is_refused_with_the_fix(host, backend) -> None:
    runtime = open_runtime(host.config, backend=backend, host=host)
    with pytest.raises(ValueError, match=r"got a runtime and backend, tools: .*open_runtime\(\.\.\., backend=\.\.\.\)"):
        ContextPlaneProvider(runtime, backend=backend, tools=["lookup"])


def test_a_provider_wired_without_a_runtime_composes_and_records(host, backend, sections) -> None:
    client = FakeChatClient(text_reply())
    cp = ContextPlaneProvider(host=host, backend=backend, tools=["lookup"])
    agent = Agent(client, context_providers=[InMemoryHistoryProvider(), cp])
    run(two_turns(agent))
    assert cp.runtime.backend is backend and len(backend.snapshots.list("s1")) == 2
    assert client.seen[0].instructions == cp.runtime.prefix.text


def test_twenty_turns_store_no_derived_context_and_stay_within_the_budget(host, backend) -> None:
    agent, client, cp, _history = make_agent(host, backend, budget_tokens=60)
    queries = tuple(f"question number {i} " + "x" * 40 for i in range(20))

    async def many() -> Any:
        session = agent.create_session(session_id="s1")
        for q in queries:
            await agent.run(q, session=session)
        return session

    session = run(many())
    snaps = backend.snapshots.list("s1")
    assert [s.key for s in snaps] == [("s1", t, 0) for t in range(20)]
    assert all(s.budget_chars == 240 and s.used_chars <= 240 for s in snaps)
    assert {s.prefix_sha256 for s in snaps} == {cp.runtime.prefix.sha256}
    for seen, snap in zip(client.seen, snaps, strict=True):
        [projection] = projections_in(seen.messages)
        assert len(projection.text) == snap.used_chars <= snap.budget_chars
        # The budget binds: the memory sections are shed to fit it.
        assert [(x.label, x.truncated) for x in snap.sections if x.chars == 0] == [("memory", True), ("digest", True)]
    stored = session.state["in_memory"]["messages"]
    assert len(stored) == 40 and all(PROJECTION_MARKER not in (m.additional_properties or {}) for m in stored)
    assert MARK not in stored_json(session) and MEMTEXT not in stored_json(session)


def test_the_codec_keys_function_calls_and_results() -> None:
    """The cacheable prefix's digests see a rewrite of only a function call's arguments or id,
    or a result's call id (issue 24): such messages have no text, so the key is all there is."""
    from agent_framework import Content

    from contextplane_agent_framework.messages import tool_key

    def call(arguments: dict[str, str], call_id: str) -> Message:
        content = Content.from_function_call(call_id=call_id, name="lookup", arguments=arguments)
        return Message(role="assistant", contents=[content])

    def result(call_id: str) -> Message:
        content = Content.from_function_result(call_id=call_id, result="sunny")
        return Message(role="tool", contents=[content])

    base = tool_key(call({"city": "Oslo"}, "c1"))
    assert base and base != tool_key(call({"city": "Bergen"}, "c1")) != tool_key(call({"city": "Oslo"}, "c2"))
    assert tool_key(result("c1")) != tool_key(result("c2"))
    assert tool_key(Message(role="user", contents=["hi"])) == ""
