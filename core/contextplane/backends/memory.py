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

import builtins
import contextlib
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import attrs

from contextplane.backends.memory_reads import _WORD, MemoryReads
from contextplane.backends.memory_writes import MemoryWrites
from contextplane.backends.spec import ListQuery, Scopes, SearchOptions
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.history import HistoryEvent, HistoryPosition, apply_event
from contextplane.memory.model import MemoryChunk, to_utc, utc_now
from contextplane.records.backend import register_backend
from contextplane.records.injections import InjectionRow
from contextplane.records.snapshots import PromptSnapshot, SnapshotRow, decode_snapshot
from contextplane.records.summaries import SessionSummary, summary_stamp, validate_summary
from contextplane.records.turn_inputs import TurnInputs
from contextplane.store.closing import ClosingStore
from contextplane.store.protocol import SearchHit, SearchTrace


class InMemoryKnowledgeStore(MemoryWrites, MemoryReads, ClosingStore):
    """A dict of ``MemoryChunk`` values under one lock; search is word overlap. Its writes are
    ``MemoryWrites`` (``memory_writes``), its reads ``MemoryReads`` (``memory_reads``); here are
    its views and its async forms."""

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

    def _following(
        self, chunk_ids: list[str], deliverable: bool, now: datetime | None, on: Any
    ) -> dict[str, MemoryChunk]:
        return super()._following(chunk_ids, deliverable, self.now if now is None else now, on)


def _to_origin(name: str) -> Callable[..., Any]:
    def forwarded(self: _FrozenView, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._origin, name)(*args, **kwargs)

    forwarded.__name__ = forwarded.__qualname__ = name
    forwarded.__doc__ = f"The live store's ``{name}``: a view's writes are the store's."
    return forwarded


#: Every write of a view goes to the live store (``add_chunk``/``add_chunks`` through ``_write``).
_WRITES = ("_write", "set_review_state", "set_expires_at", "_invalidate_chunk", "supersede", "purge")
for _name in (*_WRITES, "restore_chunks"):
    setattr(_FrozenView, _name, _to_origin(_name))


