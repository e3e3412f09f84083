"""Delivering a projection to one model call: the one helper every adapter calls (ADR D2).

An adapter does two things per turn: compose (``contextplane.projection.compose``) once, then
``deliver`` on every model call of the turn. ``deliver`` strips the context frames an old
checkpoint may hold (D2 migration: they stay in the checkpoint, never reach the model),
places the fresh projection after the history, and tells every ``observe_model_call``
observer what the model is about to see (the prompt snapshot, D5). Nothing here persists the
projection: it exists for this request only.

Messages are the adapter's own type (LangChain messages, plain dicts); the adapter passes the
one object that knows that type, a ``MessageCodec`` (``PLAIN`` for plain dict messages), or,
through ``deliver``'s older signature, its four functions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Protocol

from contextplane.plugins import PluginHost, get_host
from contextplane.records.cache_prefix import message_digest
from contextplane.request import ProjectionRequest
from contextplane.signatures import awaiting, same_as
from contextplane.types import Delivered as Delivered
from contextplane.types import M, ProjectedContext, StablePrefix, StrippedFrame
from contextplane.types import ModelCall as ModelCall

#: Keys that mark a plain (mapping) message as a context frame: v1's, and ours.
PLAIN_FRAME_KEYS: tuple[str, ...] = ("context_frame", "is_context_frame", "contextplane_projection")


def plain_text(message: Any) -> str:
    """The text of a plain message: a string, a mapping's ``content``, or an object's ``content``."""
    if isinstance(message, str):
        return message
    content = message.get("content", "") if isinstance(message, Mapping) else getattr(message, "content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # content blocks: keep the text ones
        return "".join(
            b.get("text", "") if isinstance(b, Mapping) else str(b)
            for b in content
            if not isinstance(b, bytes)
        )
    return str(content)


def plain_is_frame(message: Any) -> bool:
    """A plain mapping message is a frame when it carries one of ``PLAIN_FRAME_KEYS`` (at the
    top level or under ``metadata``). Detection is by marker only, never by content."""
    if not isinstance(message, Mapping):
        return False
    meta = message.get("metadata")
    marks = [message, meta] if isinstance(meta, Mapping) else [message]
    return any(bool(m.get(k)) for m in marks for k in PLAIN_FRAME_KEYS)


#: Keys of a mapping message that are not part of its tool-call key: its role and text (hashed
#: already), its own id (an application's, as LangChain's ``id``, not a tool call's) and our
#: own marks (never sent).
_NOT_KEYED = frozenset({"role", "content", "id", "metadata"})


def tool_key(message: Any) -> str:
    """What of a message, besides its role and text, a provider receives and a history rewrite
    could change alone: for a mapping (OpenAI chat messages, Responses items) every other key
    but its own id (``tool_calls``, ``tool_call_id``, ``call_id``, ``name``, ``arguments``, ...),
    so a plain message and a LangChain one with the same role and text digest alike; for an object,
    its ``tool_calls`` and ``tool_call_id`` (LangChain messages). Canonical JSON, "" for none.

    Why: the cacheable prefix hashes each history message (``records.cache_prefix``); a rewrite
    of only a tool call's arguments or a result's call id must break the recorded share too."""
    if isinstance(message, Mapping):
        keyed: Any = {k: v for k, v in message.items() if k not in _NOT_KEYED}
    else:
        keyed = {
            name: value for name in ("tool_calls", "tool_call_id") if (value := getattr(message, name, None))
        }
    if not keyed:
        return ""
    return json.dumps(keyed, sort_keys=True, separators=(",", ":"), default=repr)


def plain_role(message: Any) -> str:
    if isinstance(message, Mapping):
        return str(message.get("role", "user"))
    return str(getattr(message, "type", getattr(message, "role", "user")))


def plain_projection_message(text: str) -> dict[str, Any]:
    """The projection as a plain user message, marked so a later turn can strip it."""
    return {"role": "user", "content": text, "metadata": {"contextplane_projection": True}}


class MessageCodec(Protocol[M]):
    """What delivery needs to know of an adapter's message type, in one object: the only call
    delivery makes back up into an adapter. Frame detection is by marker, never by content."""

    def is_frame(self, message: M) -> bool:
        """True for a context frame a checkpoint may still hold (stripped, never sent)."""
        ...

    def text_of(self, message: M) -> str:
        """The message's text (what a full-text snapshot and the history size count)."""
        ...

    def role_of(self, message: M) -> str:
        """The message's chat role (``user``, ``assistant``, ...), for a full-text snapshot."""
        ...

    # Optional: ``tool_key_of(message) -> str``, what else of the message the provider receives
    # (tool-call ids, names, arguments; tool-result ids) for the cacheable prefix's digests;
    # ``tool_key`` when a codec has none.

    def wrap(self, text: str) -> M:
        """The projection text as a message, marked so a later turn strips it."""
        ...


class PlainCodec:
    """The codec of plain messages: ``{"role", "content"}`` mappings (or objects with a
    ``content``), frames marked by one of ``PLAIN_FRAME_KEYS``. (The functions themselves, as
    static methods: delivery calls them once per message, so no call in between.)"""

    is_frame = staticmethod(plain_is_frame)
    text_of = staticmethod(plain_text)
    role_of = staticmethod(plain_role)
    wrap = staticmethod(plain_projection_message)


