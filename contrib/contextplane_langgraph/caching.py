"""Cache breakpoints that keep the projection out of the cached prefix (ADR D1).

Anthropic-style providers cache everything up to a block marked ``cache_control``.
``langchain_anthropic``'s ``AnthropicPromptCachingMiddleware`` asks for caching by putting
``cache_control`` in ``request.model_settings``; ``ChatAnthropic`` then puts the breakpoint
at the end of the prompt (older releases mark the last block of the last message; 1.7 sends a
top-level ``cache_control``). With the projection appended last, that would make the volatile
frame the cached tail: a cache write every turn, never a read.

So when a request carries ``cache_control`` (or the middleware was given one), the
middleware removes it from ``model_settings`` and places explicit breakpoints itself: on the
stable prefix (the system message) and on the last block of the session history. The
projection comes after both and is never marked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage


def _tool_result_block(message: ToolMessage, cache_control: Mapping[str, Any]) -> list[Any]:
    """A tool result with string content, marked: as the one ``tool_result`` block
    ``ChatAnthropic`` renders it as when unmarked (same keys, same order), plus the marker.
    Marking its text instead (``[{"type": "text", ...}]``) would send the result's content as
    a list on this call and as a string on the next: a different body where the next call's
    cached prefix must be byte-identical."""
    return [
        {
            "type": "tool_result",
            "content": message.content,
            "tool_use_id": message.tool_call_id,
            "is_error": message.status == "error",
            "cache_control": dict(cache_control),
        }
    ]


def _with_breakpoint(message: BaseMessage, cache_control: Mapping[str, Any]) -> BaseMessage:
    content = message.content
    if isinstance(message, ToolMessage) and isinstance(content, str) and content:
        return message.model_copy(update={"content": _tool_result_block(message, cache_control)})
    if isinstance(content, str):
        if not content:
            return message
        blocks: list[Any] = [{"type": "text", "text": content, "cache_control": dict(cache_control)}]
    else:
        blocks = list(content)
        for i in range(len(blocks) - 1, -1, -1):
            block = blocks[i]
            if isinstance(block, str):
                blocks[i] = {"type": "text", "text": block, "cache_control": dict(cache_control)}
                break
            if isinstance(block, dict) and block.get("type") not in ("thinking", "redacted_thinking"):
                blocks[i] = {**block, "cache_control": dict(cache_control)}
                break
        else:
            return message
    # A copy: the message objects in the request belong to the checkpointed state.
    return message.model_copy(update={"content": blocks})


def place_breakpoints(
    system_message: SystemMessage | None,
    history: Sequence[BaseMessage],
    cache_control: Mapping[str, Any],
) -> tuple[SystemMessage | None, list[BaseMessage]]:
    """Mark the stable prefix and the last history block; return copies, never mutate."""
    system = system_message
    if system is not None:
        marked = _with_breakpoint(system, cache_control)
        assert isinstance(marked, SystemMessage)
        system = marked
    out = list(history)
    if out:
        out[-1] = _with_breakpoint(out[-1], cache_control)
    return system, out
