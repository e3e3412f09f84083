"""The Responses input items the Agents SDK hands a ``call_model_input_filter``, as a
``MessageCodec``: what delivery reads them through.

The SDK's input items are plain dicts (``{"role": "user", "content": ...}``, ``function_call``,
``function_call_output``, output messages with content blocks). The projection item is a user
message with no marker key: the Responses API rejects keys it does not know, and no marker is
needed, because the filter's output is sent once and never stored (not in a ``Session``, not in
``RunResult.to_input_list()``), so no later history holds a frame to strip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextplane.delivery import plain_text


def is_user_input(item: Any) -> bool:
    """A user message (the operator's input; the projection never reaches a stored history)."""
    if not isinstance(item, Mapping):
        return False
    return item.get("role") == "user" and item.get("type", "message") == "message"


def item_text(item: Any) -> str:
    """A message's text, a tool call's arguments, a tool result's output (what a snapshot counts)."""
    if not isinstance(item, Mapping):
        return plain_text(item)
    if "content" in item:
        return plain_text(item)
    for key in ("output", "arguments"):
        value = item.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, Sequence):
            return plain_text({"content": value})
    return ""


def item_role(item: Any) -> str:
    """The chat role of a message, else the item's type (``function_call``, ...)."""
    if isinstance(item, Mapping):
        return str(item.get("role") or item.get("type") or "user")
    return str(getattr(item, "role", None) or getattr(item, "type", "user"))


class ResponseItemsCodec:
    """The ``MessageCodec`` of the SDK's input items."""

    @staticmethod
    def is_frame(item: Any) -> bool:
        """Never: a stored history holds no projection (see the module docstring)."""
        return False

    text_of = staticmethod(item_text)
    role_of = staticmethod(item_role)

    @staticmethod
    def wrap(text: str) -> dict[str, Any]:
        """The projection as a user message, which every model the SDK drives accepts."""
        return {"role": "user", "content": text}


ITEMS = ResponseItemsCodec()


def turn_position(items: Sequence[Any]) -> tuple[int, str]:
    """(turn index, query) of a model input: the number of user messages before the newest
    one, and the newest one's text (the turn's user input)."""
    users = [i for i in items if is_user_input(i)]
    if not users:
        return 0, ""
    return len(users) - 1, item_text(users[-1])


def is_tool_result(item: Any) -> bool:
    """A tool's result (``function_call_output``, ``computer_call_output``, ...)."""
    return isinstance(item, Mapping) and str(item.get("type", "")).endswith("_output")


def calls_so_far(items: Sequence[Any]) -> int:
    """The model calls the turn has had before this input: the runs of model output after the
    newest user message (a response's items are contiguous; tool results separate two)."""
    last_user = max((n for n, i in enumerate(items) if is_user_input(i)), default=-1)
    runs, in_output = 0, False
    for item in items[last_user + 1 :]:
        output = not is_tool_result(item) and not is_user_input(item)
        runs += output and not in_output
        in_output = output
    return runs
