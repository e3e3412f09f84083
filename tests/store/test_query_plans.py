"""The read path stays on the right indexes (issue 11), pinned by ``EXPLAIN QUERY PLAN``.

A small store with the statistics ``ANALYZE`` leaves (the store runs it itself once the table
reaches 1,000 rows) and a skewed layout like a real one: most rows in one scope, a few
always-on rows. Left to itself the planner drove the search legs and the always-on list from
the scope index and read every row in scope; these plans must not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextplane.store import SQLiteKnowledgeStore, legs, sql
from contextplane.store import migrate as m
from tests.store.helpers import HashEmbedder

SCOPES = ["", "project:p0", "session:s1"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteKnowledgeStore]:
    path = tmp_path_factory.mktemp("plans") / "plans.sqlite3"
    with SQLiteKnowledgeStore(path, embedder=HashEmbedder(), vector_index_min_rows=256) as s:
        s.add_chunks(
            {"content": f"note {i} about the deploy window {i % 50}", "namespace": f"project:p{i % 3 and 0}"}
            for i in range(2_400)
        )
        s.add_chunks({"content": f"standing fact {i}", "delivery_policy": "always"} for i in range(20))
        yield s


def plan(store: SQLiteKnowledgeStore, statement: str, params: dict[str, Any]) -> list[str]:
    return [str(r[3]) for r in store.conn.execute("EXPLAIN QUERY PLAN " + statement, params)]


def search_params(exact: bool) -> tuple[str, dict[str, Any]]:
    params: dict[str, Any] = {"k": 20, "n": 80, "nc": 160, "q": '"deploy"', "ideal": 1.0, "probes": 8, "chance": 0.0}
    params["v"] = b"\0" * 4 * 64
    clauses: list[str] = []
    sql.scope_filter(SCOPES, params, clauses)
    sql.deliverable_filter(False, None, params, clauses)
    return " AND ".join(clauses), params


def test_the_store_analyzed_itself(store: SQLiteKnowledgeStore) -> None:
    stats = dict(store.conn.execute("SELECT idx, stat FROM sqlite_stat1 WHERE tbl = 'chunks'").fetchall())
    assert {"chunks_always", "chunks_namespace"} <= set(stats)
    assert m.meta_get(store.conn, m.ANALYZED_ROWS) is not None


def test_always_on_list_reads_by_policy_and_scope(store: SQLiteKnowledgeStore) -> None:
    statement, params = sql.list_sql(
        deliverable=True, memory_kind=None, review_state=None, delivery_policy="always",
        namespace=None, namespaces=SCOPES, limit=None, now=None,
    )
    steps = plan(store, statement, params)
    assert any("USING INDEX chunks_always (namespace=?)" in s for s in steps), steps
    assert not any("chunks_namespace" in s for s in steps), steps


@pytest.mark.parametrize("exact", [False, True], ids=["fast", "exact"])
@pytest.mark.parametrize("leg", ["fts", "vector"])
def test_search_drives_from_the_legs_not_the_scope_index(store: SQLiteKnowledgeStore, exact: bool, leg: str) -> None:
    """The statements ``search`` runs (``store.legs``): the full-text leg and the vector leg's
    index form are driven by their own candidates, never by the scope index."""
    where, params = search_params(exact)
    fast, exact_form = legs.fts_statements(where) if leg == "fts" else legs.vector_statements(where)
    steps = plan(store, exact_form if exact else fast, params)
    # every read of a memory row is by its id
    chunk_reads = [s for s in steps if re.match(r"(SCAN|SEARCH) c( |$)", s)]
    assert chunk_reads and all(s == "SEARCH c USING INTEGER PRIMARY KEY (rowid=?)" for s in chunk_reads), steps
    assert not any("chunks_namespace" in s or "chunks_always" in s for s in steps), steps
    if leg == "fts":  # the full-text leg is a MATCH scan
        assert any(s.startswith("SCAN chunks_fts VIRTUAL TABLE INDEX 0:M") for s in steps), steps
    else:  # the vector leg reads each probed list as one key range
        assert "SEARCH cv USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in steps, steps


def test_the_vector_scan_reads_each_row_s_vector_by_its_id(store: SQLiteKnowledgeStore) -> None:
    """The scan form compares every row the filters admit (the planner may take the scope index
    or, as here where one scope holds nearly every row, the table): each row's vector is read by
    its unique chunk id, never by scanning the vector table."""
    filters = sql.search_filters(SCOPES)
    steps = plan(store, legs.scan_statement(filters.scan_where), {**filters.params, "v": b"\0" * 4 * 64, "n": 80})
    assert any(s.startswith("SEARCH cv USING INDEX") and "chunk_id=?" in s for s in steps), steps
    assert not any(s.startswith("SCAN cv") for s in steps), steps


def test_read_indexes_step_is_idempotent(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "s.sqlite3") as s:
        assert m.meta_get(s.conn, m.READ_INDEXES) is not None
        assert m.ensure_read_indexes(s.conn) is False
        s.conn.execute("DELETE FROM _kb_meta WHERE key = ?", (m.READ_INDEXES,))
        assert m.ensure_read_indexes(s.conn) is True  # IF NOT EXISTS: re-running creates nothing twice
        names = [r[0] for r in s.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")]
        assert names.count("chunks_always") == 1
