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
import itertools
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import attrs

from contextplane.backends.spec import (
    ChunkReads,
    ChunkWrites,
    ListQuery,
    SearchOptions,
    check_fields,
    validate_write,
)
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.consolidation import (
    NEAR_DUPLICATE_CANDIDATES,
    Consolidation,
    WriteOutcome,
    candidate_terms,
    current_head,
    near_duplicates,
    normalise_content,
    outdated_message,
    word_set,
)
from contextplane.memory.history import EventName, HistoryEvent, HistoryPosition, apply_event
from contextplane.memory.model import (
    SUPERSEDED_PREFIX,
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
from contextplane.records.injections import InjectionRow
from contextplane.records.snapshots import PromptSnapshot, SnapshotRow, decode_snapshot
from contextplane.records.summaries import SessionSummary, summary_stamp, validate_summary
from contextplane.records.turn_inputs import TurnInputs
from contextplane.store.columns import INHERITED_ON_SUPERSEDE, superseding_row
from contextplane.store.outcomes import write_outcomes
from contextplane.store.protocol import LegRank, SearchHit, SearchTrace
from contextplane.store.query_terms import fts5_idf, meaningful_words
from contextplane.store.restore import created_details, id_taken, restored_chunks

_WORD = re.compile(r"\w+")
#: What a superseding row inherits, as every store has it.
_INHERITED = INHERITED_ON_SUPERSEDE


def _dedupe_key(chunk: MemoryChunk) -> tuple[str, str, str, datetime | None]:
    """What makes two writes the same memory: the text (whitespace collapsed), scope, provenance,
    event time (the same words said on another day are another event)."""
    return (normalise_content(chunk.content), chunk.namespace, chunk.source_type, chunk.occurred_at)


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


class InMemoryKnowledgeStore(ChunkWrites, ChunkReads):
    """A dict of ``MemoryChunk`` values under one lock; search is word overlap."""

    def __init__(self, *, consolidation: Consolidation | None = None) -> None:
        self._consolidation = consolidation if consolidation is not None else Consolidation()
        self._rows: dict[str, MemoryChunk] = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._events: list[HistoryEvent] = []
        #: The backend this store belongs to; set by the backend that wraps it.
        self.backend: Any = None

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[InMemoryKnowledgeStore]:
        """A view over a copy of the rows taken now: later commits are invisible to it, and
        its deliverable filter is evaluated at the time it opened."""
        with self._lock:
            rows = dict(self._rows)
            position = HistoryPosition(len(self._events), utc_now())
        yield _FrozenView(self, rows, position)

    # ------------------------------------------------------------------ history

    def _record(self, chunk: MemoryChunk, event: EventName, actor: str = "", **detail: Any) -> None:
        """Append one event with the state ``chunk`` is in (caller holds the lock)."""
        self._events.append(
            HistoryEvent(
                seq=len(self._events) + 1,
                chunk_id=chunk.id,
                at=chunk.created_at if event == "created" else utc_now(),
                event=event,
                actor=actor,
                review_state=chunk.review_state,
                expires_at=chunk.expires_at,
                invalidated_at=chunk.invalidated_at,
                invalidation_reason=chunk.invalidation_reason,
                updated_at=chunk.updated_at,
                detail=detail,
            )
        )

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

    # ------------------------------------------------------------------ writes

    def _make(self, row: Mapping[str, Any], now: datetime) -> MemoryChunk:
        """Validate and stamp one row by the write spec (its id is given when it is stored). A
        batch's rows have their fields checked first, by index (``_write``)."""
        w = validate_write(row, 0, now)
        return MemoryChunk(
            id="",
            content=w.content,
            created_at=now,
            updated_at=now,
            domain=w.domain,
            source_type=w.source_type,
            memory_kind=w.stamp.memory_kind,
            delivery_policy=w.stamp.delivery_policy,
            review_state=w.stamp.review_state,
            namespace=w.namespace,
            heading=w.heading,
            source=w.source,
            subject=w.subject,
            epoch=w.epoch,
            expires_at=w.stamp.expires_at,
            occurred_at=w.occurred_at,
        )

    def _write(self, rows: Iterable[Mapping[str, Any]], *, single: bool) -> list[WriteOutcome]:
        """``add_chunk``/``add_chunks`` (``ChunkWrites``). Validate every row first (all or
        none), then consolidate and store them in one go under the lock, deciding as the
        embedded store's ``writes`` does: duplicates against the rows deliverable before the
        write (and earlier rows of the batch), near duplicates on single writes only, then
        same-subject supersession in id order."""
        now = utc_now()
        with self._lock:
            made = []
            for index, row in enumerate(rows):
                check_fields(row, index)  # an unknown field names its row
                made.append(self._make(row, now))
            policy = self._consolidation
            seen: dict[tuple[str, str, str, datetime | None], str | int] = {}  # key -> id / batch index
            if policy.deduplicate:
                for c in sorted(self._rows.values(), key=lambda c: int(c.id), reverse=True):
                    if c.is_deliverable(now):
                        seen[_dedupe_key(c)] = c.id  # the oldest wins: it is written last
            outdated = self._outdated(now) if policy.deduplicate else {}
            keep: list[int] = []
            duplicate_of: dict[int, str | int] = {}
            outdated_of: dict[int, tuple[str, str]] = {}  # the text of a superseded row: (head, row)
            for index, chunk in enumerate(made):
                key = _dedupe_key(chunk)
                if policy.deduplicate and key in seen:
                    duplicate_of[index] = seen[key]
                    continue
                if key in outdated:
                    outdated_of[index] = outdated[key]
                    continue
                if policy.deduplicate and chunk.is_deliverable(now):
                    seen[key] = index  # only a deliverable row absorbs copies
                keep.append(index)
            near = {i: self._near(made[i], now, policy) for i in keep} if single else {}
            ids = {i: str(next(self._ids)) for i in keep}
            stored = [attrs.evolve(made[i], id=ids[i]) for i in keep]
            for chunk in stored:
                self._rows[chunk.id] = chunk
            superseded: dict[int, list[str]] = {}
            if policy.auto_supersede:
                taken: set[str] = set()  # superseded by an earlier row of this write
                for index, chunk in zip(keep, stored, strict=True):
                    if chunk.subject:
                        superseded[index] = self._subject_heads(chunk, taken)
                        taken.update(superseded[index])
            outcomes, results = write_outcomes(len(made), ids, duplicate_of, outdated_of, superseded, near)
            created = [(self._rows[ids[i]], result) for i, result in results.items()]
            for chunk, result in created:  # before the supersessions, as they were written
                detail = result.detail() if result.outcome != "stored" else {}
                self._record(chunk, "created", chunk.source_type, **detail)
            for index, chunk in zip(keep, stored, strict=True):
                for old in superseded.get(index, []):
                    self._rows[old] = attrs.evolve(
                        self._rows[old],
                        invalidated_at=chunk.created_at,
                        invalidation_reason=f"{SUPERSEDED_PREFIX}{chunk.id}",
                        updated_at=chunk.created_at,
                    )
                    self._record(
                        self._rows[old],
                        "superseded",
                        chunk.source_type,
                        by=chunk.id,
                        rule="same subject, scope and kind",
                    )
            for index, target in sorted(duplicate_of.items()):
                found = ids[target] if isinstance(target, int) else target
                self._record(
                    self._rows[found],
                    "consolidated",
                    made[index].source_type,
                    outcome="duplicate",
                    message="an exact duplicate write returned this row",
                )
            for index, (head, old) in sorted(outdated_of.items()):
                self._record(
                    self._rows[head],
                    "consolidated",
                    made[index].source_type,
                    outcome="outdated",
                    message=outdated_message(old),
                )
        return outcomes

    def restore_chunks(self, rows: Iterable[Mapping[str, Any] | MemoryChunk], *, by: str = "") -> list[str]:
        """``ExactRestore``: rows back with their ids, times and state, nothing consolidated, one
        ``created`` event each at the restore's time saying so; an id the store holds or held
        (a purged row's events keep it) is refused and nothing is stored."""
        chunks = restored_chunks(rows)
        actor = validate_text(by, "by")
        now = utc_now()
        with self._lock:
            held = {e.chunk_id for e in self._events}
            for chunk in chunks:
                if chunk.id in self._rows or chunk.id in held:
                    raise id_taken("in-memory store", chunk.id, purged=chunk.id not in self._rows)
            details = created_details(chunks, now, actor)
            for chunk in sorted(chunks, key=lambda c: int(c.id)):
                self._rows[chunk.id] = chunk
                self._events.append(
                    HistoryEvent(
                        seq=len(self._events) + 1,
                        chunk_id=chunk.id,
                        at=now,
                        event="created",
                        actor=chunk.source_type,
                        review_state=chunk.review_state,
                        expires_at=chunk.expires_at,
                        invalidated_at=chunk.invalidated_at,
                        invalidation_reason=chunk.invalidation_reason,
                        updated_at=chunk.updated_at,
                        detail=details[chunk.id],
                    )
                )
            # new rows continue after every id handed out (a restored one may be the largest)
            used = [int(i) for i in self._rows] + [int(e.chunk_id) for e in self._events]
            self._ids = itertools.count(max(used) + 1)
        return [c.id for c in chunks]

    def _outdated(self, now: datetime) -> dict[tuple[str, str, str, datetime | None], tuple[str, str]]:
        """Superseded rows (not rejected) whose chain ends in a deliverable head: dedupe key ->
        (head id, row id), the newest row of a key winning (``memory.consolidation``)."""

        def step(chunk_id: str) -> tuple[str | None, bool] | None:
            row = self._rows.get(chunk_id)
            return None if row is None else (row.superseded_by, row.is_deliverable(now))

        found: dict[tuple[str, str, str, datetime | None], tuple[str, str]] = {}
        for c in sorted(self._rows.values(), key=lambda c: int(c.id), reverse=True):
            if c.superseded_by is None or c.review_state == "rejected" or _dedupe_key(c) in found:
                continue
            head = current_head(c.superseded_by, step)
            if head is not None:
                found[_dedupe_key(c)] = (head, c.id)
        return found

    def _near(
        self, chunk: MemoryChunk, now: datetime, policy: Consolidation
    ) -> tuple[tuple[str, float], ...]:
        """Deliverable rows of the write's scope at or above the threshold: the newest
        ``NEAR_DUPLICATE_CANDIDATES`` holding one of its prefix-filter words, as the embedded
        store looks them up (``memory.consolidation``)."""
        terms = set(candidate_terms(chunk.content, policy.near_duplicate_threshold))
        candidates = []
        for c in sorted(self._rows.values(), key=lambda c: int(c.id), reverse=True):
            if c.namespace == chunk.namespace and c.is_deliverable(now) and terms & word_set(c.content):
                candidates.append((c.id, c.content))
                if len(candidates) == NEAR_DUPLICATE_CANDIDATES:
                    break
        return near_duplicates(chunk.content, candidates, policy.near_duplicate_threshold)

    def _subject_heads(self, new: MemoryChunk, taken: set[str]) -> list[str]:
        """The older deliverable rows holding ``new``'s subject in its scope and kind, which
        it supersedes (``taken``: rows an earlier row of the same write supersedes)."""
        return [
            c.id
            for c in sorted(self._rows.values(), key=lambda c: int(c.id))
            if c.subject == new.subject
            and c.namespace == new.namespace
            and c.memory_kind == new.memory_kind
            and int(c.id) < int(new.id)
            and c.id not in taken
            and c.is_deliverable(new.created_at)
        ]

    def _require(self, chunk_id: str) -> MemoryChunk:
        found = self._rows.get(chunk_id)
        if found is None:
            raise StoreError(f"no memory with id {chunk_id!r}")
        return found

    def _update(self, chunk_id: str, event: EventName, by: str, **changes: Any) -> MemoryChunk:
        with self._lock:
            chunk = attrs.evolve(self._require(chunk_id), updated_at=utc_now(), **changes)
            self._rows[chunk_id] = chunk
            self._record(chunk, event, validate_text(by, "by"))
            return chunk

    def set_review_state(self, chunk_id: str, state: str, *, by: str = "") -> MemoryChunk:
        return self._update(chunk_id, "review", by, review_state=validate_review_state(state))

    def set_expires_at(
        self, chunk_id: str, expires_at: datetime | str | None, *, by: str = ""
    ) -> MemoryChunk:
        value = None if expires_at is None else parse_timestamp(expires_at, "expires_at")
        return self._update(chunk_id, "expiry", by, expires_at=value)

    def invalidate_chunk(
        self,
        chunk_id: str,
        *,
        superseded_by: str | None = None,
        reason: str | None = None,
        by: str = "",
    ) -> MemoryChunk:
        with self._lock:
            if self._require(chunk_id).invalidated_at is not None:
                raise StoreError(f"memory {chunk_id} is already invalidated")
            text = (
                f"{SUPERSEDED_PREFIX}{superseded_by}"
                if superseded_by is not None
                else reason or "invalidated"
            )
            event: EventName = "superseded" if superseded_by is not None else "invalidated"
            return self._update(chunk_id, event, by, invalidated_at=utc_now(), invalidation_reason=text)

    def supersede(self, old_id: str, content: str, **attrs_: Any) -> str:
        """An explicit supersession: stored as given (not consolidated), insert first, so a
        bad row leaves the old one alone."""
        with self._lock:
            old = self._require(old_id)
            if old.invalidated_at is not None:
                raise StoreError(f"memory {old_id} is already invalidated")
            row = superseding_row(old, attrs_, content)
            chunk = attrs.evolve(self._make(row, utc_now()), id=str(next(self._ids)))
            self._rows[chunk.id] = chunk
            # no "supersedes" detail (the embedded store writes one): the console's tests use
            # this store as the one whose history names no predecessor
            self._record(chunk, "created", chunk.source_type)
            self.invalidate_chunk(old_id, superseded_by=chunk.id, by=chunk.source_type)
            return chunk.id

    def purge(self, now: datetime | None = None, *, ids: Sequence[str] | None = None) -> int:
        with self._lock:
            doomed = [
                c.id
                for c in self._rows.values()
                if (c.is_expired(now) or c.invalidated_at is not None)
                and not c.is_superseded
                and (ids is None or c.id in ids)
            ]
            for chunk_id in doomed:
                self._record(self._rows[chunk_id], "purged", "purge")
                del self._rows[chunk_id]
            return len(doomed)

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

    def trace_search(
        self,
        query: str,
        chunk_id: str,
        k: int = 10,
        *,
        namespaces: Sequence[str] | None = None,
        now: datetime | None = None,
    ) -> SearchTrace:
        """Where ``chunk_id`` ranked for ``query``: the IDF share of its meaningful words is the
        one leg, every row a candidate; the filters are the search's."""
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

    def trace_search(self, query: str, chunk_id: str, k: int = 10, **options: Any) -> SearchTrace:
        if options.get("now") is None:
            options["now"] = self.now
        return super().trace_search(query, chunk_id, k, **options)

    def _write(self, rows: Iterable[Mapping[str, Any]], *, single: bool) -> list[WriteOutcome]:
        return self._origin._write(rows, single=single)

    def set_review_state(self, chunk_id: str, state: str, *, by: str = "") -> MemoryChunk:
        return self._origin.set_review_state(chunk_id, state, by=by)

    def set_expires_at(
        self, chunk_id: str, expires_at: datetime | str | None, *, by: str = ""
    ) -> MemoryChunk:
        return self._origin.set_expires_at(chunk_id, expires_at, by=by)

    def invalidate_chunk(
        self,
        chunk_id: str,
        *,
        superseded_by: str | None = None,
        reason: str | None = None,
        by: str = "",
    ) -> MemoryChunk:
        return self._origin.invalidate_chunk(chunk_id, superseded_by=superseded_by, reason=reason, by=by)

    def supersede(self, old_id: str, content: str, **attrs_: Any) -> str:
        return self._origin.supersede(old_id, content, **attrs_)

    def purge(self, now: datetime | None = None, *, ids: Sequence[str] | None = None) -> int:
        return self._origin.purge(now, ids=ids)

    def restore_chunks(self, rows: Iterable[Mapping[str, Any] | MemoryChunk], *, by: str = "") -> list[str]:
        return self._origin.restore_chunks(rows, by=by)


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
