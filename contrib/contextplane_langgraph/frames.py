"""Context frames in message lists: detection, stripping, and who counts as the operator.

A *context frame* is projected context delivered as a message. v2 never stores one (ADR D2),
but threads started on v1 have frames in their checkpoints: v1's ``context_frame_message()``
returned a ``HumanMessage`` marked in ``additional_kwargs``. Those frames are stripped from
the model-visible list before the fresh projection is appended, and left in the checkpoint
for audit.

Detection is by marker only, never by content: an operator may paste ``<working_state>``
into a message, and that message must still reach the model. The markers recognised are
``FRAME_MARKERS`` (v1's, plus the one this package puts on its own projection message).

The *operator's newest input* is the projection's query on a resume. Operator input is a
human message that is not a context frame, not a guard note and not a summary. A folded steer
(``additional_kwargs["steer"]``) counts as operator input but does not start a new turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

#: ``additional_kwargs`` keys that mark a message as a context frame. ``context_frame`` and
#: ``is_context_frame`` are v1's; ``contextplane_projection`` is ours.
FRAME_MARKERS: tuple[str, ...] = ("context_frame", "is_context_frame", "contextplane_projection")
#: ``additional_kwargs`` keys that mark a human message as not operator-authored.
NON_OPERATOR_MARKERS: tuple[str, ...] = ("guard_note", "is_guard_note", "summary", "is_summary")
#: ``additional_kwargs["lc_source"]`` values that are not operator-authored (LangChain's
#: SummarizationMiddleware writes ``"summarization"``).
NON_OPERATOR_SOURCES: frozenset[str] = frozenset({"summarization"})
#: ``additional_kwargs`` keys that mark a folded steer: operator input inside a running turn.
STEER_MARKERS: tuple[str, ...] = ("steer", "folded_steer")

PROJECTION_MARKER = "contextplane_projection"


def _kwargs(message: Any) -> Mapping[str, Any]:
    kw = getattr(message, "additional_kwargs", None)
    return kw if isinstance(kw, Mapping) else {}


def is_context_frame(message: Any) -> bool:
    """True when ``message`` is a context frame (v1's stored frames or our projection message)."""
    kw = _kwargs(message)
    if not kw:
        return False
    return any(kw.get(k) for k in FRAME_MARKERS)


def is_operator_input(message: Any) -> bool:
    """True for a human message the operator wrote (steers included)."""
    if not isinstance(message, HumanMessage):
        return False
    kw = _kwargs(message)
    if not kw:
        return True
    if any(kw.get(k) for k in FRAME_MARKERS) or any(kw.get(k) for k in NON_OPERATOR_MARKERS):
        return False
    return kw.get("lc_source") not in NON_OPERATOR_SOURCES


def is_steer(message: Any) -> bool:
    return any(_kwargs(message).get(k) for k in STEER_MARKERS)


def message_text(message: BaseMessage) -> str:
    """The text of a message, whether its content is a string or a list of blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    return message.text


def sent_text(message: BaseMessage) -> str:
    """What the provider is sent of a message, as text: its text, then each tool call it makes
    as ``name(arguments)``, the arguments as the OpenAI and Anthropic integrations serialise
    them (``json.dumps``). Why: the cacheable prefix counts a history message's chars
    (``records.cache_prefix``); an assistant turn that only calls a tool has no text, and
    counting it as 0 chars understated every tool round."""
    text = message_text(message)
    calls = getattr(message, "tool_calls", None) or ()
    if not calls:
        return text
    rendered = "".join(
        f"{call.get('name', '')}({json.dumps(call.get('args', {}), ensure_ascii=False)})" for call in calls
    )
    return text + rendered


def strip_context_frames(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """Split ``messages`` into (what the model may see, the context frames taken out)."""
    kept: list[BaseMessage] = []
    stripped: list[BaseMessage] = []
    for m in messages:
        (stripped if is_context_frame(m) else kept).append(m)
    return kept, stripped


def frame_digest(message: BaseMessage) -> tuple[str | None, int, str]:
    """(message id, chars, sha256) of a frame: what a snapshot stores instead of its text."""
    text = message_text(message)
    return message.id, len(text), hashlib.sha256(text.encode("utf-8")).hexdigest()


def newest_operator_input(messages: Iterable[BaseMessage]) -> str:
    """The text of the newest operator input (a folded steer counts), or ``""``."""
    for m in reversed(list(messages)):
        if is_operator_input(m):
            return message_text(m)
    return ""


def turn_position(messages: Sequence[BaseMessage]) -> tuple[int, int, str]:
    """(turn index, call index, query) for a model call about to see ``messages``.

    The turn index counts the operator inputs that open a turn (steers do not), from 0. The
    call index counts the assistant messages since the turn opened, so it is the same number
    on a resumed run as it would have been without the interruption. The query is the
    newest operator input, steers included.
    """
    turns = 0
    calls = 0
    query = ""
    for m in messages:
        if isinstance(m, HumanMessage):
            if is_operator_input(m):
                query = message_text(m)
                if not is_steer(m):
                    turns += 1
                    calls = 0
        elif isinstance(m, AIMessage):
            calls += 1
    return max(turns - 1, 0), calls, query
