"""The memory tools an external runtime attaches: plain callables over the caller-facing API.

``memory_recall`` and ``memory_ingest`` wrap ``contextplane.store.api`` and return JSON-ready
values, so they can be handed to any tool-calling framework as they are, or served over MCP
(``mcp_server``). Incognito refuses every write before the store is touched (ADR D6). The
``a``-prefixed forms and ``bind_async_memory_tools`` are the same tools for an event loop: the
store is reached through ``contextplane.store.aio``, so a call never blocks the loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from typing import Any

import attrs

from contextplane.config import Config
from contextplane.errors import IncognitoWriteError, ValidationError
from contextplane.memory.consolidation import WriteOutcome
from contextplane.memory.model import MemoryChunk, validate_namespace
from contextplane.signatures import awaiting, parameters_of, signature_of
from contextplane.store.aio import aget
from contextplane.store.api import amemory_ingest as _store_aingest
from contextplane.store.api import amemory_recall as _store_arecall
from contextplane.store.api import check_write_size
from contextplane.store.api import memory_ingest as _store_ingest
from contextplane.store.api import memory_recall as _store_recall
from contextplane.store.protocol import KnowledgeStore, SearchHit


def hit_to_dict(hit: SearchHit) -> dict[str, Any]:
    """A search hit as plain data: what a tool returns to the model."""
    c = hit.chunk
    out: dict[str, Any] = {
        "id": c.id,
        "content": c.content,
        "rank": hit.rank,
        "score": hit.score,
        "memory_kind": c.memory_kind,
        "namespace": c.namespace,
        "trust_tier": int(c.trust_tier),
        "review_state": c.review_state,
        "superseded_by": c.superseded_by,
        "expires_at": c.expires_at.isoformat() if c.expires_at else None,
    }
    if c.occurred_at is not None:  # only when set: a row without one reads as it always did
        out["occurred_at"] = c.occurred_at.isoformat()
    return out


def memory_recall(
    store: KnowledgeStore,
    query: str,
    k: int = 5,
    *,
    include_superseded: bool = False,
    namespaces: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Deliverable memories relevant to ``query``, best first; superseded rows (the audit
    trail) only with ``include_superseded=True``."""
    hits = _store_recall(store, query, k, include_superseded=include_superseded, namespaces=namespaces)
    return [hit_to_dict(h) for h in hits]


def outcome_to_dict(chunk_id: str) -> dict[str, Any]:
    """What the write did, as plain data: the id, and the consolidation outcome (stored,
    duplicate, superseded, near_duplicate) with its sentence, when the store reports one."""
    if isinstance(chunk_id, WriteOutcome):
        return chunk_id.to_dict()
    return {"id": str(chunk_id), "outcome": "stored", "message": f"stored as {chunk_id}"}


def memory_ingest(
    store: KnowledgeStore,
    content: str,
    *,
    incognito: bool = False,
    expires_in_days: int | None = None,
    **attrs: Any,
) -> dict[str, Any]:
    """Write one memory; ``expires_in_days`` sets its expiry. Returns the id and what
    consolidation did (``outcome``: stored, duplicate, superseded or near_duplicate, with
    ``message``). Raises ``IncognitoWriteError`` in incognito before touching the store."""
    chunk_id = _store_ingest(store, content, incognito=incognito, expires_in_days=expires_in_days, **attrs)
    return outcome_to_dict(chunk_id)


#: The most results one ``memory_recall`` returns: a model asking for k=100000 would otherwise
#: get the whole store back in one tool result.
MAX_RECALL_K = 50


def _capped(k: Any) -> Any:
    """``k`` bounded by ``MAX_RECALL_K``; anything not a whole number goes on as it is, for the
    store to refuse with its own error."""
    return min(k, MAX_RECALL_K) if isinstance(k, int) and not isinstance(k, bool) else k


