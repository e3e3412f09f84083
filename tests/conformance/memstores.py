"""Deliberately faulty in-memory stores for the store kit's own tests.

``InMemoryKnowledgeStore`` (the correct one) now ships in ``contextplane.testing.memory``;
the two subclasses here are the deliberate faults the issue names; each overrides one method
the way a plausible bug would, so the kit must fail on them with the right requirement ids.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import attrs

from contextplane.memory.consolidation import Consolidation
from contextplane.memory.history import HistoryPosition
from contextplane.memory.model import SUPERSEDED_PREFIX, MemoryChunk, utc_now
from contextplane.store.columns import superseding_row
from contextplane.store.protocol import SearchHit
from contextplane.store.restore import restored_chunks
from contextplane.testing.memory import InMemoryKnowledgeStore

__all__ = [
    "DeletesOnSupersedeStore",
    "DropsEventTimeStore",
    "FollowsAcrossScopesStore",
    "FollowsThroughViewsStore",
    "FollowsUndeliverableStore",
    "IgnoresExpiryStore",
    "InMemoryKnowledgeStore",
    "NoRelevanceStore",
    "PresentAsOfStore",
    "StampsOnRestoreStore",
    "StoresEveryWriteStore",
    "UnlockedSupersedeStore",
]


class IgnoresExpiryStore(InMemoryKnowledgeStore):
    """Fault: the deliverable filter forgets ``expires_at`` (rejected and invalidated still work)."""

    def _deliverable(self, c: MemoryChunk, now: datetime | None, include_superseded: bool = False) -> bool:
        if include_superseded and c.is_superseded:
            return c.review_state != "rejected"
        return c.review_state != "rejected" and c.invalidated_at is None


class DeletesOnSupersedeStore(InMemoryKnowledgeStore):
    """Fault: supersession deletes the old row instead of invalidating it (no audit trail)."""

    def supersede(self, old_id: str, content: str, **attrs_: Any) -> str:
        with self._lock:
            old = self._require(old_id)
            new_id = self.add_chunks([superseding_row(old, attrs_, content)])[0]
            del self._rows[old_id]
            return new_id


class PresentAsOfStore(InMemoryKnowledgeStore):
    """Fault: ``as_of`` ignores the position and shows the store as it is now (a history kept,
    but never read back)."""

    @contextlib.contextmanager
    def as_of(self, when: HistoryPosition | datetime) -> Iterator[InMemoryKnowledgeStore]:
        with self.consistent_read() as view:
            yield view


class NoRelevanceStore(InMemoryKnowledgeStore):
    """Fault: hits carry no relevance (the PostgreSQL backend's first form), so the relevance
    floor never applies to them."""

    def search(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        return [SearchHit(h.chunk, h.score, h.rank) for h in super().search(query, k, **options)]


class ShallowPoolStore(InMemoryKnowledgeStore):
    """Fault: a candidate pool that does not grow with ``k`` (the fixed-depth search before
    issue 21): a deeper search pads with whatever comes after the first 12 rows it looked at."""

    def search(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        hits = super().search(query, min(k, 12), **options)
        if k <= 12:
            return hits
        shown = {h.chunk.id for h in hits}
        rest = [c for c in self.list_chunks(deliverable=True) if c.id not in shown and "kiwi" not in c.content]
        return hits + [SearchHit(c, 0.0, len(hits) + i + 1, 0.0) for i, c in enumerate(rest[: k - len(hits)])]


class StoresEveryWriteStore(InMemoryKnowledgeStore):
    """Fault: writes are stored as given, never consolidated (the store before D7's
    consolidation): copies pile up, a same-subject write leaves two heads, and only identical
    word sets are reported as near duplicates."""

    def __init__(self) -> None:
        super().__init__(
            consolidation=Consolidation(deduplicate=False, auto_supersede=False, near_duplicate_threshold=1.0)
        )


class DropsEventTimeStore(InMemoryKnowledgeStore):
    """Fault: the event time is accepted and dropped (a store written before ``occurred_at``
    that takes unknown keywords): nothing is kept, checked or filtered on."""

    def _make(self, row: Mapping[str, Any], now: datetime) -> MemoryChunk:
        return super()._make({k: v for k, v in row.items() if k != "occurred_at"}, now)

    def list_chunks(self, **filters: Any) -> list[MemoryChunk]:  # type: ignore[override]
        filters.pop("occurred_after", None)
        filters.pop("occurred_before", None)
        return super().list_chunks(**filters)

    def search(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:  # type: ignore[override]
        options.pop("occurred_after", None)
        options.pop("occurred_before", None)
        return super().search(query, k, **options)

class UnlockedSupersedeStore(InMemoryKnowledgeStore):
    """Fault: ``supersede`` claims the old row, then writes the new one after letting go of the
    lock same-subject writes decide under (PostgreSQL's first form, issue 26): a write of the
    subject in between finds no head to supersede, and the subject ends with two."""

    def supersede(self, old_id: str, content: str, **attrs_: Any) -> str:
        now = utc_now()
        with self._lock:
            old = self._require(old_id)
            row = superseding_row(old, attrs_, content)
            made = self._make(row, now)  # a bad row still fails before anything changes
            # the row lock: invalid for everyone else from here on
            self._rows[old_id] = attrs.evolve(old, invalidated_at=now, invalidation_reason="superseding")
        time.sleep(0.01)
        with self._lock:
            chunk = attrs.evolve(made, id=str(next(self._ids)))
            self._rows[chunk.id] = chunk
            self._record(chunk, "created", chunk.source_type)
            self._rows[old_id] = attrs.evolve(
                self._rows[old_id], invalidation_reason=f"{SUPERSEDED_PREFIX}{chunk.id}", updated_at=now
            )
            self._record(self._rows[old_id], "superseded", chunk.source_type, by=chunk.id)
            return chunk.id


class StampsOnRestoreStore(InMemoryKnowledgeStore):
    """Fault: ``restore_chunks`` keeps the ids but stamps the restore's time as each row's
    ``created_at`` and ``updated_at`` (a restore built on the write path's stamping): every
    export then comes back younger than it was."""

    def restore_chunks(self, rows: Any, *, by: str = "") -> list[str]:
        now = utc_now()
        chunks = restored_chunks(rows)
        return super().restore_chunks([attrs.evolve(c, created_at=now, updated_at=now) for c in chunks], by=by)


class FollowsAcrossScopesStore(InMemoryKnowledgeStore):
    """Fault: ``following`` takes the next row by id whatever its scope (a lookup that forgot
    ``namespace``): another conversation's turn is offered as the answer."""

    def _following(
        self, chunk_ids: list[str], deliverable: bool, now: datetime | None, on: Any
    ) -> dict[str, MemoryChunk]:
        rows = sorted(self._rows.values(), key=lambda c: int(c.id))
        found: dict[str, MemoryChunk] = {}
        for chunk_id in chunk_ids:
            if (this := self.get(chunk_id)) is None:
                continue
            after = [
                c for c in rows if int(c.id) > int(this.id) and (not deliverable or self._deliverable(c, now))
            ]
            if after:
                found[chunk_id] = after[0]
        return found


class FollowsUndeliverableStore(InMemoryKnowledgeStore):
    """Fault: ``following`` ignores ``deliverable`` and returns the very next row of the scope,
    rejected, expired or superseded as it may be."""

    def _following(
        self, chunk_ids: list[str], deliverable: bool, now: datetime | None, on: Any
    ) -> dict[str, MemoryChunk]:
        return super()._following(chunk_ids, False, now, on)


class FollowsThroughViewsStore(InMemoryKnowledgeStore):
    """Fault: the ``consistent_read()`` view's ``following`` is the live store's (a view that
    forwards the new read instead of answering it), so a turn written after the view opened is
    offered to a composition that cannot see it otherwise."""

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[InMemoryKnowledgeStore]:
        with super().consistent_read() as view:
            view.following = self.following  # type: ignore[method-assign]
            yield view
