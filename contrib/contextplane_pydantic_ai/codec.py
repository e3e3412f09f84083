"""PydanticAI messages as a ``MessageCodec``: how delivery reads and writes them.

The projection travels as one ``ModelRequest`` holding one ``ProjectionPart`` (a
``UserPromptPart`` to PydanticAI and every provider), marked twice: the request's ``metadata``
(``contextplane_projection``) and the part's type. It is placed after the history for one
model request only. Were one ever handed back as history (a caller that kept a request it
should not have), delivery strips it by the marker, never by its text; the part's type is the
marker that survives PydanticAI merging consecutive requests (which keeps no application
metadata), and ``separated`` gives such a part its own marked request again so it is stripped
and counted as a stripped frame like any other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic_ai.messages import (
    CachePoint,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

#: The ``ModelRequest.metadata`` key that marks the projection's request.
PROJECTION_MARKER = "contextplane_projection"


@dataclass(repr=False)
class ProjectionPart(UserPromptPart):
    """The projection's text: a user prompt to PydanticAI and the providers, marked by its type."""


def is_projection(message: ModelMessage) -> bool:
    """True for a request the capability placed (by marker, never by content)."""
    if not isinstance(message, ModelRequest):
        return False
    meta = message.metadata
    if isinstance(meta, dict) and meta.get(PROJECTION_MARKER):
        return True
    return bool(message.parts) and all(isinstance(p, ProjectionPart) for p in message.parts)


def separated(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages`` with every projection part that was merged into another request moved to a
    marked request of its own, right after it (copies: the messages given are not changed)."""
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest) and not is_projection(message):
            frames = [p for p in message.parts if isinstance(p, ProjectionPart)]
            if frames:
                rest = [p for p in message.parts if not isinstance(p, ProjectionPart)]
                out.append(replace(message, parts=rest))
                out.append(ModelRequest(parts=frames, metadata={PROJECTION_MARKER: True}))
                continue
        out.append(message)
    return out


def _part_text(part: Any) -> str:
    if isinstance(part, UserPromptPart | SystemPromptPart):
        content = part.content
        if isinstance(content, str):
            return content
        return "".join(c for c in content if isinstance(c, str))
    if isinstance(part, ToolReturnPart):
        return part.model_response_str()
    if isinstance(part, ToolCallPart):
        return f"{part.tool_name}({part.args_as_json_str()})"
    if isinstance(part, TextPart):
        return part.content
    content = getattr(part, "content", "")
    return content if isinstance(content, str) else ""


def message_text(message: ModelMessage) -> str:
    """The text of a request or response: its parts' text, one per line (what a full-text
    snapshot shows and the history size counts)."""
    return "\n".join(t for t in (_part_text(p) for p in message.parts) if t)


def message_role(message: ModelMessage) -> str:
    """The chat role a provider maps the message to: ``assistant`` for a response, ``tool``
    for a request of tool results only, else ``user``."""
    if isinstance(message, ModelResponse):
        return "assistant"
    parts = message.parts
    if parts and all(isinstance(p, ToolReturnPart) for p in parts):
        return "tool"
    return "user"


def tool_key(message: ModelMessage) -> str:
    """The tool-call ids, names and arguments of a message's parts, which its text leaves out
    (a rewrite of only those must change the cacheable prefix's digest); "" for none."""
    keys: list[list[str]] = []
    for part in message.parts:
        call_id = getattr(part, "tool_call_id", None)
        if isinstance(call_id, str):
            key = [part.part_kind, str(getattr(part, "tool_name", "")), call_id]
            keys.append([*key, part.args_as_json_str()] if isinstance(part, ToolCallPart) else key)
    return json.dumps(keys, separators=(",", ":")) if keys else ""


def projection_request(text: str, cache_point: CachePoint | None = None) -> ModelRequest:
    """The projection as a marked request (sent for one model request, never stored);
    ``cache_point`` opens it: the cache breakpoint on the block before it (``caching``)."""
    part = ProjectionPart(text if cache_point is None else [cache_point, text])
    return ModelRequest(parts=[part], metadata={PROJECTION_MARKER: True})


class PydanticAICodec:
    """The ``MessageCodec`` of ``pydantic_ai.messages.ModelMessage`` (static functions:
    delivery calls them once per message)."""

    is_frame = staticmethod(is_projection)
    text_of = staticmethod(message_text)
    role_of = staticmethod(message_role)
    tool_key_of = staticmethod(tool_key)
    wrap = staticmethod(projection_request)


#: The one codec instance the capability delivers through.
CODEC = PydanticAICodec()
