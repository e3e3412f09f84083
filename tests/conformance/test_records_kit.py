"""The records kit (``BackendConformance``) on the embedded SQLite backend and the kit's
in-memory backend; tests/postgres/test_kit.py runs it on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextplane.backends.sqlite import SQLiteBackend
from contextplane.observability import TrajectoryWriter
from contextplane.testing import BackendConformance
from contextplane.testing.memory import InMemoryBackend


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
