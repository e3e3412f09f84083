"""PydanticAI messages as a ``MessageCodec``: how delivery reads and writes them.

The projection travels as one ``ModelRequest`` holding one ``UserPromptPart``, marked in the
request's ``metadata`` (``contextplane_projection``), placed after the history for one model
request only. A message carrying the marker is a context frame: were one ever handed back as
history (a caller that stored a request it should not have), delivery strips it by the
marker, never by its text.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import (
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


def is_projection(message: ModelMessage) -> bool:
    """True for the request the capability placed (by marker, never by content)."""
    meta = getattr(message, "metadata", None)
    return isinstance(meta, dict) and bool(meta.get(PROJECTION_MARKER))


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


def projection_request(text: str) -> ModelRequest:
    """The projection as a marked request (sent for one model request, never stored)."""
    return ModelRequest(parts=[UserPromptPart(text)], metadata={PROJECTION_MARKER: True})


class PydanticAICodec:
    """The ``MessageCodec`` of ``pydantic_ai.messages.ModelMessage`` (static functions:
    delivery calls them once per message)."""

    is_frame = staticmethod(is_projection)
    text_of = staticmethod(message_text)
    role_of = staticmethod(message_role)
    wrap = staticmethod(projection_request)


#: The one codec instance the capability delivers through.
CODEC = PydanticAICodec()
