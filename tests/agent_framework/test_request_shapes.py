"""The request bodies ``agent_framework.openai``'s real chat clients send with the context
provider (issue 24, a cache-stable prompt): ``OpenAIChatClient`` (the Responses API, run with
``store=False``) and ``OpenAIChatCompletionClient`` (``/v1/chat/completions``) on the ``openai``
SDK over an ``httpx2.MockTransport``, an ``InMemoryHistoryProvider`` holding the history.

Over four turns (two tool-calling, six requests): the tools, the instructions (the stable
prefix) and the history form a byte prefix of the next request's body, with the projection
last (OpenAI's automatic prefix caching reuses everything before it; no breakpoint is written);
and the same turns on a store filled in another order, at another time, with the tools listed
the other way round, send byte-identical prefixes.

A tool call is sent once in the run that made it and then, replayed from the history provider,
on every later turn, and the framework writes the two differently: on chat completions the
``Agent`` stamps its name on a run's responses after the run (``"name"`` appears on replay); on
the Responses API the client sends a live function call with the item id the service gave it
(``fc_2``) and a replayed one with ``fc_<call_id>``. The provider's per-call middleware sends
the run's responses in their replay form (``messages.replay_form``), so the first request after
a tool-calling turn still starts with the whole previous prefix (without it, the prefix breaks
there: ``test_without_the_replay_form_the_framework_breaks_the_prefix``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, InMemoryHistoryProvider, Message, tool
from agent_framework.openai import OpenAIChatClient, OpenAIChatCompletionClient

from contextplane.errors import ConfigError
from contextplane.runtime import Runtime, open_runtime
from contextplane.testing.memory import InMemoryBackend
from contextplane_agent_framework import ContextPlaneProvider
from contextplane_agent_framework import provider as provider_module
from tests.cache_figures import assert_recorded_shares
from tests.provider_wire import (
    PROJ,
    PROMPTS,
    PROMPTS_20,
    Request,
    Wire,
    assert_cache_stable,
    deployment,
    edit_soul,
    requests_for,
)

AGENT = "orchard"


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"notes on {topic}"


CLIENTS: dict[str, Callable[[Wire], Any]] = {
    "responses": lambda w: OpenAIChatClient(model="gpt-4o", async_client=w.openai()),
    "chat-completions": lambda w: OpenAIChatCompletionClient(model="gpt-4o", async_client=w.openai()),
}
#: ``store=False``: the Responses client otherwise lets the service keep the conversation (the
#: provider refuses that: ``test_a_service_stored_conversation_is_refused``).
OPTIONS: dict[str, dict[str, Any]] = {"responses": {"store": False}, "chat-completions": {}}


def session(
    tmp_path: Path,
    client: str,
    *,
    reverse: bool = False,
    prompts: Sequence[str] = PROMPTS,
    edit_at: int | None = None,
    backend: InMemoryBackend | None = None,
) -> list[Request]:
    """The turns of ``prompts`` through the provider; the request bodies sent. ``edit_at``:
    before that turn SOUL.md is edited and the provider rebuilt on a new runtime over the same
    backend (the session and its history provider carry on)."""
    wire = Wire()
    host, tools = deployment(tmp_path, reverse=reverse)
    backend = backend if backend is not None else InMemoryBackend()
    history = InMemoryHistoryProvider()
    chat = CLIENTS[client](wire)

    def agent_on(runtime: Runtime) -> Agent[Any]:
        return Agent(
            chat,
            name=AGENT,
            tools=[lookup],
            context_providers=[history, ContextPlaneProvider(runtime)],
            default_options=OPTIONS[client],
        )

    async def turns() -> None:
        runtime = open_runtime(host.config, backend=backend, host=host, tools=tools)
        agent = agent_on(runtime)
        thread = agent.create_session(session_id="s")
        for n, prompt in enumerate(prompts):
            if n == edit_at:
                runtime.close()
                edit_soul(tmp_path, "v2")
                runtime = open_runtime(host.config, backend=backend, host=host, tools=tools)
                agent = agent_on(runtime)
            await agent.run(prompt, session=thread)
        runtime.close()

    asyncio.run(turns())
    assert len(wire.requests) == requests_for(prompts)
    return wire.requests


def broken_at(requests: Sequence[Request]) -> list[int]:
    """The requests whose prefix does not start with the previous request's."""
    prefixes = [r.split(PROJ)[0] for r in requests]
    return [n for n in range(1, len(prefixes)) if prefixes[n][: len(prefixes[n - 1])] != prefixes[n - 1]]