class InMemorySessionSummaries:
    """``SessionSummaries`` in a list; ``relevant`` ranks by word overlap with topic + summary."""

    def __init__(self) -> None:
        self._rows: list[SessionSummary] = []
        self._lock = threading.Lock()

    def add(
        self, session_id: str, summary: str, *, topic: str = "", kind: str = "session", at: str | None = None
    ) -> str:
        validate_summary(session_id, summary, topic, kind)
        with self._lock:
            row = SessionSummary(
                str(len(self._rows) + 1),
                session_id,
                at or summary_stamp(),
                kind,
                topic,
                summary,
            )
            self._rows.append(row)
            return row.id

    def _newest_first(self, exclude: str | None) -> list[SessionSummary]:
        with self._lock:
            rows = [r for r in self._rows if r.session_id != (exclude or "")]
        return sorted(rows, key=lambda r: (r.created_at, int(r.id)), reverse=True)

    def newest(self, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        return self._newest_first(exclude_session)[:limit]

    def relevant(self, query: str, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        words = {w.lower() for w in _WORD.findall(query)}
        scored = []
        for r in self._newest_first(exclude_session):
            overlap = len(words & {w.lower() for w in _WORD.findall(f"{r.topic} {r.summary}")})
            if overlap:
                scored.append((overlap, r))
        scored.sort(key=lambda pair: -pair[0])  # stable: newest first among equals
        return [r for _, r in scored[:limit]]

    def count(self) -> int:
        with self._lock:
            return len(self._rows)

    # Async forms (records.aio): list operations under a lock held for microseconds, run in place.

    async def aadd(
        self, session_id: str, summary: str, *, topic: str = "", kind: str = "session", at: str | None = None
    ) -> str:
        return self.add(session_id, summary, topic=topic, kind=kind, at=at)

    async def anewest(self, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        return self.newest(limit, exclude_session=exclude_session)

    async def arelevant(
        self, query: str, limit: int, *, exclude_session: str | None = None
    ) -> list[SessionSummary]:
        return self.relevant(query, limit, exclude_session=exclude_session)

    async def acount(self) -> int:
        return self.count()


class InMemoryInjectionLog:
    """``InjectionLog`` in a list."""

    def __init__(self) -> None:
        self._rows: list[InjectionRow] = []
        self._lock = threading.Lock()

    def record(self, row: InjectionRow) -> int:
        with self._lock:
            stored = attrs.evolve(row, id=len(self._rows) + 1)
            self._rows.append(stored)
            return stored.id

    def rows(self, session_id: str | None = None, limit: int | None = None) -> list[InjectionRow]:
        with self._lock:
            out = [r for r in self._rows if session_id is None or r.session_id == session_id]
        return out if limit is None else out[:limit]

    # Async forms (records.aio): list operations under a lock held for microseconds, run in place.

    async def arecord(self, row: InjectionRow) -> int:
        return self.record(row)

    async def arows(self, session_id: str | None = None, limit: int | None = None) -> list[InjectionRow]:
        return self.rows(session_id, limit)


class InMemorySnapshotStore:
    """``SnapshotStore`` in dicts; no retention (a test's life is short)."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, int, int], SnapshotRow] = {}
        self._prefixes: dict[str, tuple[str | None, str]] = {}
        self._inputs: dict[tuple[str, int], TurnInputs] = {}
        self._lock = threading.Lock()

    def put_inputs(self, inputs: TurnInputs) -> None:
        with self._lock:
            self._inputs[inputs.key] = inputs

    def get_inputs(self, session_id: str, turn_index: int) -> TurnInputs | None:
        with self._lock:
            return self._inputs.get((session_id, turn_index))

    def list_inputs(self, session_id: str | None = None) -> builtins.list[TurnInputs]:
        with self._lock:
            return [v for k, v in sorted(self._inputs.items()) if session_id is None or k[0] == session_id]

    def register_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        with self._lock:
            known = self._prefixes.get(sha256)
            if known is None or (known[0] is None and text is not None):
                self._prefixes[sha256] = (text, sections_json)

    def put(self, row: SnapshotRow) -> None:
        with self._lock:
            self._rows[row.key] = row

    def flush(self) -> None:
        pass

    def prefix_text(self, sha256: str) -> str | None:
        with self._lock:
            known = self._prefixes.get(sha256)
        return None if known is None else known[0]

    def count(self, session_id: str | None = None) -> int:
        with self._lock:
            return sum(1 for k in self._rows if session_id is None or k[0] == session_id)

    def list(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> builtins.list[PromptSnapshot]:
        with self._lock:
            rows = [r for k, r in sorted(self._rows.items()) if session_id is None or k[0] == session_id]
        if limit is not None:
            rows = sorted(rows, key=lambda r: r.created_at)[-limit:]
            rows.sort(key=lambda r: r.key)
        return [decode_snapshot(r) for r in rows]

    def get(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None:
        with self._lock:
            row = self._rows.get((session_id, turn_index, call_index))
        return None if row is None else decode_snapshot(row)

    def sessions(self) -> builtins.list[tuple[str, int, float]]:
        with self._lock:
            rows = list(self._rows.values())
        out: dict[str, tuple[int, float]] = {}
        for r in rows:
            n, t = out.get(r.session_id, (0, 0.0))
            out[r.session_id] = (n + 1, max(t, r.created_at))
        return sorted(((s, n, t) for s, (n, t) in out.items()), key=lambda x: -x[2])

    def prune(self, now: float | None = None) -> int:
        return 0

    # Async forms (records.aio): list operations under a lock held for microseconds, run in place.

    async def aregister_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        self.register_prefix(sha256, text, sections_json)

    async def aput(self, row: SnapshotRow) -> None:
        self.put(row)

    async def aflush(self) -> None:
        self.flush()

    async def aget(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None:
        return self.get(session_id, turn_index, call_index)

    async def alist(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> builtins.list[PromptSnapshot]:
        return self.list(session_id, limit=limit)

    async def aput_inputs(self, inputs: TurnInputs) -> None:
        self.put_inputs(inputs)

    async def aget_inputs(self, session_id: str, turn_index: int) -> TurnInputs | None:
        return self.get_inputs(session_id, turn_index)


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
