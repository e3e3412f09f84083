"""The embedded store's async forms (``AsyncKnowledgeStore``): its synchronous reads and writes
one hop away in a worker thread, a remote embedder's ``aembed`` awaited on the loop.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import apsw

from contextplane.memory.model import MemoryChunk
from contextplane.store.protocol import SearchHit
from contextplane.store.search import StoreReads
from contextplane.store.view import StoreView

T = TypeVar("T")


class StoreAsync(StoreReads):
    """The async seam of ``SQLiteKnowledgeStore`` (over its reader pool, ``_take_reader``)."""

    path: str

    def _take_reader(self) -> apsw.Connection:
        raise NotImplementedError

    def _give_back(self, reader: apsw.Connection, healthy: bool) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ async (AsyncKnowledgeStore)
    # Why worker threads and not an async SQLite driver: apsw releases the GIL while SQLite
    # works, a local query takes about a millisecond, and the store's own connections (a pooled
    # reader per read, the view's, the writer) already make it thread-safe; an async driver
    # would itself be a thread per connection. So each call is one hop to the loop's default
    # executor, and reads outside a view take a pooled reader, so concurrent turns do not
    # queue on the writer's lock. bench/async_bench.py measures what the hop costs.

    @property
    def threaded_async(self) -> bool:
        """True when this store's async reads are only its synchronous ones in a worker thread
        (no embedder with its own ``aembed``): ``aprojection.acompose`` then composes the whole
        turn in one worker thread, which is cheaper than a hop per read."""
        embedder = self._embedder
        return embedder is None or not hasattr(embedder, "aembed")

    def _off_loop(self, read: Callable[[StoreView | None], T], view: StoreView | None) -> T:
        """Run ``read`` in the calling worker thread: on ``view``, else on a pooled reader (the
        main connection for ``:memory:``, which has no second connection)."""
        if view is not None or self.path == ":memory:":
            return read(view)
        reader = self._take_reader()
        healthy = False
        try:
            result = read(StoreView(self, reader, threading.Lock()))
            healthy = True
            return result
        finally:
            self._give_back(reader, healthy)

    async def asearch(
        self, query: str, k: int = 10, *, _on: StoreView | None = None, **options: Any
    ) -> list[SearchHit]:
        """``search`` without blocking the event loop. An embedder with its own ``aembed`` (a
        remote service) embeds the query on the loop; any other embeds it in the worker thread
        that runs the SQL."""
        vector = None
        embedder = self._embedder
        wanted = not options.get("full_text") and isinstance(query, str) and bool(query.strip())
        if embedder is not None and hasattr(embedder, "aembed") and wanted:
            vector = self._packed([query], await self._aembed(embedder, [query]), embedder.dimensions)[0]

        def read(view: StoreView | None) -> list[SearchHit]:
            return self.search(query, k, **options, _on=view, _vector=vector)

        return await asyncio.to_thread(self._off_loop, read, _on)

    async def alist_chunks(self, *, _on: StoreView | None = None, **filters: Any) -> list[MemoryChunk]:
        """``list_chunks`` in a worker thread."""

        def read(view: StoreView | None) -> list[MemoryChunk]:
            return self.list_chunks(**filters, _on=view)

        return await asyncio.to_thread(self._off_loop, read, _on)

    async def aadd_chunk(self, content: str, *args: Any, **attrs: Any) -> str:
        """``add_chunk`` without blocking the loop: an embedder with its own ``aembed`` (a remote
        service) embeds the row on the loop and only the SQL runs in a worker thread (where
        writes wait for the write lock); any other write runs whole in a worker thread."""
        embedder = self._embedder
        if embedder is None or not hasattr(embedder, "aembed"):
            return await asyncio.to_thread(self.add_chunk, content, *args, **attrs)
        bound = inspect.signature(self.add_chunk).bind(content, *args, **attrs)
        bound.apply_defaults()
        now_text, prepared = self._prepared([bound.arguments])  # validated before embedding
        text = prepared[0][0]
        embedded = await self._aembed(embedder, [text], writing=True)
        vectors = self._packed([text], embedded, embedder.dimensions)
        outcomes = await asyncio.to_thread(self._write_prepared, prepared, vectors, now_text, single=True)
        return outcomes[0]

    async def asupersede(self, old_id: str, content: str, **attrs: Any) -> str:
        """``supersede`` without blocking the loop: as ``aadd_chunk``, an embedder with its own
        ``aembed`` embeds the newer row on the loop, between reading the old row and the write
        (each in a worker thread); any other supersession runs whole in a worker thread."""
        embedder = self._embedder
        if embedder is None or not hasattr(embedder, "aembed"):
            return await asyncio.to_thread(self.supersede, old_id, content, **attrs)
        old, prepared, actor = await asyncio.to_thread(self._superseding, old_id, content, attrs)
        text = prepared[0][0]
        embedded = await self._aembed(embedder, [text], writing=True)
        vectors = self._packed([text], embedded, embedder.dimensions)
        return await asyncio.to_thread(self._write_superseding, old, prepared, vectors, actor)

    async def aset_review_state(self, chunk_id: str, state: str) -> MemoryChunk:
        """``set_review_state`` in a worker thread."""
        return await asyncio.to_thread(self.set_review_state, chunk_id, state)