@pytest.mark.parametrize("client", list(CLIENTS))
def test_prefix_then_history_then_projection_turn_after_turn(tmp_path: Path, client: str) -> None:
    requests = session(tmp_path, client)
    prefixes = assert_cache_stable(requests, PROJ)
    first = prefixes[0]
    assert first[0].label == "tool" and any("orchard agent" in u.data for u in first)
    assert all(not any(u.breakpoint for u in r.units) for r in requests)
    for request in requests:
        _prefix, projection = request.split(PROJ)
        # The projection is one user message of its own, after the history's last item (the
        # turn's prompt, or a step's tool result).
        assert [u.label for u in projection] == ["user:head", "user"], projection
        assert "store" not in request.body or request.body["store"] is False
        assert "previous_response_id" not in request.body and "conversation" not in request.body
    # The prefix is where the stable prefix is delivered: the instructions / the system message.
    system = "instructions" if client == "responses" else "system"
    assert [u.label for u in first if "orchard agent" in u.data] == [system]


@pytest.mark.parametrize("client", list(CLIENTS))
def test_without_the_replay_form_the_framework_breaks_the_prefix(
    tmp_path: Path, client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the framework alone sends (the provider told no agent name, so it leaves the run's
    responses as they are): the first request after a tool-calling turn does not start with the
    previous request's prefix; the two differ exactly at the tool call, which is what the
    replay form fixes. (Should the framework send one form, this fails: drop ``replay_form``.)"""
    monkeypatch.setattr(provider_module, "agent_name", lambda _agent: None)
    requests = session(tmp_path, client)
    assert broken_at(requests) == [3]
    before, now = requests[2].split(PROJ)[0], requests[3].split(PROJ)[0]
    at = next(i for i, (a, b) in enumerate(zip(before, now, strict=False)) if a != b)
    assert "call_2" in before[at].data and "call_2" in now[at].data
    assert before[:at] + before[at + 1 :] == now[:at] + now[at + 1 : len(before)]


@pytest.mark.parametrize("client", list(CLIENTS))
def test_nothing_volatile_reaches_the_prefix(tmp_path: Path, client: str) -> None:
    a = session(tmp_path / "a", client)
    b = session(tmp_path / "b", client, reverse=True)
    for n, (ra, rb) in enumerate(zip(a, b, strict=True)):
        (pa, qa), (pb, qb) = ra.split(PROJ), rb.split(PROJ)
        assert pa == pb, f"request {n}: the prefixes differ"
        assert qa != qb, f"request {n}: the projections should differ (store order, write times)"


def test_a_service_stored_conversation_is_refused(tmp_path: Path) -> None:
    """The Responses client with ``store`` unset lets the service keep the conversation and
    chains the responses (``previous_response_id``): the projection would be stored there and
    sent again in the middle of the next turn's context. The provider refuses the run, with
    what to do, before anything is composed or sent."""
    wire = Wire()
    host, tools = deployment(tmp_path)
    backend = InMemoryBackend()
    runtime = open_runtime(host.config, backend=backend, host=host, tools=tools)
    agent = Agent(
        CLIENTS["responses"](wire),
        tools=[lookup],
        context_providers=[InMemoryHistoryProvider(), ContextPlaneProvider(runtime)],
    )
    thread = agent.create_session(session_id="s")
    with pytest.raises(ConfigError, match=r"stored by the service .*default_options=\{'store': False\}"):
        asyncio.run(agent.run(PROMPTS[0], session=thread))
    assert wire.requests == [] and backend.snapshots.list("s") == []
    # ``store=True`` on the run, and a service-managed session, are refused alike.
    stored = Agent(CLIENTS["chat-completions"](wire), context_providers=[ContextPlaneProvider(runtime)])
    with pytest.raises(ValueError, match="stored by the service"):
        asyncio.run(
            stored.run(PROMPTS[0], session=stored.create_session(session_id="t"), options={"store": True})
        )
    with pytest.raises(ValueError, match="stored by the service"):
        asyncio.run(stored.run(PROMPTS[0], session=stored.get_session("resp_0", session_id="u")))
    with pytest.raises(ValueError, match="stored by the service"):
        asyncio.run(stored.run(PROMPTS[0], options={"conversation_id": "conv_1"}))
    assert wire.requests == []
    runtime.close()


@pytest.mark.parametrize("client", list(CLIENTS))
def test_twenty_turns_record_a_shared_prefix_and_name_a_changed_section(tmp_path: Path, client: str) -> None:
    """Issue 24, read from the snapshots the backend recorded, through the real client: 20
    turns (every fifth calling the tool) share >= 99 % of the cacheable prefix with the previous
    call on every call; SOUL.md edited and the provider rebuilt, the next call's snapshot names
    ``identity``. The bodies agree."""
    backend = InMemoryBackend()
    prompts = (*PROMPTS_20, "question 20: and now?")
    requests = session(tmp_path, client, prompts=prompts, edit_at=20, backend=backend)
    assert_cache_stable(requests[:-1], PROJ)
    figures = assert_recorded_shares(
        backend.snapshots.list("s"), changed_turn=20, section="identity", calls=requests_for(prompts)
    )
    assert len(figures) == len(requests)


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_tool_round_counts_what_the_provider_is_sent(tmp_path: Path, client: str) -> None:
    """The recorded history size (and the cacheable-prefix figure built on it) counts a tool
    round as the call's ``name(arguments)`` and the result's output, the same chars in the run
    that made it and replayed on the next turn; a text-only count would add 0 for it."""
    backend = InMemoryBackend()
    requests = session(tmp_path, client, backend=backend)
    snaps = backend.snapshots.list("s")
    assert len(snaps) == len(requests)
    chars = [s.history_chars for s in snaps]
    # Turn 1: call 0 sees q0, a1, q1; call 1 adds the tool call and its result.
    tool_round = len('lookup({"topic": "t2"})') + len("notes on t2")
    assert chars[2] - chars[1] == tool_round > 0
    # Turn 2's first call replays the round from the history provider: the same chars, plus
    # the turn's answer and the new prompt.
    assert chars[3] - chars[2] == len("answer 3") + len(PROMPTS[2])
    # The figure is the stable prefix (as sent: the instructions / the system message) and that
    # history.
    body = requests[0].body
    sent = body["instructions"] if client == "responses" else body["messages"][0]["content"]
    assert [s.cache.chars if s.cache else None for s in snaps] == [len(sent) + c for c in chars]


def test_the_replay_form_is_sent_only_and_only_for_the_runs_responses(tmp_path: Path) -> None:
    """The replay form is of what is sent: the stored tool call keeps the item id the service
    gave it; and only the run's responses take it: an assistant message the caller passes as
    the run's input is sent as given (no name), as it is stored and replayed."""
    wire = Wire()
    host, tools = deployment(tmp_path)
    runtime = open_runtime(host.config, backend=InMemoryBackend(), host=host, tools=tools)
    agent = Agent(
        CLIENTS["responses"](wire),
        name=AGENT,
        tools=[lookup],
        context_providers=[InMemoryHistoryProvider(), ContextPlaneProvider(runtime)],
        default_options={"store": False},
    )
    thread = agent.create_session(session_id="s")
    asyncio.run(agent.run(PROMPTS[1], session=thread))
    sent = [i for i in wire.requests[1].body["input"] if i.get("type") == "function_call"]
    assert [i["id"] for i in sent] == ["fc_call_1"]
    stored = json.dumps(thread.to_dict(), default=repr)
    assert '"fc_1"' in stored and "fc_call_1" not in stored

    chat = Agent(
        CLIENTS["chat-completions"](wire),
        name=AGENT,
        context_providers=[InMemoryHistoryProvider(), ContextPlaneProvider(runtime)],
    )
    given = [
        Message(role="user", contents=["earlier question"]),
        Message(role="assistant", contents=["earlier answer"]),
        Message(role="user", contents=[PROMPTS[0]]),
    ]
    asyncio.run(chat.run(given, session=chat.create_session(session_id="t")))
    messages = wire.requests[-1].body["messages"]
    assert {"role": "assistant", "content": "earlier answer"} in messages, messages
    runtime.close()