#: The plain-message codec (the external assembler's, and the default).
PLAIN: MessageCodec[Any] = PlainCodec()


class Callables(Generic[M]):
    """The four functions ``deliver`` took before ``MessageCodec``, as one codec (held as they
    are, so a call through the codec is a call of the function)."""

    __slots__ = ("is_frame", "role_of", "text_of", "wrap")

    def __init__(
        self,
        wrap: Callable[[str], M],
        is_frame: Callable[[M], bool],
        text_of: Callable[[M], str],
        role_of: Callable[[M], str],
    ) -> None:
        self.wrap, self.is_frame, self.text_of, self.role_of = wrap, is_frame, text_of, role_of


def frame_of(message: Any, text_of: Callable[[Any], str] = plain_text) -> StrippedFrame:
    """(message id, chars, sha256) of a stripped frame: what a snapshot keeps instead of its text."""
    text = text_of(message)
    mid = message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)
    return StrippedFrame(
        None if mid is None else str(mid), len(text), hashlib.sha256(text.encode()).hexdigest()
    )


def _call_of(
    projection: ProjectedContext,
    history: Sequence[M],
    *,
    prefix: StablePrefix | str | None,
    call_index: int,
    wrap: Callable[[str], M],
    is_frame: Callable[[M], bool] = plain_is_frame,
    text_of: Callable[[M], str] = plain_text,
    role_of: Callable[[M], str] = plain_role,
    host: PluginHost | None = None,
) -> Delivered[M]:
    """The parameters of ``deliver`` and ``adeliver``, and their one body but telling the
    observers: the call's messages, through the four callables as one codec."""
    return placed(projection, history, prefix, call_index, Callables(wrap, is_frame, text_of, role_of))


def _observers(call: Delivered[Any], host: PluginHost | None) -> tuple[PluginHost, ProjectionRequest] | None:
    """Who is told about the call, and of which request: the host (``host``, else the
    process-wide one) when the projection was composed to be recorded, else no one."""
    request = call.call.projection.request
    if request is None or not request.record:
        return None
    return (host if host is not None else get_host()), request


@same_as(_call_of)
def deliver(*args: Any, **kwargs: Any) -> Any:
    """Prepare one model call: strip legacy frames, place the projection, notify observers.

    ``wrap`` turns the projection text into the adapter's message type (called only when
    there is text). Observers are told only when the projection was composed to be recorded
    (``request.record``); incognito calls are told too, flagged, and record no text."""
    call = _call_of(*args, **kwargs)
    told = _observers(call, kwargs.get("host"))  # ``host`` is keyword-only
    if told is not None:
        told[0].notify_model_call(call.call, told[1])
    return call


@awaiting(_call_of)
async def adeliver(*args: Any, **kwargs: Any) -> Any:
    """``deliver`` for an event loop: the same messages, and the observers told through
    ``PluginHost.anotify_model_call`` (the records observer's rows written by the host without
    blocking the loop; other observers run in a worker thread), awaited, so the loop never
    waits on a record and the snapshot is written before the model is called."""
    call = _call_of(*args, **kwargs)
    told = _observers(call, kwargs.get("host"))
    if told is not None:
        await told[0].anotify_model_call(call.call, told[1])
    return call


def placed(
    projection: ProjectedContext,
    history: Sequence[M],
    prefix: StablePrefix | str | None,
    call_index: int,
    codec: MessageCodec[M],
) -> Delivered[M]:
    """The messages of one model call and what observers are told about it (every delivery:
    ``deliver``, ``adeliver``, ``Runtime.deliver``). Notifies no one."""
    is_frame, text_of, role_of = codec.is_frame, codec.text_of, codec.role_of
    key_of: Callable[[M], str] = getattr(codec, "tool_key_of", tool_key)
    kept: list[M] = []
    stripped: list[M] = []
    for message in history:
        (stripped if is_frame(message) else kept).append(message)
    messages = [*kept, codec.wrap(projection.text)] if projection.text else list(kept)
    system_text = prefix.text if isinstance(prefix, StablePrefix) else prefix

    def full_text() -> str:
        parts = [f"[system]\n{system_text}"] if system_text else []
        parts.extend(f"[{role_of(m)}]\n{text_of(m)}" for m in messages)
        return "\n\n".join(parts)

    # Only a recorded call is measured (its snapshot keeps the cacheable prefix): hashing the
    # history here, not later, keeps the recorder from calling back up into delivery.
    digests = (
        tuple(message_digest(role_of(m), text_of(m), key_of(m)) for m in kept)
        if projection.request is not None and projection.request.record
        else None
    )
    call = ModelCall(
        projection=projection,
        call_index=call_index,
        prefix=prefix,
        stripped=tuple(frame_of(m, text_of) for m in stripped),
        history_messages=len(kept),
        history_chars=sum(chars for _digest, chars in digests)
        if digests is not None
        else sum(len(text_of(m)) for m in kept),
        full_text=full_text,
        history_digests=digests,
    )
    return Delivered(messages, tuple(stripped), call)
