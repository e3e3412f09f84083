"""The backend toolkit over a live PostgreSQL (issue 25, step 5): the filter spec rendered in
psycopg's dialect lists the rows SQLite's rendering lists, and the shared row codec round-trips a
row through both stores (the pure half of these checks: ``tests/store/test_read_toolkit.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from contextplane.backends.memory import InMemoryKnowledgeStore
from contextplane.memory.model import MemoryChunk
from contextplane.store import SQLiteKnowledgeStore, filters

NOW = datetime.now(UTC).replace(microsecond=0)

ROWS: list[dict[str, Any]] = [
    {"content": "deploy freeze on fridays", "namespace": "project:a", "memory_kind": "standing"},
    {"content": "the build runs on arm", "namespace": "project:b", "delivery_policy": "always"},
    {"content": "said in standup", "namespace": "project:a", "occurred_at": NOW - timedelta(days=1)},
    {"content": "rejected idea", "review_state": "rejected"},
    {"content": "an expiring note", "expires_at": NOW + timedelta(days=2), "memory_kind": "note"},
    {"content": "note for a day", "expires_in_days": 1},
    {"content": "on demand only", "delivery_policy": "on_demand", "namespace": "session:s1"},
    {"content": "pending review", "review_state": "pending", "source_type": "agent"},
]

QUERIES = [
    filters.ListQuery(),
    filters.ListQuery(deliverable=True),
    filters.ListQuery(deliverable=True, now=NOW + timedelta(days=3)),
    filters.ListQuery(memory_kind="note"),
    filters.ListQuery(review_state="pending"),
    filters.ListQuery(review_state="rejected"),
    filters.ListQuery(delivery_policy="retrieved"),
    filters.ListQuery(delivery_policy="always"),
    filters.ListQuery(namespace="project:a"),
    filters.ListQuery(namespaces=["project:a", "session:s1"], limit=2),
    filters.ListQuery(namespaces=[]),
    filters.ListQuery(occurred_after=NOW - timedelta(days=2), occurred_before=NOW),
    filters.ListQuery(offset=3),
    filters.ListQuery(limit=2, offset=5),
]


def _contents(store: Any, query: filters.ListQuery) -> list[str]:
    return [c.content for c in store.list_chunks(**query._asdict())]


def test_every_dialect_lists_the_same_rows(tmp_path: Path, pg_backend_factory: Any) -> None:
    pg = pg_backend_factory().memories
    memory = InMemoryKnowledgeStore()
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as lite:
        for store in (lite, pg, memory):
            store.add_chunks(ROWS)
        for query in QUERIES:
            expected = _contents(lite, query)
            assert _contents(pg, query) == expected, query
            assert _contents(memory, query) == expected, query
            counted = query._replace(limit=None, offset=0)._asdict()
            del counted["limit"], counted["offset"]
            assert (
                lite.count_chunks(**counted) == pg.count_chunks(**counted) == memory.count_chunks(**counted)
            )
        assert _contents(lite, QUERIES[1]) != _contents(lite, QUERIES[0]), "the data exercises the filters"


def test_the_row_codec_round_trips_a_row_through_both_stores(tmp_path: Path, pg_backend_factory: Any) -> None:
    """Every cell of a row, NUL and the escape character included, written by an exact restore
    (``chunk_cells``) and read back (the compiled reader) on each store."""
    chunk = MemoryChunk(
        id="41",
        content="Deploys \x00 freeze \ue000 on Fridays",
        domain="ops",
        source_type="operator",
        memory_kind="standing",
        delivery_policy="always",
        review_state="confirmed",
        namespace="project:a",
        heading="Deploys \ue000",
        source="runbook.md",
        subject="deploy-freeze",
        epoch="v2",
        invalidated_at=NOW - timedelta(hours=1),
        invalidation_reason="invalidated \x00 by hand",
        expires_at=NOW + timedelta(days=30),
        created_at=NOW - timedelta(days=3),
        updated_at=NOW - timedelta(days=1),
        occurred_at=NOW - timedelta(days=4),
    )
    pg = pg_backend_factory().memories
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as lite:
        for store in (lite, pg):
            assert store.restore_chunks([chunk]) == ["41"]
            assert store.get("41") == chunk
            assert store.list_chunks(namespace="project:a") == [chunk]


@pytest.mark.parametrize("full_text", [False, True])
def test_search_takes_the_spec_s_keywords_on_postgres(pg_backend_factory: Any, full_text: bool) -> None:
    pg = pg_backend_factory().memories
    pg.add_chunks(ROWS)
    hits = pg.search("deploy freeze", namespaces=["project:a"], full_text=full_text)
    assert [h.chunk.content for h in hits] == ["deploy freeze on fridays"]
    assert pg.search("deploy freeze", namespaces=["project:b"]) == []
