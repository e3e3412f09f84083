"""The request bodies the SDK's real OpenAI models send with the input filter (issue 24, a
cache-stable prompt): ``OpenAIResponsesModel`` (``/v1/responses``) and
``OpenAIChatCompletionsModel`` (``/v1/chat/completions``) on the ``openai`` SDK over an
``httpx2.MockTransport``, an ``SQLiteSession`` holding the history.

Over four turns (two tool-calling, six requests): the tools, the instructions (the stable
prefix) and the history form a byte prefix of the next request's body, with the projection last
(OpenAI's automatic prefix caching reuses everything before it; the body carries no breakpoint,
and the SDK's ``prompt_cache_key`` is the session's on every request);
and the same turns on a store filled in another order, at another time, with the tools listed the
other way round, send byte-identical prefixes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from agents import Agent, Model, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, SQLiteSession

from contextplane.runtime import open_runtime
from contextplane.testing.memory import InMemoryBackend
from contextplane_openai_agents import run_config
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

from .conftest import lookup

MODELS: dict[str, Callable[[Wire], Model]] = {
    "responses": lambda w: OpenAIResponsesModel(model="gpt-4o", openai_client=w.openai()),
    "chat-completions": lambda w: OpenAIChatCompletionsModel(model="gpt-4o", openai_client=w.openai()),
}


def session(
    tmp_path: Path,
    model: str,
    *,
    reverse: bool = False,
    prompts: Sequence[str] = PROMPTS,
    edit_at: int | None = None,
    backend: InMemoryBackend | None = None,
) -> list[Request]:
    """The turns of ``prompts`` through ``run_config``; the request bodies sent. ``edit_at``:
    before that turn SOUL.md is edited and the runtime rebuilt on the same backend."""
    wire = Wire()
    host, tools = deployment(tmp_path, reverse=reverse)
    agent = Agent(name="orchard", model=MODELS[model](wire), tools=[lookup])
    history = SQLiteSession("s", tmp_path / "sdk.sqlite3")
    backend = backend if backend is not None else InMemoryBackend()

    async def turns() -> None:
        runtime = open_runtime(host.config, backend=backend, host=host, tools=tools)
        for n, prompt in enumerate(prompts):
            if n == edit_at:
                runtime.close()
                edit_soul(tmp_path, "v2")
                runtime = open_runtime(host.config, backend=backend, host=host, tools=tools)
            await Runner.run(agent, prompt, session=history, run_config=run_config(runtime, session=history))
        runtime.close()

    asyncio.run(turns())
    assert len(wire.requests) == requests_for(prompts)
    return wire.requests


@pytest.mark.parametrize("model", list(MODELS))
def test_prefix_then_history_then_projection_turn_after_turn(tmp_path: Path, model: str) -> None:
    requests = session(tmp_path, model)
    prefixes = assert_cache_stable(requests, PROJ)
    assert prefixes[0][0].label == "tool" and any("orchard agent" in u.data for u in prefixes[0])
    assert all(not any(u.breakpoint for u in r.units) for r in requests)
    # The SDK's cache routing key is the session's, the same on every request of it.
    assert len({r.body["prompt_cache_key"] for r in requests}) == 1
    # The projection is one user message of its own, after the history's last item.
    for request in requests:
        _prefix, projection = request.split(PROJ)
        assert [u.label for u in projection] == ["user:head", "user"]


@pytest.mark.parametrize("model", list(MODELS))
def test_nothing_volatile_reaches_the_prefix(tmp_path: Path, model: str) -> None:
    a = session(tmp_path / "a", model)
    b = session(tmp_path / "b", model, reverse=True)
    for n, (ra, rb) in enumerate(zip(a, b, strict=True)):
        (pa, qa), (pb, qb) = ra.split(PROJ), rb.split(PROJ)
        assert pa == pb, f"request {n}: the prefixes differ"
        assert qa != qb, f"request {n}: the projections should differ (store order, write times)"


def test_twenty_turns_record_a_shared_prefix_and_name_a_changed_section(tmp_path: Path) -> None:
    """Issue 24, read from the snapshots the backend recorded: 20 turns through an
    ``SQLiteSession`` (every fifth calling the tool) share >= 99 % of the cacheable prefix with
    the previous call on every call; SOUL.md edited and the runtime rebuilt, the next call's
    snapshot names ``identity``. (The 20-turn storage and budget checks: ``test_session.py``.)"""
    backend = InMemoryBackend()
    prompts = (*PROMPTS_20, "question 20: and now?")
    requests = session(tmp_path, "responses", prompts=prompts, edit_at=20, backend=backend)
    assert_cache_stable(requests[:-1], PROJ)
    assert_recorded_shares(
        backend.snapshots.list("s"), changed_turn=20, section="identity", calls=requests_for(prompts)
    )
