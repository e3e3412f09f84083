"""Fixtures for the store tests: a fresh store file per test, with and without an embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextplane.store import SQLiteKnowledgeStore
from tests.store.helpers import HashEmbedder


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.sqlite3"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteKnowledgeStore]:
    with SQLiteKnowledgeStore(db_path) as opened:
        yield opened


@pytest.fixture
def hybrid_store(db_path: Path) -> Iterator[SQLiteKnowledgeStore]:
    with SQLiteKnowledgeStore(db_path, embedder=HashEmbedder()) as opened:
        yield opened
