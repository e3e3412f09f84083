"""A point-in-time view of the embedded store (``consistent_read``, ``as_of``): the reads of one
composition on one connection, at one time.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any, Protocol

import apsw

from contextplane.memory.history import HistoryEvent, HistoryPosition
from contextplane.memory.model import MemoryChunk
from contextplane.store import history as store_history
from contextplane.store.columns import as_id
from contextplane.store.connection import store_error
from contextplane.store.protocol import SearchHit, SearchTrace
from contextplane.store.view_spec import PointInTimeView, ViewedStore


class SQLiteViewed(ViewedStore, Protocol):
    """What a view of the embedded store reads through: the ``SQLiteKnowledgeStore`` (a protocol
    here, since the store's modules import this one)."""

    path: str

    @property
    def asearch(self) -> Callable[..., Awaitable[list[SearchHit]]]: ...

    @property
    def alist_chunks(self) -> Callable[..., Awaitable[list[MemoryChunk]]]: ...

    @property
    def trace_search(self) -> Callable[..., SearchTrace]: ...


class StoreView(PointInTimeView):
    """One composition's point-in-time view of a ``SQLiteKnowledgeStore`` (``consistent_read``).

    Reads (``get``, ``list_chunks``, ``search``, ``PointInTimeView``'s, and the async ones and
    ``trace_search`` here) see the state committed when the view opened; anything else (writes,
    ``path``) goes to the store itself, whose commits the view does not see until the next
    composition."""

    store: SQLiteViewed

    def __init__(
        self,
        store: SQLiteViewed,
        conn: apsw.Connection,
        lock: threading.Lock | None,
        *,
        now: datetime | None = None,
        position: HistoryPosition | None = None,
        overlay: store_history.AsOfOverlay | None = None,
    ) -> None:
        self.store = store
        self.conn = conn
        self.lock = lock
        #: Set when the composition ends: a late read (an abandoned provider's) is refused, never
        #: run on a connection another composition may hold by then.
        self.closed = False
        #: The time the deliverable filter is evaluated at when a read names none.
        self.now = now
        self._position = position
        #: For an as-of view: what it changed to show the past (None for a present view).
        self.overlay = overlay

    def close(self) -> None:
        """Refuse further reads, waiting for one in flight (another thread's) to finish."""
        if self.lock is None:
            self.closed = True
            return
        with self.lock:
            self.closed = True

    async def asearch(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        return await self.store.asearch(query, k, **self.dated(options), _on=self)

    async def alist_chunks(self, **filters: Any) -> list[MemoryChunk]:
        return await self.store.alist_chunks(**self.dated(filters), _on=self)

    def trace_search(self, query: str, chunk_id: str, k: int = 10, **options: Any) -> SearchTrace:
        return self.store.trace_search(query, chunk_id, k, **self.dated(options), _on=self)

    def _latest_seq(self) -> int:
        with self.lock if self.lock is not None else contextlib.nullcontext():
            return store_history.latest_seq(self.conn)

    def _row_key(self, chunk_id: str) -> int | None:
        return as_id(chunk_id)

    def _events(self, key: int, upto: int) -> list[HistoryEvent]:
        with self.lock if self.lock is not None else contextlib.nullcontext():
            return store_history.events(self.conn, key, upto)

    def __repr__(self) -> str:
        return f"<StoreView of {self.store.path}>"


@contextlib.contextmanager
def _translated(path: str, doing: str) -> Iterator[None]:
    """A SQLite failure inside as a ``StoreError`` naming the file and what to do."""
    try:
        yield
    except apsw.Error as exc:
        raise store_error(path, exc, doing) from None


def _end_read(conn: apsw.Connection) -> None:
    with contextlib.suppress(apsw.Error):
        conn.execute("COMMIT")
