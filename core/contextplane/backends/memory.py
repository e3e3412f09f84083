"""The in-memory reference backend: every record protocol in dicts and lists, for tests and for
plugin authors who want a backend that is not SQLite (an implementation of the contract, so it
lives beside the embedded one; ``contextplane.testing.memory`` re-exports it for the kit).

``InMemoryKnowledgeStore`` is a correct, deliberately small second implementation of the
memory protocol and its lifecycle history (the store kit passes on it, which shows the kit
tests the contract, not SQLite); ``InMemoryBackend`` adds the session summaries, the
injection log, the snapshots and the turn inputs. Search is the IDF share of the query's
meaningful words a row holds (the embedded store's relevance without BM25's term frequency):
enough to tell relevant from not, not a ranking anyone should ship. Writes are consolidated as
the embedded store consolidates them (``contextplane.memory.consolidation``: exact duplicates,
same-subject supersession, near duplicates on single writes), with the same outcomes and
history events.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from contextplane.backends.memory_records import InMemoryInjectionLog as InMemoryInjectionLog
from contextplane.backends.memory_records import InMemorySessionSummaries as InMemorySessionSummaries
from contextplane.backends.memory_records import InMemorySnapshotStore as InMemorySnapshotStore
from contextplane.backends.memory_writes import MemoryWrites
from contextplane.backends.spec import (
    ChunkReads,
    ListQuery,
    Scopes,
    SearchOptions,
    SearchTracing,
)
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.history import HistoryEvent, HistoryPosition, apply_event
from contextplane.memory.model import (
    MemoryChunk,
    parse_timestamp,
    to_utc,
    utc_now,
    validate_delivery_policy,
    validate_memory_kind,
    validate_review_state,
    validate_text,
)
from contextplane.records.backend import register_backend
from contextplane.store.protocol import LegRank, SearchHit, SearchTrace
from contextplane.store.query_terms import fts5_idf, meaningful_words

_WORD = re.compile(r"\w+")


def _window(
    occurred_after: datetime | str | None, occurred_before: datetime | str | None
) -> Callable[[MemoryChunk], bool]:
    """The event-time filter: ``[occurred_after, occurred_before)``; no event time, no window."""
    after = None if occurred_after is None else parse_timestamp(occurred_after, "occurred_after")
    before = None if occurred_before is None else parse_timestamp(occurred_before, "occurred_before")
    if after is None and before is None:
        return lambda _c: True

    def inside(c: MemoryChunk) -> bool:
        at = c.occurred_at
        return at is not None and (after is None or at >= after) and (before is None or at < before)

    return inside


def _scored(query: str, rows: Sequence[MemoryChunk]) -> list[tuple[float, MemoryChunk]]:
    """(relevance, row) for the rows holding a meaningful word of ``query``, best first.

    Relevance has the embedded store's meaning (``contextplane.store.query_terms``): the IDF
    share of the query's meaningful words (function words never count) that the row holds,
    with the IDF counted over every row (as a full-text index counts). A word ending in ``*``
    matches by prefix. No term-frequency factor and no "too common" cut: small on purpose."""
    terms = [t.strip('"*') + ("*" if t.endswith("*") else "") for t in meaningful_words(query)]
    if not terms or not rows:
        return []
    bags = [(c, {w.lower() for w in _WORD.findall(c.content + " " + c.heading)}) for c in rows]

    def holds(bag: set[str], term: str) -> bool:
        return any(w.startswith(term[:-1]) for w in bag) if term.endswith("*") else term in bag

    frequency = {t: sum(holds(bag, t) for _, bag in bags) for t in terms}
    weight = {t: fts5_idf(len(rows), n) for t, n in frequency.items() if n}
    ideal = sum(weight.values())
    scored = []
    for c, bag in bags:
        matched = [t for t in weight if holds(bag, t)]
        if matched:
            scored.append((min(1.0, sum(weight[t] for t in matched) / ideal), len(matched), c))
    scored.sort(key=lambda item: (-item[0], -item[1], int(item[2].id)))
    return [(relevance, c) for relevance, _, c in scored]


class InMemoryKnowledgeStore(MemoryWrites, ChunkReads, SearchTracing):
    """A dict of ``MemoryChunk`` values under one lock; search is word overlap. Its writes are
    ``MemoryWrites`` (``memory_writes``); here are the views and the reads."""

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[InMemoryKnowledgeStore]:
        """A view over a copy of the rows taken now: later commits are invisible to it, and
        its deliverable filter is evaluated at the time it opened."""
        with self._lock:
            rows = dict(self._rows)
            position = HistoryPosition(len(self._events), utc_now())
        yield _FrozenView(self, rows, position)

    def history(self, chunk_id: str) -> list[HistoryEvent]:
        with self._lock:
            return [e for e in self._events if e.chunk_id == chunk_id]

    def history_position(self) -> HistoryPosition:
        with self._lock:
            return HistoryPosition(len(self._events), utc_now())

    @contextlib.contextmanager
    def as_of(self, when: HistoryPosition | datetime) -> Iterator[InMemoryKnowledgeStore]:
        """The rows as they were at ``when``: each the state of its last event by then."""
        with self._lock:
            if isinstance(when, datetime):
                at = to_utc(when, "as_of")
                seq = max((e.seq for e in self._events if e.at <= at), default=0)
                when = HistoryPosition(seq, at)
            elif not isinstance(when, HistoryPosition):
                raise ValidationError(
                    f"as_of: expected a HistoryPosition or an aware datetime, got {type(when).__name__}"
                )
            if when.seq > len(self._events):
                raise StoreError(
                    f"history position {when.seq} is after the latest event ({len(self._events)})"
                )
            last: dict[str, HistoryEvent] = {}
            for event in self._events[: when.seq]:
                last[event.chunk_id] = event
            rows = {
                cid: apply_event(self._rows[cid], event)
                for cid, event in last.items()
                if event.event != "purged" and cid in self._rows
            }
        yield _FrozenView(self, rows, when)

    # ------------------------------------------------------------------ reads

    def get(self, chunk_id: str) -> MemoryChunk | None:
        return self._rows.get(chunk_id) if isinstance(chunk_id, str) else None

    def _deliverable(self, c: MemoryChunk, now: datetime | None, include_superseded: bool = False) -> bool:
        if include_superseded and c.is_superseded:
            return c.review_state != "rejected" and not c.is_expired(now)
        return c.is_deliverable(now)

    def _list(self, query: ListQuery, on: Any) -> list[MemoryChunk]:
        """``list_chunks`` (``ChunkReads``): the filters in Python, oldest first."""
        q = query
        offset, namespace, namespaces, now = q.offset, q.namespace, q.namespaces, q.now
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValidationError(f"offset: expected a non-negative whole number, got {offset!r}")
        kind = validate_memory_kind(q.memory_kind) if q.memory_kind is not None else None
        in_window = _window(q.occurred_after, q.occurred_before)
        review = validate_review_state(q.review_state) if q.review_state is not None else None
        policy = validate_delivery_policy(q.delivery_policy) if q.delivery_policy is not None else None
        with self._lock:
            rows = sorted(self._rows.values(), key=lambda c: int(c.id))
        out = [
            c
            for c in rows
            if (kind is None or c.memory_kind == kind)
            and (review is None or c.review_state == review)
            and (policy is None or c.effective_delivery_policy == policy)
            and (namespace is None or c.namespace == namespace)
            and (namespaces is None or c.namespace in namespaces)
            and in_window(c)
            and (not q.deliverable or self._deliverable(c, now))
        ][offset:]
        return out if q.limit is None else out[: q.limit]

    def _count(self, query: ListQuery, on: Any) -> int:
        return len(self._list(query, on))

    def _search(self, query: str, k: int, options: SearchOptions, on: Any, vector: Any) -> list[SearchHit]:
        """``search`` (``ChunkReads``): every row scored (``_scored``), then filtered; there is
        no vector leg, so ``full_text`` changes nothing."""
        validate_text(query, "query", storable=False)
        in_window = _window(options.occurred_after, options.occurred_before)
        namespaces, now = options.namespaces, options.now
        with self._lock:
            rows = list(self._rows.values())
        scored = [
            (relevance, c)
            for relevance, c in _scored(query, rows)
            if (namespaces is None or c.namespace in namespaces)
            and in_window(c)
            and (not options.deliverable or self._deliverable(c, now, options.include_superseded))
        ]
        return [SearchHit(c, s, r, relevance=s) for r, (s, c) in enumerate(scored[:k], start=1)]

    # ------------------------------------------------------------------ async (AsyncKnowledgeStore)
    # Dict operations under a lock held for microseconds: nothing here can block a loop, so the
    # async forms run the synchronous ones in place (a store over a network awaits its client).

    async def asearch(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        return self.search(query, k, **options)

    async def alist_chunks(self, **filters: Any) -> list[MemoryChunk]:
        return self.list_chunks(**filters)

    async def aadd_chunk(self, content: str, *args: Any, **attrs_: Any) -> str:
        return self.add_chunk(content, *args, **attrs_)

    async def asupersede(self, old_id: str, content: str, **attrs_: Any) -> str:
        return self.supersede(old_id, content, **attrs_)

    async def aset_review_state(self, chunk_id: str, state: str) -> MemoryChunk:
        return self.set_review_state(chunk_id, state)

    def _trace(
        self, query: str, chunk_id: str, k: int, namespaces: Scopes, now: datetime | None, on: Any
    ) -> SearchTrace:
        """``trace_search`` (``SearchTracing``): where ``chunk_id`` ranked for ``query``: the IDF
        share of its meaningful words is the one leg, every row a candidate; the filters are the
        search's."""
        validate_text(query, "query")
        with self._lock:
            rows = list(self._rows.values())
        scored = _scored(query, rows)
        every = [c.id for _, c in scored]
        kept = [
            c.id
            for _, c in scored
            if (namespaces is None or c.namespace in namespaces) and self._deliverable(c, now)
        ]
        leg = LegRank(
            "overlap",
            every.index(chunk_id) + 1 if chunk_id in every else None,
            len(every),
            len(every),
            kept.index(chunk_id) + 1 if chunk_id in kept else None,
            "" if chunk_id in every else "no meaningful word of the query occurs in it",
        )
        rank = kept.index(chunk_id) + 1 if chunk_id in kept else None
        return SearchTrace(query, k, "exact", rank, tuple(kept[:k]), (leg,))

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _FrozenView(InMemoryKnowledgeStore):
    """Reads see the copy taken when the view opened (or the rows as of a position), with the
    deliverable filter evaluated at the view's time; writes go to the live store."""

    def __init__(
        self, origin: InMemoryKnowledgeStore, rows: dict[str, MemoryChunk], position: HistoryPosition
    ) -> None:
        super().__init__()
        self._origin = origin
        self._rows = rows
        self._position = position
        self.now = position.at
        self.backend = origin.backend

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[InMemoryKnowledgeStore]:
        yield self

    def history_position(self) -> HistoryPosition:
        return self._position

    def history(self, chunk_id: str) -> list[HistoryEvent]:
        return [e for e in self._origin.history(chunk_id) if e.seq <= self._position.seq]

    def as_of(self, when: HistoryPosition | datetime) -> Any:
        return self._origin.as_of(when)

    def _list(self, query: ListQuery, on: Any) -> list[MemoryChunk]:
        return super()._list(query if query.now is not None else query._replace(now=self.now), on)

    def _search(self, query: str, k: int, options: SearchOptions, on: Any, vector: Any) -> list[SearchHit]:
        now = options.now if options.now is not None else self.now
        return super()._search(query, k, options._replace(now=now), on, vector)

    def _trace(
        self, query: str, chunk_id: str, k: int, namespaces: Scopes, now: datetime | None, on: Any
    ) -> SearchTrace:
        return super()._trace(query, chunk_id, k, namespaces, self.now if now is None else now, on)