@awaiting(memory_recall)
async def amemory_recall(*args: Any, **kwargs: Any) -> Any:
    """``memory_recall`` without blocking an event loop."""
    return [hit_to_dict(h) for h in await _store_arecall(*args, **kwargs)]


@awaiting(memory_ingest)
async def amemory_ingest(*args: Any, **kwargs: Any) -> Any:
    """``memory_ingest`` without blocking an event loop (the same outcome report)."""
    return outcome_to_dict(await _store_aingest(*args, **kwargs))


@attrs.frozen
class ToolLimits:
    """How much the memory tools hand back and take in (0 = no bound): one 14 MB memory or a
    ``k`` of 200 must not flood a model's context, and a runaway write must not become a row
    every later recall returns. From the configuration: ``tools.max_row_chars``,
    ``tools.max_result_chars``, ``store.max_write_chars``."""

    max_row_chars: int = attrs.field(default=4_000, validator=attrs.validators.ge(0))
    max_result_chars: int = attrs.field(default=40_000, validator=attrs.validators.ge(0))
    max_write_chars: int = attrs.field(default=100_000, validator=attrs.validators.ge(0))

    @classmethod
    def from_config(cls, config: Config) -> ToolLimits:
        return cls(config.tools.max_row_chars, config.tools.max_result_chars, config.store.max_write_chars)


#: The line that ends a cut row's content: how much is left and how to read it.
CUT_MARKER = "[… cut: {n:,} more chars; memory_get with id={id!r} and offset={offset} reads on]"


def _window(content: str, chunk_id: str, offset: int, room: int) -> tuple[str, int | None]:
    """``content[offset:]`` cut to ``room`` chars (0: whole) with the marker, and the offset to
    read on from (None when nothing is left)."""
    rest = content[offset:]
    if not room or len(rest) <= room:
        return rest, None
    end = offset + room
    return rest[:room] + "\n" + CUT_MARKER.format(n=len(content) - end, id=chunk_id, offset=end), end


def bound_results(rows: list[dict[str, Any]], limits: ToolLimits) -> dict[str, Any]:
    """``{"results": rows}`` within the limits: each row's content cut to ``max_row_chars``
    (with ``content_chars`` and ``next_offset`` for ``memory_get``), and rows past
    ``max_result_chars`` of content in all left out, counted in ``omitted`` with a note. The
    first row is always returned (cut to what the total allows)."""
    out: list[dict[str, Any]] = []
    used = 0
    for row in rows:
        content = row["content"]
        room = limits.max_row_chars
        if limits.max_result_chars:
            left = limits.max_result_chars - used
            if out and left < min(len(content), room or len(content)):
                break
            room = min(room, left) if room else left
        text, next_offset = _window(content, row["id"], 0, room)
        if next_offset is not None:
            row = {**row, "content": text, "content_chars": len(content), "next_offset": next_offset}
        used += len(text)
        out.append(row)
    result: dict[str, Any] = {"results": out}
    if len(out) < len(rows):
        result["omitted"] = len(rows) - len(out)
        result["note"] = (
            f"{len(rows) - len(out)} more results left out: the result holds at most "
            f"{limits.max_result_chars:,} chars of content (tools.max_result_chars); ask for fewer "
            "(a smaller k) or a narrower query"
        )
    return result


def _scope(namespace: str, allowed: Sequence[str] | None) -> str:
    """The scope a tool write goes to: a valid one, and one the server may read back."""
    scope = validate_namespace(namespace)
    if allowed is not None and scope and scope not in allowed:
        raise ValidationError(
            f"namespace: {scope!r} is not a scope this server serves; use '' (global) or one of "
            + ", ".join(map(repr, allowed))
        )
    return scope


def check_scopes(namespaces: Sequence[str] | None) -> list[str] | None:
    """The scopes a server is confined to, each checked (a typo would make every recall come
    back empty without a word)."""
    if namespaces is None:
        return None
    return [validate_namespace(n, "--namespace") for n in namespaces]


