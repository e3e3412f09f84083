"""The point-in-time view every SQL memory store hands a composition (``consistent_read``) or an
as-of read (``as_of``): reads forwarded to the store with the view as ``_on`` and the view's time
as the deliverable filter's ``now``, its history up to its position, anything else the store's.

Why shared: the embedded and PostgreSQL stores wrote the same view twice, and a read added to one
view and not the other silently left the snapshot (it fell through to the store). A store's view
subclasses ``PointInTimeView`` and says how it reads the latest position, a row's key and a row's
events on its connection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, Protocol, Self

from contextplane.memory.history import HistoryEvent, HistoryPosition
from contextplane.memory.model import MemoryChunk, utc_now
from contextplane.store.protocol import SearchHit


class ViewedStore(Protocol):
    """What a view reads through: each read takes the view as ``_on``."""

    @property
    def get(self) -> Callable[..., MemoryChunk | None]: ...

    @property
    def list_chunks(self) -> Callable[..., list[MemoryChunk]]: ...

    @property
    def search(self) -> Callable[..., list[SearchHit]]: ...

    @property
    def following(self) -> Callable[..., dict[str, MemoryChunk]]: ...


class PointInTimeView:
    """Reads see the state of the view's snapshot (or past position), with the deliverable filter
    evaluated at the view's time; writes and anything else go to the store itself."""

    store: ViewedStore
    #: The time the deliverable filter is evaluated at when a read names none.
    now: datetime | None
    _position: HistoryPosition | None

    def dated(self, options: dict[str, Any]) -> dict[str, Any]:
        """A read's keywords with the view's time as ``now`` when the read names none."""
        if options.get("now") is None and self.now is not None:
            options["now"] = self.now
        return options

    def get(self, chunk_id: str) -> MemoryChunk | None:
        return self.store.get(chunk_id, _on=self)

    def list_chunks(self, **filters: Any) -> list[MemoryChunk]:
        return self.store.list_chunks(**self.dated(filters), _on=self)

    def search(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        return self.store.search(query, k, **self.dated(options), _on=self)

    def following(self, chunk_ids: Sequence[str], **options: Any) -> dict[str, MemoryChunk]:
        return self.store.following(chunk_ids, **self.dated(options), _on=self)

    def history_position(self) -> HistoryPosition:
        """The position this view reads at: for a present view, its newest visible event at
        the time it opened (what a composition records to be replayed)."""
        if self._position is None:
            self._position = HistoryPosition(self._latest_seq(), self.now or utc_now())
        return self._position

    def history(self, chunk_id: str) -> list[HistoryEvent]:
        """The row's events up to this view's position."""
        key = self._row_key(chunk_id)
        if key is None:
            return []
        return self._events(key, self.history_position().seq)

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[Self]:
        yield self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def _latest_seq(self) -> int:
        """The newest event the view's connection sees."""
        raise NotImplementedError

    def _row_key(self, chunk_id: str) -> int | None:
        """The store's key of ``chunk_id``, or None when it names no row."""
        raise NotImplementedError

    def _events(self, key: int, upto: int) -> list[HistoryEvent]:
        """A row's events up to position ``upto``, read on the view's connection."""
        raise NotImplementedError
