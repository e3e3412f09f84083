"""The records kit (``BackendConformance``) on the embedded SQLite backend and the kit's
in-memory backend (it must pass; tests/postgres/test_kit.py runs it on PostgreSQL), and on
faulty backends (it must fail, by id)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextplane.backends.sqlite import SQLiteBackend
from contextplane.observability import TrajectoryWriter
from contextplane.testing import BackendConformance, requirements_of
from contextplane.testing.memory import InMemoryBackend
from tests.conformance.helpers import run_pytest

HERE = Path(__file__).resolve().parent


class TestSQLiteBackend(BackendConformance):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> Iterator[SQLiteBackend]:
        backend = SQLiteBackend(tmp_path / "memory.sqlite3")
        yield backend
        backend.close()


class TestInMemoryBackend(BackendConformance):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> InMemoryBackend:
        return InMemoryBackend(trajectory=TrajectoryWriter(tmp_path / "trajectories"))


class TestInMemoryBackendWithoutTrajectory(BackendConformance):
    capabilities = frozenset()

    @pytest.fixture
    def backend(self) -> InMemoryBackend:
        return InMemoryBackend()


FAULTY = (
    "TestLeaksTheActiveSession",
    "TestNewestFirstLog",
    "TestAsyncForgetsTheExclusion",
    "TestDropsRowsOnAFullDisk",
    "TestDropsTheCachePrefix",
    "TestKeepsTheOldCachePrefix",
)


def test_faulty_backends_fail_with_the_named_ids(tmp_path: Path) -> None:
    run = run_pytest([HERE / "cases_faulty_backends.py"], tmp_path)
    assert run.outcomes, run.stdout + run.stderr
    every = {r.id for r in requirements_of("records")}
    assert set(run.by_class("TestLeaksTheActiveSession")) == set(run.by_class("TestNewestFirstLog")) == every
    assert run.failing("TestLeaksTheActiveSession") == {
        "RECORDS-SUMMARIES-NEWEST",
        "RECORDS-SUMMARIES-RELEVANT",
    }
    assert run.failing("TestNewestFirstLog") == {"RECORDS-INJECTIONS-APPEND"}
    assert run.failing("TestAsyncForgetsTheExclusion") == {"RECORDS-ASYNC-PARITY"}
    # Snapshots without their cacheable-prefix figures (or with another put's) fail by that id only.
    assert run.failing("TestDropsTheCachePrefix") == {"RECORDS-SNAPSHOTS-CACHE-PREFIX"}
    assert run.failing("TestKeepsTheOldCachePrefix") == {"RECORDS-SNAPSHOTS-CACHE-PREFIX"}
    dropped_cache = run.by_class("TestDropsTheCachePrefix")["RECORDS-SNAPSHOTS-CACHE-PREFIX"].message
    assert "read the cacheable prefix back as None" in dropped_cache
    left_over = run.by_class("TestKeepsTheOldCachePrefix")["RECORDS-SNAPSHOTS-CACHE-PREFIX"].message
    assert "the first put's figures left over" in left_over
    # Every kit check's report carries its id (JUnit XML <property>), and the run ends naming
    # the failed ones (``contextplane.testing.failed_requirements`` over the failed reports).
    outcomes = run.by_class("TestDropsTheCachePrefix")
    assert {o.requirement for o in outcomes.values()} == set(outcomes) == every
    failed = sorted({rid for cls in FAULTY for rid in run.failing(cls)})
    assert f"contextplane conformance: failed requirements: {', '.join(failed)}" in run.stdout
    # A log that returns as if it stored a row it dropped loses a turn's records silently.
    assert run.failing("TestDropsRowsOnAFullDisk") == {"RECORDS-DURABLE-OR-REPORTED"}
    dropped = run.by_class("TestDropsRowsOnAFullDisk")["RECORDS-DURABLE-OR-REPORTED"].message
    assert "returned without storing the row and without raising" in dropped
    parity = run.by_class("TestAsyncForgetsTheExclusion")["RECORDS-ASYNC-PARITY"].message
    assert "anewest(5, exclude_session='b') returned" in parity and "newest gave" in parity
    message = run.by_class("TestNewestFirstLog")["RECORDS-INJECTIONS-APPEND"].message
    assert "[RECORDS-INJECTIONS-APPEND] injections.record returns distinct, increasing ids" in message
