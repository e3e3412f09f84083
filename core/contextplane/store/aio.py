"""The memory store from an event loop: what composition and the memory tools await.

Each helper calls the store's own async method (``AsyncKnowledgeStore``) when it has one, and
otherwise runs the synchronous method in a worker thread, so any ``KnowledgeStore`` works on
the async path without blocking the loop and a store with a native async client is awaited
directly. Callers pass the turn's store as they have it: a composition's point-in-time view
answers for itself, so reads through it stay inside the view.
"""

from __future__ import annotations

import asyncio
from typing import Any

from contextplane.memory.model import MemoryChunk
from contextplane.store.protocol import SearchHit


async def asearch(store: Any, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
    """``store.search(query, k, **options)`` off the loop."""
    native = getattr(store, "asearch", None)
    if native is not None:
        return list(await native(query, k, **options))
    return list(await asyncio.to_thread(store.search, query, k, **options))


async def alist_chunks(store: Any, **filters: Any) -> list[MemoryChunk]:
    """``store.list_chunks(**filters)`` off the loop."""
    native = getattr(store, "alist_chunks", None)
    if native is not None:
        return list(await native(**filters))
    return list(await asyncio.to_thread(store.list_chunks, **filters))


async def aget(store: Any, chunk_id: str) -> MemoryChunk | None:
    """``store.get(chunk_id)`` off the loop."""
    native = getattr(store, "aget", None)
    if native is not None:
        result: MemoryChunk | None = await native(chunk_id)
        return result
    return await asyncio.to_thread(store.get, chunk_id)


def _as_id(value: Any) -> str:
    """The id as a ``str``; a ``str`` subclass (the embedded store's ``WriteOutcome``, which also
    says what consolidation did) is returned as it is, as the synchronous write returns it."""
    return value if isinstance(value, str) else str(value)


async def aadd_chunk(store: Any, content: str, *args: Any, **attrs: Any) -> str:
    """``store.add_chunk(content, ...)`` off the loop; returns the new id."""
    native = getattr(store, "aadd_chunk", None)
    if native is not None:
        return _as_id(await native(content, *args, **attrs))
    return _as_id(await asyncio.to_thread(store.add_chunk, content, *args, **attrs))


async def asupersede(store: Any, old_id: str, content: str, **attrs: Any) -> str:
    """``store.supersede(old_id, content, ...)`` off the loop; returns the successor's id."""
    native = getattr(store, "asupersede", None)
    if native is not None:
        return _as_id(await native(old_id, content, **attrs))
    return _as_id(await asyncio.to_thread(store.supersede, old_id, content, **attrs))


async def aset_review_state(store: Any, chunk_id: str, state: str) -> MemoryChunk:
    """``store.set_review_state(chunk_id, state)`` off the loop (confirm, reject)."""
    native = getattr(store, "aset_review_state", None)
    if native is not None:
        chunk: MemoryChunk = await native(chunk_id, state)
        return chunk
    chunk = await asyncio.to_thread(store.set_review_state, chunk_id, state)
    return chunk
