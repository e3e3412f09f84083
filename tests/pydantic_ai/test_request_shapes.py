"""The request bodies PydanticAI's real provider models send with the capability (issue 24, a
cache-stable prompt): ``AnthropicModel`` on the ``anthropic`` SDK, ``OpenAIChatModel`` and
``OpenAIResponsesModel`` on the ``openai`` SDK, each on an ``httpx2.MockTransport``.

Over a session of four turns (two of them tool-calling, six requests): the tools, the
instructions and the history form a byte prefix of the next request; the projection is last,
after every cache breakpoint; with ``Caching()`` on Anthropic the breakpoints are the tools, the
instructions and the last history block, never the projection (the capability takes the
conversation breakpoint over: ``contextplane_pydantic_ai.caching``); and the same turns on a
store filled in another order, at another time, with the tools listed the other way round, send
byte-identical prefixes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import Caching
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from contextplane.runtime import Runtime, open_runtime
from contextplane.testing.memory import InMemoryBackend
from contextplane_pydantic_ai import ContextPlaneCapability
from contextplane_pydantic_ai.caching import breakpoint_before_projection
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

MODELS: dict[str, Callable[[Wire], Model]] = {
    "anthropic": lambda w: AnthropicModel(
        "claude-sonnet-4-5", provider=AnthropicProvider(anthropic_client=w.anthropic())
    ),
    # Automatic prefix caching only: no breakpoint is ever written.
    "openai-chat": lambda w: OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=w.openai())),
    "openai-responses": lambda w: OpenAIResponsesModel(
        "gpt-4o", provider=OpenAIProvider(openai_client=w.openai())
    ),
    # GPT-5.6 takes explicit breakpoints (``prompt_cache_breakpoint``), which PydanticAI writes.
    "openai-chat-5.6": lambda w: OpenAIChatModel(
        "gpt-5.6", provider=OpenAIProvider(openai_client=w.openai())
    ),
    "openai-responses-5.6": lambda w: OpenAIResponsesModel(
        "gpt-5.6", provider=OpenAIProvider(openai_client=w.openai())
    ),
}
#: The breakpoints each model's body carries on the tools and the instructions when cached.
STATIC_MARKS = {
    "anthropic": ["tool", "system"],
    "openai-chat-5.6": ["system"],
    "openai-responses-5.6": ["system"],
}
CACHING: dict[str, list[Any]] = {
    "none": [],
    "Caching()": [Caching()],
    "Caching(messages=False)": [Caching(messages=False)],
}


def session(
    tmp_path: Path,
    model: str,
    caching: str,
    *,
    reverse: bool = False,
    prompts: Sequence[str] = PROMPTS,
    edit_at: int | None = None,
    backend: InMemoryBackend | None = None,
) -> list[Request]:
    """The turns of ``prompts`` through the capability; the request bodies sent. ``edit_at``:
    before that turn SOUL.md is edited and the runtime rebuilt on the same backend."""
    wire = Wire()
    host, tools = deployment(tmp_path, reverse=reverse)
    backend = backend if backend is not None else InMemoryBackend()

    def agent_on(runtime: Runtime) -> Agent[None, str]:
        agent = Agent(
            MODELS[model](wire),
            capabilities=[*CACHING[caching], ContextPlaneCapability(runtime, session_id="s")],
        )

        @agent.tool_plain
        def lookup(topic: str) -> str:
            """Look a topic up."""
            return f"notes on {topic}"

        return agent

    history: list[ModelMessage] = []
    runtime = open_runtime(host.config, backend=backend, host=host, tools=tools)
    agent = agent_on(runtime)
    for n, prompt in enumerate(prompts):
        if n == edit_at:
            runtime.close()
            edit_soul(tmp_path, "v2")
            runtime = open_runtime(host.config, backend=backend, host=host, tools=tools)
            agent = agent_on(runtime)
        history = agent.run_sync(prompt, message_history=history).all_messages()
    runtime.close()
    assert len(wire.requests) == requests_for(prompts)
    return wire.requests


def breakpoints(request: Request) -> list[str]:
    """The labels of the units carrying a breakpoint, the projection's marked ``!``."""
    return [u.label + ("!" if PROJ in u.data else "") for u in request.units if u.breakpoint]


