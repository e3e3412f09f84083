"""Version-1 -> version-2 migration: the D4 table, the D7 review-state backfill, markers,
resumption after a kill, dry-run counts and the FTS trigger fix."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
import pytest

from contextplane.memory import legacy_kind_and_policy
from contextplane.memory.consolidation import content_hash
from contextplane.memory.history import HISTORY_START
from contextplane.memory.trust import initial_review_state, trust_tier
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store import history as store_history
from contextplane.store import migrate as m
from contextplane.store.sqlite import connect
from tests.store.helpers import make_v1_store

DOMAINS = ["hot", "preferences", "general", "finding", "fact", "conversation", "loop-lessons", "notes", "Hot"]
SOURCES = [
    "operator",
    "manual",
    "extracted",
    "harvest",
    "conversation",
    "chat",
    "ingest",
    "",
    "weird",
    "Conversation",
]

# (domain, source_type) -> (memory_kind, delivery_policy) exactly as ADR D4's table says
EXPECTED_TABLE = {
    ("hot", "operator"): ("standing", "always"),
    ("hot", ""): ("standing", "always"),
    ("preferences", "chat"): ("profile", None),
    ("general", "conversation"): ("note", None),
    ("general", "Conversation"): ("reference", None),  # provenance is matched exactly
    ("general", "ingest"): ("reference", None),
    ("general", ""): ("reference", None),
    ("general", "operator"): ("reference", None),
    ("finding", "extracted"): ("fact", None),
    ("fact", ""): ("fact", None),
    ("conversation", "chat"): ("note", None),
    ("loop-lessons", "operator"): ("legacy", None),
    ("notes", ""): ("legacy", None),
    ("Hot", ""): ("legacy", None),
}


def _rows(count: int) -> list[tuple[str, str, str]]:
    return [
        (
            f"memory number {i} about {DOMAINS[i % len(DOMAINS)]}",
            DOMAINS[i % len(DOMAINS)],
            SOURCES[i % len(SOURCES)],
        )
        for i in range(count)
    ]


def _expected(domain: str, source_type: str) -> tuple[str, str | None, str]:
    kind, policy = legacy_kind_and_policy(domain, source_type)
    return kind, policy, initial_review_state(trust_tier(source_type))


def _assert_fully_migrated(path: Path, rows: list[tuple[str, str, str]]) -> None:
    conn = apsw.Connection(str(path))
    stored = conn.execute(
        "SELECT id, content, domain, source_type, memory_kind, delivery_policy, review_state FROM chunks ORDER BY id"
    ).fetchall()
    assert len(stored) == len(rows), "a row was lost or doubled"
    for (content, domain, source), (_id, s_content, s_domain, s_source, kind, policy, review) in zip(
        rows, stored, strict=True
    ):
        assert (s_content, s_domain, s_source) == (content, domain, source)
        assert (kind, policy, review) == _expected(domain, source), (domain, source)
    # schema 3: the history starts at the migration without an event written per row; each row
    # reads as one ``migrated`` event at the start, with its backfilled review state; every row
    # keyed by its content hash
    assert conn.execute("SELECT count(*) FROM chunk_log").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM chunks WHERE history IS NOT NULL").fetchone() == (0,)
    for chunk_id, *_, review in stored:
        events = store_history.events(conn, chunk_id)
        assert [(e.seq, e.event, e.review_state) for e in events] == [(HISTORY_START, "migrated", review)]
    hashes = conn.execute("SELECT content, content_hash FROM chunks").fetchall()
    assert all(h == content_hash(c) for c, h in hashes)
    markers = dict(conn.execute("SELECT key, value FROM _kb_meta"))
    assert m.TYPED_MEMORY_BACKFILL in markers and m.REVIEW_STATE_BACKFILL in markers
    assert m.HISTORY_BACKFILL in markers and m.CONTENT_HASH_BACKFILL in markers
    assert not any(key.endswith("_cursor") for key in markers)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == m.SCHEMA_VERSION
    conn.close()


@pytest.mark.parametrize(("pair", "expected"), list(EXPECTED_TABLE.items()))
def test_full_backfill_table(tmp_path: Path, pair: tuple[str, str], expected: tuple[str, str | None]) -> None:
    path = tmp_path / "v1.sqlite3"
    make_v1_store(path, [("content", *pair)])
    with SQLiteKnowledgeStore(path) as store:
        chunk = store.get("1")
    assert chunk is not None
    assert (chunk.memory_kind, chunk.delivery_policy) == expected
    assert chunk.domain == pair[0]  # the legacy column is kept and still readable


def test_migration_of_every_combination(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    rows = _rows(len(DOMAINS) * len(SOURCES) * 3)
    make_v1_store(path, rows)
    batches: list[tuple[int, int]] = []
    SQLiteKnowledgeStore(
        path, on_migrate_batch=lambda d, t: batches.append((d, t)), migrate_batch_rows=50
    ).close()
    _assert_fully_migrated(path, rows)
    # A version-1 store: the v2 passes and the content key in one row pass (a small store is
    # keyed at open), the history started without one.
    n = len(rows)
    assert len(batches) == -(-n // 50) and batches[-1] == (n, n)
    assert [d for d, _ in batches] == sorted(d for d, _ in batches) and {t for _, t in batches} == {n}
    # the backfill runs once: reopening visits nothing
    again: list[tuple[int, int]] = []
    SQLiteKnowledgeStore(path, on_migrate_batch=lambda d, t: again.append((d, t))).close()
    assert again == []


def test_review_states_from_tier(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    make_v1_store(
        path,
        [
            ("a", "general", "operator"),
            ("b", "general", "chat"),
            ("c", "general", ""),
            ("d", "general", "ingest"),
            ("e", "general", "manual"),
        ],
    )
    with SQLiteKnowledgeStore(path) as store:
        assert [c.review_state for c in store.list_chunks()] == [
            "confirmed",
            "pending",
            "pending",
            "pending",
            "confirmed",
        ]


def test_fresh_database_is_stamped_without_scanning(tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite3"
    calls: list[int] = []
    conn = connect(path)
    result = m.ensure_schema(conn, str(path), on_batch=lambda d, t: calls.append(d))
    assert result.created and result.rows_visited == 0 and calls == []
    for name in m.PASSES:
        assert (m.meta_get(conn, name) or "").startswith("fresh ")
    assert m.schema_version(conn) == m.SCHEMA_VERSION
    conn.close()


def test_only_null_cells_are_filled(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    make_v1_store(path, [("pre-set", "hot", "chat"), ("empty", "hot", "chat")])
    conn = apsw.Connection(str(path))
    for name, decl in m.V2_COLUMNS:
        conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {decl}")
    conn.execute(
        "UPDATE chunks SET memory_kind = 'decision', delivery_policy = 'on_demand', review_state = 'rejected' "
        "WHERE id = 1"
    )
    conn.close()
    with SQLiteKnowledgeStore(path) as store:
        preset, empty = store.get("1"), store.get("2")
    assert preset is not None and empty is not None
    assert (preset.memory_kind, preset.delivery_policy, preset.review_state) == (
        "decision",
        "on_demand",
        "rejected",
    )
    assert (empty.memory_kind, empty.delivery_policy, empty.review_state) == ("standing", "always", "pending")


def test_review_pass_runs_alone_when_only_its_marker_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    make_v1_store(path, [("a", "finding", "operator"), ("b", "finding", "chat")])
    SQLiteKnowledgeStore(path).close()
    conn = apsw.Connection(str(path))  # as if migrated by code that predates the D7 amendment
    conn.execute("DELETE FROM _kb_meta WHERE key = 'review_state_backfill'")
    conn.execute("UPDATE chunks SET review_state = NULL, memory_kind = 'episode' WHERE id = 2")
    conn.close()
    conn = connect(path)
    result = m.ensure_schema(conn, str(path))
    conn.close()
    assert result.passes_run == (m.REVIEW_STATE_BACKFILL,)
    with SQLiteKnowledgeStore(path) as store:
        b = store.get("2")
    assert b is not None and (b.review_state, b.memory_kind) == ("pending", "episode")


def test_v1_fts_trigger_is_replaced_and_fts_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    make_v1_store(path, [("the quick brown fox", "general", "")])
    with SQLiteKnowledgeStore(path) as store:
        triggers = dict(store.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"))
        assert "chunks_au" not in triggers
        assert "AFTER UPDATE OF content, heading ON chunks" in triggers["chunks_fts_au"]
        assert [h.chunk.id for h in store.search("fox")] == ["1"]
        store.conn.execute("UPDATE chunks SET content = 'a lazy dog' WHERE id = 1")
        assert store.search("fox") == [] and [h.chunk.id for h in store.search("dog")] == ["1"]


def test_v1_fts_index_is_kept_not_rebuilt(tmp_path: Path) -> None:
    # Rebuilding a 1M-row FTS index would dominate the migration; an equivalent v1 definition
    # (whitespace aside) is kept. Proof: a row v1 never indexed stays unindexed.
    path = tmp_path / "v1.sqlite3"
    make_v1_store(
        path,
        [("indexed row", "general", "")],
        extra_sql="DROP TRIGGER chunks_ai; INSERT INTO chunks(content, created_at, updated_at) "
        "VALUES ('never indexed', '2025-01-01T00:00:00.000000Z', '2025-01-01T00:00:00.000000Z');",
    )
    conn = connect(path)
    try:
        m.ensure_schema(conn, str(path))
        matches = conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'indexed'").fetchall()
        assert matches == [(1,)]
        assert conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'never'").fetchall() == []
    finally:
        conn.close()
    # The stemming step (a separate, later step: issue 11) rebuilds the index from the rows.
    with SQLiteKnowledgeStore(path) as store:
        assert sorted(h.chunk.id for h in store.search("indexed")) == ["1", "2"]


def test_v1_without_fts_gets_one_built(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    make_v1_store(
        path,
        [("searchable legacy row", "general", "")],
        extra_sql="DROP TRIGGER chunks_ai; DROP TRIGGER chunks_ad; DROP TRIGGER chunks_au; DROP TABLE chunks_fts;",
    )
    with SQLiteKnowledgeStore(path) as store:
        assert [h.chunk.id for h in store.search("legacy")] == ["1"]


def test_dry_run_counts_per_mapping_row_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    rows = [("x", "hot", "")] * 3 + [("x", "general", "conversation")] * 2 + [("x", "general", "ingest")]
    rows += [("x", "weird", "operator")] * 4
    make_v1_store(path, rows)
    conn = connect(path, create=False)
    report = m.dry_run(conn)
    counts = {r.label: r.rows for r in report.mapping}
    assert counts == {
        "hot": 3,
        "preferences": 0,
        "general/conversation": 2,
        "general/other": 1,
        "finding": 0,
        "fact": 0,
        "conversation": 0,
        "anything else": 4,
    }
    assert dict(report.review_states) == {"confirmed": 4, "pending": 6}
    assert report.schema_version == 1 and report.total_rows == 10
    assert "memory_kind" not in m.column_names(conn, "chunks")
    conn.close()


_KILL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from contextplane.store import migrate
    from contextplane.store.sqlite import connect

    path, mode, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    conn = connect(path)
    def die():
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "between":
        batches = 0
        def on_batch(done, total):
            global batches
            batches += 1
            if batches == limit:
                die()
        migrate.ensure_schema(conn, path, on_batch=on_batch, batch_rows=100)
    else:  # "inside": die in the middle of a batch's UPDATE, before its COMMIT
        updates = 0
        def hook(op, db, table, rowid):
            global updates
            if table == "chunks":
                updates += 1
                if updates == limit:
                    die()
        conn.set_update_hook(hook)
        migrate.ensure_schema(conn, path, batch_rows=100)
    print("finished without being killed")
    """
)


