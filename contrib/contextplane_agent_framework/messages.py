"""How delivery reads Agent Framework messages: the ``MessageCodec`` of ``agent_framework.Message``.

The projection is a user message marked in ``additional_properties`` with the run's token and
attributed to the provider's ``source_id`` (``_attribution``, the key the framework's history
providers and per-call persistence split context from input by), so nothing the framework
stores mistakes it for the operator's input. Detection is by marker, never by content.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from agent_framework import Content, Message

from contextplane.delivery import PLAIN_FRAME_KEYS

#: ``additional_properties`` key of a projection message; its value is the run's token.
PROJECTION_MARKER = "contextplane_projection"


def is_context_frame(message: Message) -> bool:
    """A projection (any run's) or a v1-style context frame, by marker: stripped before a call."""
    props = message.additional_properties or {}
    return any(bool(props.get(key)) for key in PLAIN_FRAME_KEYS)


def _arguments(arguments: Any) -> str:
    """A call's arguments as the clients send them: a string as it is, a mapping as JSON."""
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)


def _result(content: Content) -> str:
    """A function result as the clients send it: its text items, else its result (a string as
    it is, anything else as JSON)."""
    if content.items:
        return "\n".join(item.text or "" for item in content.items if str(item.type) == "text")
    result = content.result
    if result is None:
        return ""
    return result if isinstance(result, str) else json.dumps(result, default=str)


def message_text(message: Message) -> str:
    """What the provider is sent of a message: its text, then each function call as
    ``name(arguments)`` and each function result's output, one per line.

    Why not ``message.text`` alone: it leaves function calls and results out, so a tool round
    would count 0 chars in the snapshot's history size and cacheable-prefix figure, though the
    provider is sent (and caches) the call's name and arguments and the result."""
    parts = [str(message.text)] if message.text else []
    for content in message.contents:
        kind = str(content.type)
        if kind == "function_call":
            parts.append(f"{content.name or ''}({_arguments(content.arguments)})")
        elif kind == "function_result":
            parts.append(_result(content))
    return "\n".join(p for p in parts if p)


def message_role(message: Message) -> str:
    return str(message.role)


def tool_key(message: Message) -> str:
    """A message's function calls and results (ids, names, arguments, results), which its text
    leaves out: a rewrite of only those must change the cacheable prefix's digest."""
    keyed = [c.to_dict() for c in message.contents if str(c.type) != "text"]
    return json.dumps(keyed, sort_keys=True, separators=(",", ":"), default=repr) if keyed else ""


#: Where ``agent_framework.openai``'s Responses client finds a function call's live item id
#: (the namespaced key, then the legacy one): sent for a call of the running run, while a call
#: replayed from a history provider is sent as ``fc_<call_id>``.
LIVE_ITEM_ID = ("openai", "item_id")
LEGACY_LIVE_ITEM_ID = "fc_id"


def _without_live_id(content: Content) -> Content:
    props = content.additional_properties or {}
    namespace, key = LIVE_ITEM_ID
    scoped = props.get(namespace)
    if LEGACY_LIVE_ITEM_ID not in props and not (isinstance(scoped, dict) and key in scoped):
        return content
    kept = {k: v for k, v in props.items() if k != LEGACY_LIVE_ITEM_ID}
    if isinstance(scoped, dict):
        kept[namespace] = {k: v for k, v in scoped.items() if k != key}
    copied = copy.copy(content)
    copied.additional_properties = kept
    return copied


def replay_form(message: Message, agent_name: str) -> Message:
    """A response message of the running run as the framework sends it once a history provider
    replays it on a later turn: with the agent's name (the ``Agent`` stamps it on a run's
    responses after the run; chat completions send it as ``name``) and its function calls
    without their live item id (the Responses client then writes ``fc_<call_id>``, as on
    replay). A copy; ``message`` (the run's, which is stored) is left as it is.

    Why: the tool call of a tool-calling step is sent once in the run that made it and then on
    every later turn; in two forms, the later requests would share the cached prefix only up to
    it."""
    contents = [_without_live_id(c) if str(c.type) == "function_call" else c for c in message.contents]
    unchanged = all(a is b for a, b in zip(contents, message.contents, strict=True))
    if message.author_name is not None and unchanged:
        return message
    copied = copy.copy(message)
    copied.contents = contents
    if copied.author_name is None:
        copied.author_name = agent_name
    return copied


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
