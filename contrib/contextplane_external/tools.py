"""The memory tools an external runtime attaches: plain callables over the caller-facing API.

``memory_recall`` and ``memory_ingest`` wrap ``contextplane.store.api`` and return JSON-ready
values, so they can be handed to any tool-calling framework as they are, or served over MCP
(``mcp_server``). Incognito refuses every write before the store is touched (ADR D6). The
``a``-prefixed forms and ``bind_async_memory_tools`` are the same tools for an event loop: the
store is reached through ``contextplane.store.aio``, so a call never blocks the loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from contextplane.errors import IncognitoWriteError
from contextplane.memory.consolidation import WriteOutcome
from contextplane.store.api import amemory_ingest as _store_aingest
from contextplane.store.api import amemory_recall as _store_arecall
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


async def amemory_recall(
    store: KnowledgeStore,
    query: str,
    k: int = 5,
    *,
    include_superseded: bool = False,
    namespaces: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """``memory_recall`` without blocking an event loop."""
    hits = await _store_arecall(store, query, k, include_superseded=include_superseded, namespaces=namespaces)
    return [hit_to_dict(h) for h in hits]


async def amemory_ingest(
    store: KnowledgeStore,
    content: str,
    *,
    incognito: bool = False,
    expires_in_days: int | None = None,
    **attrs: Any,
) -> dict[str, Any]:
    """``memory_ingest`` without blocking an event loop (the same outcome report)."""
    chunk_id = await _store_aingest(
        store, content, incognito=incognito, expires_in_days=expires_in_days, **attrs
    )
    return outcome_to_dict(chunk_id)


_INCOGNITO_SESSION = "memory_ingest: this session is incognito, so nothing may be written to the memory store"


def _event_time(occurred_at: str | None) -> dict[str, Any]:
    """The ``occurred_at`` keyword only when the tool call gave one: a store written before
    event times (a plugin's) still takes every call that does not use it."""
    return {} if occurred_at is None else {"occurred_at": occurred_at}


def bind_memory_tools(
    store: KnowledgeStore,
    *,
    incognito: bool = False,
    namespaces: Sequence[str] | None = None,
    source_type: str = "external",
) -> tuple[Callable[..., list[dict[str, Any]]], Callable[..., dict[str, Any]]]:
    """``(memory_recall, memory_ingest)`` bound to one store and one session's rules, ready
    to register as tools (each has a docstring and simple typed parameters)."""

    def recall(query: str, k: int = 5, include_superseded: bool = False) -> list[dict[str, Any]]:
        """Search long-term memory (at most 50 results). Set include_superseded to see replaced
        (older) memories."""
        return memory_recall(
            store, query, _capped(k), include_superseded=include_superseded, namespaces=namespaces
        )

    def ingest(
        content: str, expires_in_days: int | None = None, subject: str = "", occurred_at: str | None = None
    ) -> dict[str, Any]:
        """Save one memory. Set expires_in_days for something that stops being true; set subject
        (a short topic key) so a newer memory on the same topic replaces the older one; set
        occurred_at (ISO-8601 with offset, e.g. 2023-05-08T13:56:00Z) to when it happened."""
        if incognito:
            raise IncognitoWriteError(_INCOGNITO_SESSION)
        return memory_ingest(
            store,
            content,
            expires_in_days=expires_in_days,
            source_type=source_type,
            subject=subject,
            **_event_time(occurred_at),
        )

    recall.__name__ = "memory_recall"
    ingest.__name__ = "memory_ingest"
    return recall, ingest


def bind_async_memory_tools(
    store: KnowledgeStore,
    *,
    incognito: bool = False,
    namespaces: Sequence[str] | None = None,
    source_type: str = "external",
) -> tuple[Callable[..., Awaitable[list[dict[str, Any]]]], Callable[..., Awaitable[dict[str, Any]]]]:
    """``bind_memory_tools`` as coroutine functions, for async tool runners (the MCP server)."""

    async def recall(query: str, k: int = 5, include_superseded: bool = False) -> list[dict[str, Any]]:
        """Search long-term memory (at most 50 results). Set include_superseded to see replaced
        (older) memories."""
        return await amemory_recall(
            store, query, _capped(k), include_superseded=include_superseded, namespaces=namespaces
        )

    async def ingest(
        content: str, expires_in_days: int | None = None, subject: str = "", occurred_at: str | None = None
    ) -> dict[str, Any]:
        """Save one memory. Set expires_in_days for something that stops being true; set subject
        (a short topic key) so a newer memory on the same topic replaces the older one; set
        occurred_at (ISO-8601 with offset, e.g. 2023-05-08T13:56:00Z) to when it happened."""
        if incognito:
            raise IncognitoWriteError(_INCOGNITO_SESSION)
        return await amemory_ingest(
            store,
            content,
            expires_in_days=expires_in_days,
            source_type=source_type,
            subject=subject,
            **_event_time(occurred_at),
        )

    recall.__name__ = "memory_recall"
    ingest.__name__ = "memory_ingest"
    return recall, ingest
