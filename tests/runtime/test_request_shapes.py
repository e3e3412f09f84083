"""The request bodies ``langchain_anthropic``'s real ``ChatAnthropic`` sends with the LangGraph
middleware (issue 24, a cache-stable prompt): the ``anthropic`` SDK client on an
``httpx2.MockTransport``, a ``create_agent`` graph with a checkpointer holding the history.

Over four turns (two tool-calling, six requests), with caching off, with
``AnthropicPromptCachingMiddleware`` listed first (the documented order), and with the
middleware's own ``cache_control=``: the tools, the system prompt (the stable prefix) and the
history form a byte prefix of the next request; the projection is last, after every breakpoint;
the breakpoints, when caching, are the system block and the history's last block, never the
projection and never top-level; and the same turns on a store filled in another order, at another
time, with the tools listed the other way round, send byte-identical prefixes.
(The OpenAI-shaped LangChain model, ``ChatOpenAI``: ``test_request_shapes_openai.py``.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from contextplane.testing.memory import InMemoryBackend
from contextplane_langgraph import ContextPlaneMiddleware
from tests.cache_figures import assert_recorded_shares
from tests.provider_wire import (
    PROJ,
    PROMPTS,
    PROMPTS_20,
    REQUESTS,
    Request,
    Wire,
    assert_cache_stable,
    deployment,
    edit_soul,
    requests_for,
)

from .conftest import cfg

langchain_anthropic = pytest.importorskip("langchain_anthropic")
caching = pytest.importorskip("langchain_anthropic.middleware")

CACHING = ("none", "AnthropicPromptCachingMiddleware", "cache_control=")


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"notes on {topic}"


def session(
    tmp_path: Path,
    how: str,
    *,
    reverse: bool = False,
    prompts: Sequence[str] = PROMPTS,
    edit_at: int | None = None,
    backend: InMemoryBackend | None = None,
) -> list[Request]:
    """The turns of ``prompts`` through the middleware; the request bodies sent. ``edit_at``:
    before that turn SOUL.md is edited and the middleware (its runtime) rebuilt on the same
    backend, the graph's checkpointer carrying the thread on."""
    wire = Wire()
    host, tools = deployment(tmp_path, reverse=reverse)
    backend = backend if backend is not None else InMemoryBackend()
    saver = InMemorySaver()
    model = langchain_anthropic.ChatAnthropic(model="claude-sonnet-4-5", api_key="test", max_tokens=1024)
    model.__dict__["_client"] = wire.anthropic_sync()  # the SDK client ChatAnthropic caches

    def agent() -> Any:
        ours = ContextPlaneMiddleware(
            host=host,
            backend=backend,
            stable_prefix=True,
            tools=tools,
            session_id="s",
            cache_control={"type": "ephemeral"} if how == "cache_control=" else None,
        )
        theirs: list[Any] = (
            [caching.AnthropicPromptCachingMiddleware()] if how.startswith("Anthropic") else []
        )
        return create_agent(model, tools=[lookup], middleware=[*theirs, ours], checkpointer=saver)

    graph = agent()
    for n, prompt in enumerate(prompts):
        if n == edit_at:
            edit_soul(tmp_path, "v2")
            graph = agent()
        graph.invoke({"messages": [HumanMessage(prompt)]}, cfg("s"))
    assert len(wire.requests) == requests_for(prompts)
    return wire.requests


@pytest.mark.parametrize("how", CACHING)
def test_prefix_then_history_then_projection_turn_after_turn(tmp_path: Path, how: str) -> None:
    requests = session(tmp_path, how)
    prefixes = assert_cache_stable(requests, PROJ)
    assert prefixes[0][0].label == "tool" and any("orchard agent" in u.data for u in prefixes[0])
    marks = [[u.label for u in r.units if u.breakpoint] for r in requests]
    if how == "none":
        assert marks == [[]] * REQUESTS
        return
    # The tools (AnthropicPromptCachingMiddleware marks them too), the system prompt, and the
    # history's last block: the turn's prompt, or a step's tool result.
    static = ["tool", "system"] if how.startswith("Anthropic") else ["system"]
    assert marks == [[*static, "user"]] * REQUESTS, marks
    assert [json.loads(p[-1].data) for p in prefixes][:3] == [
        {"type": "text", "text": PROMPTS[0]},
        {"type": "text", "text": PROMPTS[1]},
        {"type": "tool_result", "content": "notes on t2", "tool_use_id": "toolu_2", "is_error": False},
    ]


def test_nothing_volatile_reaches_the_prefix(tmp_path: Path) -> None:
    a = session(tmp_path / "a", "AnthropicPromptCachingMiddleware")
    b = session(tmp_path / "b", "AnthropicPromptCachingMiddleware", reverse=True)
    for n, (ra, rb) in enumerate(zip(a, b, strict=True)):
        (pa, qa), (pb, qb) = ra.split(PROJ), rb.split(PROJ)
        assert pa == pb, f"request {n}: the prefixes differ"
        assert qa != qb, f"request {n}: the projections should differ (store order, write times)"


def test_twenty_turns_record_a_shared_prefix_and_name_a_changed_section(tmp_path: Path) -> None:
    """Issue 24, read from the snapshots the backend recorded: 20 turns of a checkpointed
    thread (every fifth calling the tool) share >= 99 % of the cacheable prefix with the
    previous call on every call; SOUL.md edited and the middleware rebuilt, the next call's
    snapshot names ``identity``."""
    backend = InMemoryBackend()
    prompts = (*PROMPTS_20, "question 20: and now?")
    requests = session(
        tmp_path, "AnthropicPromptCachingMiddleware", prompts=prompts, edit_at=20, backend=backend
    )
    assert_cache_stable(requests[:-1], PROJ)
    assert_recorded_shares(
        backend.snapshots.list("s"), changed_turn=20, section="identity", calls=requests_for(prompts)
    )
