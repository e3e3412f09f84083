"""The memory store from an event loop: what composition and the memory tools await.

Each helper calls the store's own async method (``AsyncKnowledgeStore``) when it has one, and
otherwise runs the synchronous method in a worker thread, so any ``KnowledgeStore`` works on
the async path without blocking the loop and a store with a native async client is awaited
directly. Callers pass the turn's store as they have it: a composition's point-in-time view
answers for itself, so reads through it stay inside the view. Each is a typed name over the
one adapter, ``contextplane.records.aio.acall`` (a part's ``a<method>``, else its method in a
worker thread), which the record parts use too.
"""

from __future__ import annotations

from typing import Any

from contextplane.memory.model import MemoryChunk
from contextplane.records.aio import acall
from contextplane.store.protocol import SearchHit


async def asearch(store: Any, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
    """``store.search(query, k, **options)`` off the loop."""
    return list(await acall(store, "search", query, k, **options))


async def alist_chunks(store: Any, **filters: Any) -> list[MemoryChunk]:
    """``store.list_chunks(**filters)`` off the loop."""
    return list(await acall(store, "list_chunks", **filters))


async def aget(store: Any, chunk_id: str) -> MemoryChunk | None:
    """``store.get(chunk_id)`` off the loop."""
    found: MemoryChunk | None = await acall(store, "get", chunk_id)
    return found


async def afollowing(store: Any, chunk_ids: list[str], **options: Any) -> dict[str, MemoryChunk]:
    """``store.following(chunk_ids, **options)`` off the loop (``FollowingReads``)."""
    return dict(await acall(store, "following", chunk_ids, **options))


def _as_id(value: Any) -> str:
    """The id as a ``str``; a ``str`` subclass (the embedded store's ``WriteOutcome``, which also
    says what consolidation did) is returned as it is, as the synchronous write returns it."""
    return value if isinstance(value, str) else str(value)


async def aadd_chunk(store: Any, content: str, *args: Any, **attrs: Any) -> str:
    """``store.add_chunk(content, ...)`` off the loop; returns the new id."""
    return _as_id(await acall(store, "add_chunk", content, *args, **attrs))


async def asupersede(store: Any, old_id: str, content: str, **attrs: Any) -> str:
    """``store.supersede(old_id, content, ...)`` off the loop; returns the successor's id."""
    return _as_id(await acall(store, "supersede", old_id, content, **attrs))


async def aset_review_state(store: Any, chunk_id: str, state: str) -> MemoryChunk:
    """``store.set_review_state(chunk_id, state)`` off the loop (confirm, reject)."""
    chunk: MemoryChunk = await acall(store, "set_review_state", chunk_id, state)
    return chunk
