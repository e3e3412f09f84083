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
from contextplane.memory.model import MemoryChunk, utc_now
from contextplane.store import history as store_history
from contextplane.store.columns import as_id
from contextplane.store.connection import store_error
from contextplane.store.protocol import SearchHit, SearchTrace


class ViewedStore(Protocol):
    """What a view reads through: the ``SQLiteKnowledgeStore`` (a protocol here, since the
    store's modules import this one); each read takes the view as ``_on``."""

    path: str

    @property
    def get(self) -> Callable[..., MemoryChunk | None]: ...

    @property
    def list_chunks(self) -> Callable[..., list[MemoryChunk]]: ...

    @property
    def search(self) -> Callable[..., list[SearchHit]]: ...

    @property
    def asearch(self) -> Callable[..., Awaitable[list[SearchHit]]]: ...

    @property
    def alist_chunks(self) -> Callable[..., Awaitable[list[MemoryChunk]]]: ...

    @property
    def trace_search(self) -> Callable[..., SearchTrace]: ...


class StoreView:
    """One composition's point-in-time view of a ``SQLiteKnowledgeStore`` (``consistent_read``).

    Reads (``get``, ``list_chunks``, ``search``) see the state committed when the view opened;
    anything else (writes, ``path``) goes to the store itself, whose commits the view does not
    see until the next composition."""

    def __init__(
        self,
        store: ViewedStore,
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

    def get(self, chunk_id: str) -> MemoryChunk | None:
        return self.store.get(chunk_id, _on=self)

    def list_chunks(self, **filters: Any) -> list[MemoryChunk]:
        if filters.get("now") is None and self.now is not None:
            filters["now"] = self.now
        return self.store.list_chunks(**filters, _on=self)

    def search(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        if options.get("now") is None and self.now is not None:
            options["now"] = self.now
        return self.store.search(query, k, **options, _on=self)

    async def asearch(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        if options.get("now") is None and self.now is not None:
            options["now"] = self.now
        return await self.store.asearch(query, k, **options, _on=self)

    async def alist_chunks(self, **filters: Any) -> list[MemoryChunk]:
        if filters.get("now") is None and self.now is not None:
            filters["now"] = self.now
        return await self.store.alist_chunks(**filters, _on=self)

    def trace_search(self, query: str, chunk_id: str, k: int = 10, **options: Any) -> SearchTrace:
        if options.get("now") is None and self.now is not None:
            options["now"] = self.now
        return self.store.trace_search(query, chunk_id, k, **options, _on=self)

    def history_position(self) -> HistoryPosition:
        """The position this view reads at: for a present view, its newest visible event at
        the time it opened (what a composition records to be replayed)."""
        if self._position is None:
            with self.lock if self.lock is not None else contextlib.nullcontext():
                seq = store_history.latest_seq(self.conn)
            self._position = HistoryPosition(seq, self.now or utc_now())
        return self._position

    def history(self, chunk_id: str) -> list[HistoryEvent]:
        """The row's events up to this view's position."""
        key = as_id(chunk_id)
        if key is None:
            return []
        upto = self.history_position().seq
        with self.lock if self.lock is not None else contextlib.nullcontext():
            return store_history.events(self.conn, key, upto)

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[StoreView]:
        yield self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

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