@pytest.mark.parametrize("caching", list(CACHING))
@pytest.mark.parametrize("model", list(MODELS))
def test_prefix_then_history_then_projection_turn_after_turn(
    tmp_path: Path, model: str, caching: str
) -> None:
    requests = session(tmp_path / "a", model, caching)
    prefixes = assert_cache_stable(requests, PROJ)
    first = prefixes[0]
    assert first[0].label == "tool" and any("orchard agent" in u.data for u in first)  # tools, prefix
    static = STATIC_MARKS.get(model, [])
    marks = [breakpoints(r) for r in requests]
    if caching == "none":
        assert marks == [[]] * REQUESTS
    elif caching == "Caching(messages=False)" or not static:
        assert marks == [static] * REQUESTS  # the tools and the prefix only (gpt-4o: none at all)
    else:
        # The tools, the prefix, and the history's last block (the turn's prompt, or the tool
        # result of a tool-calling step): never the projection, nothing top-level.
        assert [m[: len(static)] for m in marks] == [static] * REQUESTS, marks
        assert [len(m) for m in marks] == [len(static) + 1] * REQUESTS, marks
        assert [json.loads(prefix[-1].data) for prefix in prefixes][:3] == [
            {"type": TEXT[model], "text": PROMPTS[0]},
            {"type": TEXT[model], "text": PROMPTS[1]},
            json.loads(TOOL_RESULT[model]),
        ]
        if model != "anthropic":  # only our breakpoints: none at the request's end
            assert all(r.body["prompt_cache_options"]["mode"] == "explicit" for r in requests)


#: How each provider writes a text block, and the first tool result (turn 1's).
TEXT = {"anthropic": "text", "openai-chat-5.6": "text", "openai-responses-5.6": "input_text"}
TOOL_RESULT = {
    "anthropic": '{"tool_use_id": "toolu_2", "type": "tool_result", "content": [{"text": "notes on t2", '
    '"type": "text"}], "is_error": false}',
    "openai-chat-5.6": '{"type": "text", "text": "notes on t2"}',
    "openai-responses-5.6": '{"type": "input_text", "text": "notes on t2"}',
}


@pytest.mark.parametrize("model", list(MODELS))
def test_nothing_volatile_reaches_the_prefix(tmp_path: Path, model: str) -> None:
    """The same turns on a store filled in the other order, later, with the tools listed the
    other way round: byte-identical prefixes (the projections differ: rows of equal rank come
    in store order, stamped with when they were written)."""
    a = session(tmp_path / "a", model, "Caching()")
    b = session(tmp_path / "b", model, "Caching()", reverse=True)
    for n, (ra, rb) in enumerate(zip(a, b, strict=True)):
        (pa, qa), (pb, qb) = ra.split(PROJ), rb.split(PROJ)
        assert pa == pb, f"request {n}: the prefixes differ"
        assert [u.data for u in qa] != [u.data for u in qb], f"request {n}: the projections should differ"
        assert [u for u in ra.units if PROJ not in u.data] == [u for u in rb.units if PROJ not in u.data]


def test_a_caching_setting_that_caches_only_the_prefix_is_left_alone() -> None:
    assert breakpoint_before_projection({"cache": {"messages": False}}) == (
        {"cache": {"messages": False}},
        None,
    )
    assert breakpoint_before_projection(None) == (None, None)
    assert breakpoint_before_projection({"cache": False}) == ({"cache": False}, None)
    settings, point = breakpoint_before_projection({"cache": "1h", "temperature": 0.0})
    assert settings == {"cache": {"retention": "1h", "messages": False}, "temperature": 0.0}
    assert point is not None and point.ttl == "1h"
    settings, point = breakpoint_before_projection(
        {"anthropic_cache": True, "anthropic_cache_instructions": True}
    )
    assert settings == {"anthropic_cache_instructions": True} and point is not None and point.ttl == "5m"


@pytest.mark.parametrize("model", ["anthropic", "openai-responses"])
def test_twenty_turns_record_a_shared_prefix_and_name_a_changed_section(tmp_path: Path, model: str) -> None:
    """Issue 24, read from the snapshots the backend recorded: 20 turns (every fifth calling
    the tool) share >= 99 % of the cacheable prefix with the previous call on every call; then
    SOUL.md is edited and the runtime rebuilt: the next call's snapshot names ``identity``."""
    backend = InMemoryBackend()
    prompts = (*PROMPTS_20, "question 20: and now?")
    requests = session(tmp_path, model, "Caching()", prompts=prompts, edit_at=20, backend=backend)
    assert_cache_stable(requests[:-1], PROJ)  # the bodies agree with the figures
    assert_recorded_shares(
        backend.snapshots.list("s"), changed_turn=20, section="identity", calls=requests_for(prompts)
    )
