"""How delivery reads Agent Framework messages: the ``MessageCodec`` of ``agent_framework.Message``.

The projection is a user message marked in ``additional_properties`` with the run's token and
attributed to the provider's ``source_id`` (``_attribution``, the key the framework's history
providers and per-call persistence split context from input by), so nothing the framework
stores mistakes it for the operator's input. Detection is by marker, never by content.
"""

from __future__ import annotations

import json
from typing import Any

from agent_framework import Message

from contextplane.delivery import PLAIN_FRAME_KEYS

#: ``additional_properties`` key of a projection message; its value is the run's token.
PROJECTION_MARKER = "contextplane_projection"


def is_context_frame(message: Message) -> bool:
    """A projection (any run's) or a v1-style context frame, by marker: stripped before a call."""
    props = message.additional_properties or {}
    return any(bool(props.get(key)) for key in PLAIN_FRAME_KEYS)


def message_text(message: Message) -> str:
    """The text contents of a message (function calls and results carry none)."""
    return str(message.text or "")


def message_role(message: Message) -> str:
    return str(message.role)


def tool_key(message: Message) -> str:
    """A message's function calls and results (ids, names, arguments, results), which its text
    leaves out: a rewrite of only those must change the cacheable prefix's digest."""
    keyed = [c.to_dict() for c in message.contents if str(c.type) != "text"]
    return json.dumps(keyed, sort_keys=True, separators=(",", ":"), default=repr) if keyed else ""


class RunCodec:
    """The codec of one run: reads framework messages, and wraps the run's projection text as
    a user message carrying this run's token (so the run's own copy is told from a stale one)."""

    __slots__ = ("source_id", "token")

    def __init__(self, source_id: str, token: str) -> None:
        self.source_id = source_id
        self.token = token

    is_frame = staticmethod(is_context_frame)
    text_of = staticmethod(message_text)
    role_of = staticmethod(message_role)
    tool_key_of = staticmethod(tool_key)

    def wrap(self, text: str) -> Message:
        props: dict[str, Any] = {
            PROJECTION_MARKER: self.token,
            "_attribution": {"source_id": self.source_id, "source_type": "ContextPlaneProvider"},
        }
        return Message(role="user", contents=[text], additional_properties=props)

    def is_this_run(self, message: Message) -> bool:
        """This run's projection (placed by ``before_run`` or an earlier call of the run)."""
        return (message.additional_properties or {}).get(PROJECTION_MARKER) == self.token
