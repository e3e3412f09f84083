"""The in-memory reference store's writes: consolidated adds (the shared write spec and outcomes),
exact restores, review, expiry, invalidation, supersession and purge, each appending its
lifecycle events (see ``contextplane.backends.memory``).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from contextplane.backends.spec import (
    ChunkWrites,
    check_fields,
    validate_write,
)
from contextplane.errors import StoreError
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
from contextplane.memory.history import EventName, HistoryEvent
from contextplane.memory.model import (
    SUPERSEDED_PREFIX,
    MemoryChunk,
    parse_timestamp,
    utc_now,
    validate_review_state,
    validate_text,
)
from contextplane.store.columns import superseding_row
from contextplane.store.lifecycle_spec import ChunkLifecycle
from contextplane.store.outcomes import write_outcomes
from contextplane.store.restore import created_details, id_taken, restored_chunks


def _dedupe_key(chunk: MemoryChunk) -> tuple[str, str, str, datetime | None]:
    """What makes two writes the same memory: the text (whitespace collapsed), scope, provenance,
    event time (the same words said on another day are another event)."""
    return (normalise_content(chunk.content), chunk.namespace, chunk.source_type, chunk.occurred_at)


class MemoryWrites(ChunkWrites, ChunkLifecycle):
    """The rows, their history and every write of ``InMemoryKnowledgeStore``."""

    def __init__(self, *, consolidation: Consolidation | None = None) -> None:
        self._consolidation = consolidation if consolidation is not None else Consolidation()
        self._rows: dict[str, MemoryChunk] = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._events: list[HistoryEvent] = []
        #: The backend this store belongs to; set by the backend that wraps it.
        self.backend: Any = None

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

    def _invalidate_chunk(
        self, chunk_id: str, superseded_by: str | None, reason: str | None, by: str
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
