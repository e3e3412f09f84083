"""A 20-turn Agent Framework session (issue 24): after every turn the session as a session store
writes it (``session.to_dict()``) holds 0 bytes of derived context, every request's projection
fits the budget (chars // 4 <= budget tokens), and the stable prefix the model receives is
byte-identical on all 20 turns.

Why every turn and not only the last: a leak that a later turn's history load trims (or that a
stripping pass hides from the model) would still have been persisted in between.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_framework import Agent, ChatResponse, InMemoryHistoryProvider, Message

from contextplane.runtime import Runtime, open_runtime
from contextplane.testing.memory import InMemoryBackend
from contextplane_agent_framework import PROJECTION_MARKER, ContextPlaneProvider
from tests.cache_figures import assert_recorded_shares
from tests.provider_wire import deployment, edit_soul

from .conftest import MARK, MEMTEXT, FakeChatClient, lookup, lookup_then_answer

TURNS = 20
BUDGET_TOKENS = 60


def weather_turns_call_the_tool(messages: Sequence[Message]) -> ChatResponse:
    """Every third turn asks for the weather: the model calls ``lookup``, then answers."""
    inputs = [m for m in messages if str(m.role) == "user" and PROJECTION_MARKER not in (m.additional_properties or {})]
    if inputs and "weather" in (inputs[-1].text or ""):
        return lookup_then_answer(messages)
    return ChatResponse(messages=[Message(role="assistant", contents=[f"noted {len(messages)}"])])


def derived_bytes(stored: str, projections: Sequence[str]) -> int:
    """Bytes of any projection's lines found in ``stored`` (the serialised session)."""
    lines = {line.strip() for text in projections for line in text.splitlines() if line.strip()}
    return sum(len(line.encode()) for line in lines if json.dumps(line)[1:-1] in stored or line in stored)


def test_twenty_turns_store_no_derived_context_fit_the_budget_and_keep_the_prefix(host, backend, sections) -> None:
    runtime = open_runtime(host.config, backend=backend, host=host)
    cp = ContextPlaneProvider(runtime, budget_tokens=BUDGET_TOKENS)
    client = FakeChatClient(weather_turns_call_the_tool)
    agent = Agent(client, tools=[lookup], context_providers=[InMemoryHistoryProvider(), cp])
    session = agent.create_session(session_id="long")
    projections: list[str] = []
    prefix = runtime.prefix.text
    assert "PREFIX-IDENTITY" in prefix

    for turn in range(TURNS):
        query = f"turn {turn}: " + ("what is the weather in Oslo?" if turn % 3 == 0 else "note this " + "x" * 40)
        before = len(client.seen)
        asyncio.run(agent.run(query, session=session))
        calls = client.seen[before:]
        assert len(calls) == (2 if turn % 3 == 0 else 1)
        for call in calls:
            [projection] = [m for m in call.messages if PROJECTION_MARKER in (m.additional_properties or {})]
            text = projection.text or ""
            assert f"{MARK}long|{turn}|{query}}}" in text, "each call sees its own turn's projection"
            assert len(text) // 4 <= BUDGET_TOKENS, f"turn {turn}: {len(text)} chars over {BUDGET_TOKENS} tokens"
            assert call.instructions == prefix, f"turn {turn}: the prefix sent differs from turn 0's"
            projections.append(text)
        stored = json.dumps(session.to_dict(), default=repr)
        assert query in stored, "the session must hold the conversation, or the leak check proves nothing"
        assert derived_bytes(stored, projections) == 0, f"turn {turn}: derived context in the session"
        assert MARK not in stored and MEMTEXT not in stored and PROJECTION_MARKER not in stored

    # The budget binds (the memory rows are shed to fit), so the bound above is not vacuous.
    snaps = backend.snapshots.list("long")
    assert len(snaps) == len(projections) == TURNS + 7
    assert any(x.label == "memory" and x.truncated for x in snaps[0].sections)
    assert {s.prefix_sha256 for s in snaps} == {runtime.prefix.sha256}
    stored_messages: list[Any] = session.state["in_memory"]["messages"]
    assert len(stored_messages) == 2 * TURNS + 2 * 7


def test_derived_bytes_counts_a_projection_line_the_session_holds() -> None:
    projection = "<working_state>\nworking MARK{s|0|q}\n</working_state>"
    assert derived_bytes(json.dumps({"messages": ["hello"]}), [projection]) == 0
    leaked = json.dumps({"messages": ["hello", projection]})
    assert derived_bytes(leaked, [projection]) == len(projection.replace("\n", ""))


def test_twenty_turns_record_a_shared_prefix_and_name_a_changed_section(tmp_path: Path) -> None:
    """Issue 24, read from the snapshots the backend recorded: 20 turns (every fifth asking for
    the weather: a tool call, then the answer) share >= 99 % of the cacheable prefix with the
    previous call on every call; SOUL.md edited and the provider rebuilt on a new runtime over
    the same backend, the next call's snapshot names ``identity``."""
    host, tools = deployment(tmp_path)
    backend = InMemoryBackend()
    client = FakeChatClient(weather_turns_call_the_tool)
    history = InMemoryHistoryProvider()

    def agent_on(runtime: Runtime) -> Agent[Any]:
        return Agent(client, tools=[lookup], context_providers=[history, ContextPlaneProvider(runtime)])

    prompts = [f"turn {n}: " + ("what is the weather in Oslo?" if n % 5 == 4 else "noted") for n in range(21)]
    runtime = open_runtime(host.config, backend=backend, host=host, tools=tools)
    agent = agent_on(runtime)
    session = agent.create_session(session_id="s")
    for n, prompt in enumerate(prompts):
        if n == 20:
            runtime.close()
            edit_soul(tmp_path, "v2")
            runtime = open_runtime(host.config, backend=backend, host=host, tools=tools)
            agent = agent_on(runtime)
        asyncio.run(agent.run(prompt, session=session))
    runtime.close()
    assert client.seen[0].instructions == client.seen[19].instructions != client.seen[-1].instructions
    assert_recorded_shares(backend.snapshots.list("s"), changed_turn=20, section="identity", calls=21 + 4)
