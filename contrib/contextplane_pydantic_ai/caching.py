"""A cache breakpoint before the projection, never on it (ADR D1, issue 24).

PydanticAI caches the growing conversation (``Caching()``, ``ModelSettings(cache=True)``, and
``anthropic_cache`` / ``anthropic_cache_messages``) by putting the breakpoint on the **last**
block of the request: Anthropic's top-level automatic ``cache_control``, or ``cache_control``
on the last block of the last message. The projection is that last block, so every call would
write a cache entry ending in a projection the next call no longer sends: a write per call and
never a read past the instructions (checked on the request body ``AnthropicModel`` sends, in
``tests/pydantic_ai/test_request_shapes.py``).

So when a request asks for the conversation to be cached, the capability takes the setting
over, as the LangGraph middleware does with ``AnthropicPromptCachingMiddleware``: the unified
``cache`` keeps caching the tools and the instructions (``messages=False``), the
conversation-end settings are removed, and the projection's part opens with a ``CachePoint``,
which PydanticAI attaches to the block before it: the last block of the history (the turn's
prompt, or the tool results of a tool-calling step). Everything up to there is cached and
read back on the next call; the projection comes after the last breakpoint. Models without
explicit breakpoints (OpenAI's automatic prefix caching) drop the ``CachePoint``.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from pydantic_ai.messages import CachePoint
from pydantic_ai.settings import CacheConfig, ModelSettings

#: Settings that put a breakpoint at the end of the request (on the projection).
CONVERSATION_END_KEYS = ("anthropic_cache", "anthropic_cache_messages")

#: A ``CachePoint``'s TTL for a requested retention: snapped down, as PydanticAI does.
_TTL: dict[Any, Literal["5m", "1h"]] = {"1h": "1h", "12h": "1h"}


def _ttl(value: Any) -> Literal["5m", "1h"]:
    return _TTL.get(value, "5m")


def breakpoint_before_projection(
    settings: ModelSettings | None,
) -> tuple[ModelSettings | None, CachePoint | None]:
    """The request's settings with conversation caching taken over, and the ``CachePoint`` to
    open the projection with; ``(settings, None)`` unchanged when the conversation is not
    cached (no caching, or ``Caching(messages=False)``)."""
    if not settings:
        return settings, None
    out: dict[str, Any] = dict(settings)
    ttls: list[Literal["5m", "1h"]] = []
    for key in CONVERSATION_END_KEYS:
        value = out.pop(key, None)
        if value:
            ttls.append(_ttl(value))
    cache = out.get("cache")
    if cache is not None and cache is not False:
        retention, messages = (
            (cache.get("retention", True), cache.get("messages", True))
            if isinstance(cache, dict)
            else (cache, True)
        )
        if messages:
            out["cache"] = (
                CacheConfig(messages=False)
                if retention is True
                else CacheConfig(retention=retention, messages=False)
            )
            ttls.append(_ttl(retention))
    if not ttls:
        return settings, None
    return cast(ModelSettings, out), CachePoint(ttl="1h" if "1h" in ttls else "5m")
