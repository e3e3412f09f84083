"""The request bodies ``langchain_openai``'s real ``ChatOpenAI`` sends with the LangGraph
middleware (issue 24, a cache-stable prompt): the ``openai`` SDK client on an
``httpx2.MockTransport`` (``http_client=``), a ``create_agent`` graph with a checkpointer holding
the history, on chat completions and on the Responses API (``use_responses_api=True``).

Over four turns (two tool-calling, six requests): the tools, the system message (the stable
prefix) and the history form a byte prefix of the next request; the projection is one user
message of its own, last; no breakpoint is written (OpenAI's automatic prefix caching), and no
server-side state (``previous_response_id``, ``store``) is used; and the same turns on a store
filled in another order, at another time, with the tools listed the other way round, send
byte-identical prefixes. ``langchain-openai`` brings ``tiktoken``: nothing here may count tokens
with it (contextplane counts chars // 4, and ``tiktoken`` would fetch its encodings over the
network), which the ``no_tokenizer`` fixture makes a failure.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
import pytest
import tiktoken
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langchain_openai.chat_models.base import BaseChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from contextplane.testing.memory import InMemoryBackend
from contextplane_langgraph import ContextPlaneMiddleware
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

from .conftest import cfg

APIS = ("chat-completions", "responses")


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"notes on {topic}"


@pytest.fixture(autouse=True)
def no_tokenizer(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every way ``ChatOpenAI`` counts tokens, recorded and refused: the test fails if any is
    called (even where a caller swallows the error)."""
    calls: list[str] = []

    def refuse(name: str) -> Any:
        def call(*_args: Any, **_kwargs: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"{name} called: contextplane never counts tokens with a tokenizer")

        return call

    for name in ("get_num_tokens", "get_num_tokens_from_messages", "get_token_ids", "_get_encoding_model"):
        monkeypatch.setattr(BaseChatOpenAI, name, refuse(f"ChatOpenAI.{name}"))
    for name in ("get_encoding", "encoding_for_model"):
        monkeypatch.setattr(tiktoken, name, refuse(f"tiktoken.{name}"))
    yield calls
    assert calls == [], calls


def session(
    tmp_path: Path,
    api: str,
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
    model = ChatOpenAI(
        model="gpt-4o",
        api_key="test",
        http_client=httpx2.Client(transport=httpx2.MockTransport(wire)),
        use_responses_api=api == "responses",
    )

    def agent() -> Any:
        ours = ContextPlaneMiddleware(
            host=host, backend=backend, stable_prefix=True, tools=tools, session_id="s"
        )
        return create_agent(model, tools=[lookup], middleware=[ours], checkpointer=saver)

    graph = agent()
    for n, prompt in enumerate(prompts):
        if n == edit_at:
            edit_soul(tmp_path, "v2")
            graph = agent()
        graph.invoke({"messages": [HumanMessage(prompt)]}, cfg("s"))
    assert len(wire.requests) == requests_for(prompts)
    return wire.requests


@pytest.mark.parametrize("api", APIS)
def test_prefix_then_history_then_projection_turn_after_turn(tmp_path: Path, api: str) -> None:
    requests = session(tmp_path, api)
    assert {r.provider for r in requests} == {
        "openai-chat" if api == "chat-completions" else "openai-responses"
    }
    prefixes = assert_cache_stable(requests, PROJ)
    first = prefixes[0]
    # The tools, then the stable prefix as the first message (role ``system``; on the Responses
    # API a ``system`` input item, not the ``instructions`` field).
    assert first[0].label == "tool" and [u.label for u in first if "orchard agent" in u.data] == ["system"]
    assert all("instructions" not in r.body for r in requests)
    for request in requests:
        assert not any(u.breakpoint for u in request.units)
        assert not {"previous_response_id", "store", "conversation"} & set(request.body)
        _prefix, projection = request.split(PROJ)
        assert [u.label for u in projection] == ["user:head", "user"], projection
    # A tool-calling step: the history ends with the tool's result, the projection after it.
    result = "function_call_output" if api == "responses" else "tool"
    assert prefixes[2][-1].label == result and "notes on t2" in prefixes[2][-1].data


@pytest.mark.parametrize("api", APIS)
def test_nothing_volatile_reaches_the_prefix(tmp_path: Path, api: str) -> None:
    a = session(tmp_path / "a", api)
    b = session(tmp_path / "b", api, reverse=True)
    for n, (ra, rb) in enumerate(zip(a, b, strict=True)):
        (pa, qa), (pb, qb) = ra.split(PROJ), rb.split(PROJ)
        assert pa == pb, f"request {n}: the prefixes differ"
        assert qa != qb, f"request {n}: the projections should differ (store order, write times)"


@pytest.mark.parametrize("api", APIS)
def test_twenty_turns_record_a_shared_prefix_and_name_a_changed_section(tmp_path: Path, api: str) -> None:
    """Issue 24, read from the snapshots the backend recorded: 20 turns of a checkpointed
    thread (every fifth calling the tool) share >= 99 % of the cacheable prefix with the
    previous call on every call; SOUL.md edited and the middleware rebuilt, the next call's
    snapshot names ``identity``."""
    backend = InMemoryBackend()
    prompts = (*PROMPTS_20, "question 20: and now?")
    requests = session(tmp_path, api, prompts=prompts, edit_at=20, backend=backend)
    assert_cache_stable(requests[:-1], PROJ)
    assert_recorded_shares(
        backend.snapshots.list("s"), changed_turn=20, section="identity", calls=requests_for(prompts)
    )
