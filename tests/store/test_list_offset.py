"""``list_chunks(offset=...)`` and ``count_chunks`` (issue 23: a listing says "50 of N" and
reads a deep page at its place), on the embedded store and the in-memory reference."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextplane.errors import ValidationError
from contextplane.store.sqlite import SQLiteKnowledgeStore
from contextplane.testing.memory import InMemoryKnowledgeStore


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    made = SQLiteKnowledgeStore(tmp_path / "m.sqlite3") if request.param == "sqlite" else InMemoryKnowledgeStore()
    made.add_chunks([{"content": f"row {i}", "memory_kind": ("fact", "note")[i % 2]} for i in range(30)])
    yield made
    made.close()


def check_offsets(store: Any) -> None:
    every = [c.id for c in store.list_chunks()]
    assert len(every) == store.count_chunks() == 30
    assert [c.id for c in store.list_chunks(offset=25)] == every[25:]
    assert [c.id for c in store.list_chunks(offset=10, limit=5)] == every[10:15]
    assert store.list_chunks(offset=40) == []
    facts = [c.id for c in store.list_chunks(memory_kind="fact")]
    assert store.count_chunks(memory_kind="fact") == len(facts) == 15
    assert [c.id for c in store.list_chunks(memory_kind="fact", offset=3, limit=2)] == facts[3:5]
    for bad in (-1, True, "3"):
        with pytest.raises(ValidationError, match="offset: expected a non-negative whole number"):
            store.list_chunks(offset=bad)


def test_offset_and_count(store: Any) -> None:
    check_offsets(store)