@pytest.mark.parametrize(("mode", "limit", "committed"), [("between", 3, 300), ("inside", 250, 200)])
def test_migration_killed_mid_way_resumes_without_loss(
    tmp_path: Path, mode: str, limit: int, committed: int
) -> None:
    path = tmp_path / "v1.sqlite3"
    rows = _rows(1000)
    make_v1_store(path, rows)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_SCRIPT, str(path), mode, str(limit)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -9, proc.stdout + proc.stderr
    # the kill really happened part-way: some batches committed, no marker written
    conn = apsw.Connection(str(path))
    assert (
        conn.execute("SELECT count(*) FROM chunks WHERE memory_kind IS NOT NULL").fetchone()[0] == committed
    )
    assert (
        conn.execute("SELECT count(*) FROM _kb_meta WHERE key = 'typed_memory_backfill'").fetchone()[0] == 0
    )
    conn.close()
    visited: list[int] = []
    SQLiteKnowledgeStore(
        path, on_migrate_batch=lambda d, t: visited.append(t), migrate_batch_rows=100
    ).close()
    # resumed from the cursor, not from scratch (one row pass: the content key rides along)
    assert visited and visited[0] == len(rows) - committed
    _assert_fully_migrated(path, rows)
    with SQLiteKnowledgeStore(path) as store:
        assert len(store.search("memory", k=2000)) == len(rows)  # FTS intact: nothing doubled


def test_version_refusal_names_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    with pytest.raises(
        Exception, match=r"schema version 7, but this contextplane understands schema version 5"
    ):
        SQLiteKnowledgeStore(path)