_INCOGNITO_SESSION = "memory_ingest: this session is incognito, so nothing may be written to the memory store"


def _event_time(occurred_at: str | None) -> dict[str, Any]:
    """The ``occurred_at`` keyword only when the tool call gave one: a store written before
    event times (a plugin's) still takes every call that does not use it."""
    return {} if occurred_at is None else {"occurred_at": occurred_at}


def _visible(chunk: MemoryChunk | None, namespaces: Sequence[str] | None) -> bool:
    """A row ``memory_recall`` could have returned: in the server's scopes, not rejected or
    expired (a superseded row is the audit trail recall shows on request)."""
    if chunk is None or (namespaces is not None and chunk.namespace not in namespaces):
        return False
    return chunk.is_deliverable() or (
        chunk.superseded_by is not None and chunk.review_state != "rejected" and not chunk.is_expired()
    )


def _got(
    chunk_id: str,
    chunk: MemoryChunk | None,
    offset: int,
    namespaces: Sequence[str] | None,
    limits: ToolLimits,
) -> dict[str, Any]:
    """``memory_get``'s answer: a window of the content from ``offset``, as long as a recall's
    row may be (the smaller bound), with the offset to read on from (None at the end)."""
    if chunk is None or not _visible(chunk, namespaces):
        raise ValidationError(f"id: no memory {chunk_id!r} this server can read")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValidationError(f"offset: expected a whole number >= 0, got {offset!r}")
    content = chunk.content
    room = min((b for b in (limits.max_row_chars, limits.max_result_chars) if b), default=0)
    text, next_offset = _window(content, chunk.id, min(offset, len(content)), room)
    return {
        "id": chunk.id,
        "content": text,
        "offset": offset,
        "content_chars": len(content),
        "next_offset": next_offset,
        "superseded_by": chunk.superseded_by,
    }


@attrs.frozen
class _Use:
    """The one store call a tool makes, in both forms: the blocking one and the event loop's."""

    blocking: Callable[..., Any]
    loop: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


#: A tool written once: yields the store calls it needs, is sent what each returned, and
#: returns the tool's answer. ``_blocking`` and ``_awaited`` drive it.
_ToolPlan = Generator[_Use, Any, dict[str, Any]]


def _tool_plans(
    store: KnowledgeStore,
    *,
    incognito: bool = False,
    namespaces: Sequence[str] | None = None,
    source_type: str = "external",
    limits: ToolLimits | None = None,
) -> tuple[Callable[..., _ToolPlan], Callable[..., _ToolPlan]]:
    """``memory_recall`` and ``memory_ingest`` bound to one store and one session's rules, as
    plans: the tools' one body, their parameters and their descriptions, for both drivers (and
    the parameters of ``bind_memory_tools`` and ``bind_async_memory_tools``)."""
    bounds = limits or ToolLimits()
    scopes = check_scopes(namespaces)

    def recall(query: str, k: int = 5, include_superseded: bool = False) -> _ToolPlan:
        """Search long-term memory (at most 50 results; a long memory is cut, with the id and
        offset that memory_get reads on from). Set include_superseded to see replaced (older)
        memories."""
        options = {"include_superseded": include_superseded, "namespaces": scopes}
        rows = yield _Use(memory_recall, amemory_recall, (store, query, _capped(k)), options)
        return bound_results(rows, bounds)

    def ingest(
        content: str,
        expires_in_days: int | None = None,
        subject: str = "",
        namespace: str = "",
        occurred_at: str | None = None,
    ) -> _ToolPlan:
        """Save one memory. Set expires_in_days for something that stops being true; set subject
        (a short topic key) so a newer memory on the same topic replaces the older one; set
        namespace to a scope ('project:<id>' or 'session:<id>'; default global); set occurred_at
        (ISO-8601 with offset, e.g. 2023-05-08T13:56:00Z) to when it happened."""
        if incognito:
            raise IncognitoWriteError(_INCOGNITO_SESSION)
        check_write_size(content, bounds.max_write_chars)
        options = {
            "expires_in_days": expires_in_days,
            "source_type": source_type,
            "subject": subject,
            "namespace": _scope(namespace, scopes),
            **_event_time(occurred_at),
        }
        outcome: dict[str, Any] = yield _Use(memory_ingest, amemory_ingest, (store, content), options)
        return outcome

    return recall, ingest


