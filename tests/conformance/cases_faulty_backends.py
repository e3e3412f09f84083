"""Deliberately faulty backends under the records kit (run by test_records_kit.py in a child
pytest; the file name keeps the main run from collecting it). Each fault is one plausible bug."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from contextplane.records import InjectionRow, SessionSummary, SnapshotRow
from contextplane.testing import BackendConformance
from contextplane.testing.memory import (
    InMemoryBackend,
    InMemoryInjectionLog,
    InMemorySessionSummaries,
    InMemorySnapshotStore,
)


class LeaksTheActiveSession(InMemorySessionSummaries):
    """Fault: ``exclude_session`` is ignored (the digest would repeat the running session)."""

    def newest(self, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        return super().newest(limit)

    def relevant(self, query: str, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        return super().relevant(query, limit)


class NewestFirstLog(InMemoryInjectionLog):
    """Fault: rows come back newest first, and ids restart for every session."""

    def rows(self, session_id: str | None = None, limit: int | None = None) -> list[InjectionRow]:
        return list(reversed(super().rows(session_id, limit)))

    def record(self, row: InjectionRow) -> int:
        with self._lock:
            stored = attrs.evolve(row, id=sum(1 for r in self._rows if r.session_id == row.session_id) + 1)
            self._rows.append(stored)
            return stored.id


class DropsRowsOnAFullDisk(InMemoryInjectionLog):
    """Fault: once its storage is gone (here: after ``close``) ``record`` returns an id without
    keeping the row and without raising: the turn's records vanish without a word (issue 26)."""

    def __init__(self) -> None:
        super().__init__()
        self.gone = False

    def record(self, row: InjectionRow) -> int:
        if self.gone:
            return len(self._rows) + 1
        return super().record(row)


class ClosingBackend(InMemoryBackend):
    def close(self) -> None:
        self.injections.gone = True
        super().close()


class AsyncForgetsTheExclusion(InMemorySessionSummaries):
    """Fault: the async form ignores ``exclude_session`` (the sync one is right)."""

    async def anewest(self, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        return self.newest(limit)


#: The cacheable-prefix columns of a snapshot (issue 24).
CACHE_FIELDS = ("cache_prefix_sha256", "cache_prefix_chars", "cache_shared_chars", "cache_break")


class DropsTheCachePrefix(InMemorySnapshotStore):
    """Fault: a storage layer that predates the cacheable-prefix columns keeps every other
    field and drops those (each call reads back as if recorded before them)."""

    def put(self, row: SnapshotRow) -> None:
        super().put(attrs.evolve(row, **dict.fromkeys(CACHE_FIELDS)))


class KeepsTheOldCachePrefix(InMemorySnapshotStore):
    """Fault: the replacing upsert's column list misses the cacheable-prefix columns, so a row
    put again without figures keeps the first put's."""

    def put(self, row: SnapshotRow) -> None:
        old = self._rows.get(row.key)
        if old is not None and row.cache_prefix_chars is None:
            row = attrs.evolve(row, **{f: getattr(old, f) for f in CACHE_FIELDS})
        super().put(row)


class TestLeaksTheActiveSession(BackendConformance):
    capabilities = frozenset()

    @pytest.fixture
    def backend(self) -> Any:
        return InMemoryBackend(summaries=LeaksTheActiveSession())


class TestNewestFirstLog(BackendConformance):
    capabilities = frozenset()

    @pytest.fixture
    def backend(self) -> Any:
        return InMemoryBackend(injections=NewestFirstLog())


class TestAsyncForgetsTheExclusion(BackendConformance):
    capabilities = frozenset()

    @pytest.fixture
    def backend(self) -> Any:
        return InMemoryBackend(summaries=AsyncForgetsTheExclusion())


class TestDropsRowsOnAFullDisk(BackendConformance):
    capabilities = frozenset()

    @pytest.fixture
    def backend(self) -> Any:
        return ClosingBackend(injections=DropsRowsOnAFullDisk())


class TestDropsTheCachePrefix(BackendConformance):
    capabilities = frozenset()

    @pytest.fixture
    def backend(self) -> Any:
        return InMemoryBackend(snapshots=DropsTheCachePrefix())


class TestKeepsTheOldCachePrefix(BackendConformance):
    capabilities = frozenset()

    @pytest.fixture
    def backend(self) -> Any:
        return InMemoryBackend(snapshots=KeepsTheOldCachePrefix())