def _to_origin(name: str) -> Callable[..., Any]:
    def forwarded(self: _FrozenView, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._origin, name)(*args, **kwargs)

    forwarded.__name__ = forwarded.__qualname__ = name
    forwarded.__doc__ = f"The live store's ``{name}``: a view's writes are the store's."
    return forwarded


#: Every write of a view goes to the live store (``add_chunk``/``add_chunks`` through ``_write``).
_WRITES = ("_write", "set_review_state", "set_expires_at", "invalidate_chunk", "supersede", "purge")
for _name in (*_WRITES, "restore_chunks"):
    setattr(_FrozenView, _name, _to_origin(_name))


class InMemoryBackend:
    """Every record protocol in memory; ``trajectory`` is an optional ``TrajectoryWriter``.

    Any part may be given instead (a test's fake memory store, a real summaries table): the
    backend is then the bundle that routes a turn's records, which is all composition needs."""

    def __init__(
        self,
        memories: Any = None,
        trajectory: Any = None,
        *,
        summaries: Any = None,
        injections: Any = None,
        snapshots: Any = None,
    ) -> None:
        self._memories = memories if memories is not None else InMemoryKnowledgeStore()
        self._summaries = summaries if summaries is not None else InMemorySessionSummaries()
        self._injections = injections if injections is not None else InMemoryInjectionLog()
        self._snapshots = snapshots if snapshots is not None else InMemorySnapshotStore()
        self._trajectory = trajectory
        register_backend(self)

    @property
    def name(self) -> str:
        return f"memory:{id(self):x}"

    @property
    def memories(self) -> Any:
        return self._memories

    @property
    def summaries(self) -> Any:
        return self._summaries

    @property
    def injections(self) -> Any:
        return self._injections

    @property
    def snapshots(self) -> Any:
        return self._snapshots

    @property
    def trajectory(self) -> Any:
        return self._trajectory

    def close(self) -> None:
        if self._trajectory is not None:
            self._trajectory.close()