def _tool(face: Callable[..., Any], plan: Callable[..., _ToolPlan]) -> None:
    """Give a driver's ``face`` the tool's name, description and parameters (tool runners and
    MCP build a tool's schema from them), returning what the plan returns."""
    face.__name__ = face.__qualname__ = f"memory_{plan.__name__}"
    face.__doc__ = plan.__doc__
    signature = signature_of(plan).replace(return_annotation=dict[str, Any])
    face.__signature__ = signature  # type: ignore[attr-defined]
    face.__annotations__ = {n: p.annotation for n, p in signature.parameters.items()}
    face.__annotations__["return"] = dict[str, Any]


def _blocking(plan: Callable[..., _ToolPlan]) -> Callable[..., dict[str, Any]]:
    """The tool as a plain callable: each store call made with its blocking form."""

    def tool(*args: Any, **kwargs: Any) -> dict[str, Any]:
        steps = plan(*args, **kwargs)
        try:
            use = next(steps)
            while True:
                use = steps.send(use.blocking(*use.args, **use.kwargs))
        except StopIteration as done:
            answer: dict[str, Any] = done.value
            return answer

    _tool(tool, plan)
    return tool


def _awaited(plan: Callable[..., _ToolPlan]) -> Callable[..., Awaitable[dict[str, Any]]]:
    """The tool as a coroutine function: each store call awaited in its event-loop form."""

    async def tool(*args: Any, **kwargs: Any) -> dict[str, Any]:
        steps = plan(*args, **kwargs)
        try:
            use = next(steps)
            while True:
                use = steps.send(await use.loop(*use.args, **use.kwargs))
        except StopIteration as done:
            answer: dict[str, Any] = done.value
            return answer

    _tool(tool, plan)
    return tool


@parameters_of(_tool_plans)
def bind_memory_tools(
    *args: Any, **kwargs: Any
) -> tuple[Callable[..., dict[str, Any]], Callable[..., dict[str, Any]]]:
    """``(memory_recall, memory_ingest)`` bound to one store and one session's rules, ready
    to register as tools (each has a docstring and simple typed parameters). What they return
    and accept is bounded by ``limits`` (``ToolLimits``; its defaults when None)."""
    recall, ingest = _tool_plans(*args, **kwargs)
    return _blocking(recall), _blocking(ingest)


@parameters_of(_tool_plans)
def bind_async_memory_tools(
    *args: Any, **kwargs: Any
) -> tuple[Callable[..., Awaitable[dict[str, Any]]], Callable[..., Awaitable[dict[str, Any]]]]:
    """``bind_memory_tools`` as coroutine functions, for async tool runners (the MCP server)."""
    recall, ingest = _tool_plans(*args, **kwargs)
    return _awaited(recall), _awaited(ingest)


def bind_async_memory_get(
    store: KnowledgeStore, *, namespaces: Sequence[str] | None = None, limits: ToolLimits | None = None
) -> Callable[..., Awaitable[dict[str, Any]]]:
    """``memory_get``: read on in a memory a recall cut, from an offset, bounded like a recall;
    only rows a recall in these scopes could return (not rejected, not expired)."""
    bounds = limits or ToolLimits()
    scopes = check_scopes(namespaces)

    async def get(id: str, offset: int = 0) -> dict[str, Any]:
        """Read one memory by id from offset on (a recall cuts a long memory and says where to
        read on); the answer is bounded too and says the next offset, or null at the end."""
        return _got(id, await aget(store, id), offset, scopes, bounds)

    get.__name__ = "memory_get"
    return get
