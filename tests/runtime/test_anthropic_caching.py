"""Beside langchain_anthropic's caching middleware: the wire payload ChatAnthropic would send.

Skipped unless ``langchain_anthropic`` is installed (it is not a dependency). No network: the
model builds its request payload and returns a canned reply.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from contextplane_langgraph import ContextPlaneMiddleware

from .conftest import cfg

langchain_anthropic = pytest.importorskip("langchain_anthropic")
caching = pytest.importorskip("langchain_anthropic.middleware")


class PayloadModel(langchain_anthropic.ChatAnthropic):  # type: ignore[misc]
    """ChatAnthropic that records the request payload instead of sending it."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> PayloadModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        PAYLOADS.append(self._get_request_payload(messages, stop=stop, **kwargs))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])


PAYLOADS: list[dict[str, Any]] = []


def marked_blocks(payload: dict[str, Any]) -> list[str]:
    """Which blocks carry cache_control: 'system', or the first 12 chars of a message block."""
    out = [("system", b) for b in payload.get("system", []) if isinstance(payload.get("system"), list)]
    for m in payload["messages"]:
        if isinstance(m["content"], list):
            out += [(str(b.get("text", ""))[:12], b) for b in m["content"]]
    return [name for name, block in out if "cache_control" in block]


@pytest.mark.parametrize("anthropic_first", [True, False])
def test_breakpoints_on_prefix_and_history_never_on_the_projection(host, anthropic_first: bool) -> None:
    PAYLOADS.clear()
    ours = ContextPlaneMiddleware(host=host, stable_prefix=True)
    theirs = caching.AnthropicPromptCachingMiddleware()
    agent = create_agent(
        PayloadModel(model="claude-sonnet-4-5", api_key="not-used"),
        tools=[],
        middleware=[theirs, ours] if anthropic_first else [ours, theirs],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [HumanMessage("an:one")]}, cfg("an"))
    agent.invoke({"messages": [HumanMessage("an:two")]}, cfg("an"))
    payload = PAYLOADS[-1]
    last_block = payload["messages"][-1]["content"][-1]
    assert last_block["text"].startswith("<working_state>")  # the projection comes last
    if anthropic_first:
        # The documented order: breakpoints on the prefix and the last history block only.
        assert marked_blocks(payload) == ["system", "an:two"]
        assert "cache_control" not in payload
    else:
        # The wrong order: the provider-level setting arrives after ours ran, and caching
        # covers the end of the prompt, the volatile projection (why docs/runtime.md says
        # list AnthropicPromptCachingMiddleware first).
        assert "cache_control" in payload or "cache_control" in last_block
