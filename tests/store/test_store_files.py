"""Bad store files never break a store or lose a byte (issue 10, "Migration and store files"):
v1 tables of the shapes the ADR's system wrote, ids of 0 and below, another application's
database, a newer schema, a full disk, a read-only file, a corrupt page, a chunks table of
another shape. Each test builds its own file and checks the error text, or the result and
that nothing that should be untouched changed."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from contextplane.backends.sqlite import SQLiteBackend, SQLiteInjectionLog
from contextplane.errors import StoreError
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store import connection as store_connection
from contextplane.store import migrate as m
from contextplane.store import sqlite as store_sqlite

#: The chunks table exactly as the ADR's system had it: no subject, no AUTOINCREMENT, and a
#: finding_type column of its own.
ADR_V1_SQL = """
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    content TEXT NOT NULL,
    domain TEXT NOT NULL DEFAULT 'general',
    heading TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT '',
    source_type TEXT NOT NULL DEFAULT '',
    finding_type TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    namespace TEXT NOT NULL DEFAULT '',
    invalidated_at TEXT,
    epoch TEXT NOT NULL DEFAULT '',
    invalidation_reason TEXT
)
"""
T = "2025-03-01T00:00:00Z"
ADR_ROWS = [
    (-4, "standing rule: deploys need a ticket", "hot", "operator", None),
    (0, "we talked about the deploy window", "general", "conversation", "observation"),
    (3, "the deploy window is Tuesday", "finding", "extracted", "fact"),
    (9, "loop lesson: retry twice", "loop-lessons", "", None),
]


def make_adr_store(path: Path, rows=ADR_ROWS) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(ADR_V1_SQL)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO chunks(id, content, domain, source_type, finding_type, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(*r, T, T) for r in rows],
    )
    conn.execute("COMMIT")
    conn.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def journal_mode(path: Path) -> str:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


def exercise(store: SQLiteKnowledgeStore) -> None:
    """Every public read and write of a migrated store, each checked, its schema-3 history too:
    every row, ids of 0 and below included, starts with one ``migrated`` event."""
    ids = [c.id for c in store.list_chunks()]
    assert ids == ["-4", "0", "3", "9"]
    for chunk_id in ids:
        events = store.history(chunk_id)
        assert [e.event for e in events] == ["migrated"], (chunk_id, events)
        assert events[0].review_state == store.get(chunk_id).review_state  # type: ignore[union-attr]
    before = store.history_position()
    hot = store.get("-4")
    assert hot is not None and (hot.memory_kind, hot.delivery_policy, hot.review_state) == (
        "standing",
        "always",
        "confirmed",
    )
    assert [c.id for c in store.list_chunks(deliverable=True, delivery_policy="always")] == ["-4"]
    # stemmed full text (issue 11): "deploys" in row -4 matches "deploy"
    assert {h.chunk.id for h in store.search("deploy window")} == {"-4", "0", "3"}
    new = store.add_chunk("a fresh memory about deploys", source_type="operator")
    assert int(new) == 10  # after the largest id, never reusing one
    assert store.set_review_state("0", "confirmed").review_state == "confirmed"
    successor = store.supersede("3", "the deploy window moved to Wednesday")
    assert store.get("3").superseded_by == successor  # type: ignore[union-attr]
    assert store.set_expires_at("-4", "2099-01-01T00:00:00Z").expires_at is not None
    assert store.invalidate_chunk("9", reason="obsolete").invalidation_reason == "obsolete"
    assert store.purge() == 1
    assert [c.id for c in store.list_chunks()] == ["-4", "0", "3", "10", "11"]
    assert {i: [e.event for e in store.history(i)] for i in ("-4", "0", "3", "9", "10")} == {
        "-4": ["migrated", "expiry"],
        "0": ["migrated", "review"],
        "3": ["migrated", "superseded"],
        "9": ["migrated", "invalidated", "purged"],
        "10": ["created"],
    }
    with store.as_of(before) as past:  # the store as the migration left it (9's text is gone)
        assert [c.id for c in past.list_chunks()] == ["-4", "0", "3"]
        assert past.overlay.purged_after == ("9",) and past.overlay.written_after == ("10", "11")
        assert past.get("0").review_state == "pending"  # type: ignore[union-attr]
        assert past.get("3").superseded_by is None  # type: ignore[union-attr]


def test_the_adr_systems_v1_shape_migrates_and_every_api_works(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    make_adr_store(path)
    with SQLiteKnowledgeStore(path) as store:
        exercise(store)
    conn = apsw.Connection(str(path))
    assert {k for (k,) in conn.execute("SELECT key FROM _kb_meta")} >= set(m.PASSES)
    # Nothing of the old rows is lost, their own column included.
    assert conn.execute("SELECT id, finding_type FROM chunks WHERE id <= 3 ORDER BY id").fetchall() == [
        (-4, None),
        (0, "observation"),
        (3, "fact"),
    ]
    assert "AUTOINCREMENT" in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks'").fetchone()[0]
    conn.close()
    # A second open (a second `migrate`) has nothing left to do.
    conn = store_connection.connect(path)
    assert not m.ensure_schema(conn, str(path)).changed
    conn.close()


def test_a_store_an_earlier_migration_stamped_without_fixing_its_shape_is_repaired(tmp_path: Path) -> None:
    # What the earlier migration left: the v2 columns added, both markers stamped, rows with
    # ids of 0 and below never backfilled, no subject column, no AUTOINCREMENT.
    path = tmp_path / "stamped.sqlite3"
    make_adr_store(path)
    conn = apsw.Connection(str(path))
    for name, decl in m.V2_COLUMNS:
        conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {decl}")
    conn.execute("CREATE TABLE _kb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.executemany("INSERT INTO _kb_meta VALUES (?, 'old')", [(p,) for p in m.PASSES])
    conn.execute(
        f"UPDATE chunks SET memory_kind = {m.KIND_CASE_SQL}, delivery_policy = {m.POLICY_CASE_SQL}, "
        f"review_state = {m.REVIEW_CASE_SQL} WHERE id > 0"
    )
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    conn = store_connection.connect(path)
    result = m.ensure_schema(conn, str(path))
    conn.close()
    # The v2 passes stay done (stamped); only schema 3's run, over every row, ids <= 0 included.
    assert result.passes_run == m.V3_PASSES and result.changed
    assert result.normalised == (
        "rewrote the chunks table in the v2 shape, keeping every id: its ids have no AUTOINCREMENT (a "
        "purged id could be handed out again)",
        "backfilled 2 rows with an id of 0 or below",
    )
    with SQLiteKnowledgeStore(path) as store:
        exercise(store)


def test_rows_an_earlier_schema_3_migration_skipped_get_their_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A migration whose passes started at id 0 (as both the v2 and the v3 passes once did)
    # stamps every pass done without visiting the rows with ids of 0 and below.
    path = tmp_path / "skipped.sqlite3"
    make_adr_store(path)

    def from_zero(conn: apsw.Connection, passes: tuple[str, ...]) -> int:
        return min(int(m.meta_get(conn, f"{p}_cursor") or 0) for p in passes)

    monkeypatch.setattr(m, "_pass_start", from_zero)
    monkeypatch.setattr(m, "repair_nonpositive_ids", lambda _conn: 0)  # that migration had none
    SQLiteKnowledgeStore(path).close()
    monkeypatch.undo()
    conn = apsw.Connection(str(path))
    assert conn.execute("SELECT count(*) FROM chunk_log WHERE chunk_id <= 0").fetchone() == (0,)
    conn.close()
    conn = store_connection.connect(path)
    result = m.ensure_schema(conn, str(path))
    conn.close()
    assert result.passes_run == () and result.normalised == ("backfilled 2 rows with an id of 0 or below",)
    conn = apsw.Connection(str(path))
    assert conn.execute("SELECT count(*) FROM chunks WHERE content_hash IS NULL").fetchone() == (0,)
    conn.close()
    with SQLiteKnowledgeStore(path) as store:
        exercise(store)


@pytest.mark.parametrize("ids", [(-7, -1, 0, 1), (0,), (-3,)])
def test_rows_with_ids_of_zero_and_below_are_backfilled(tmp_path: Path, ids: tuple[int, ...]) -> None:
    path = tmp_path / "ids.sqlite3"
    conn = apsw.Connection(str(path))
    conn.execute(m.V1_SCHEMA_SQL)
    conn.executemany(
        "INSERT INTO chunks(id, content, domain, source_type, created_at, updated_at) VALUES (?,?,?,?,?,?)",
        [(i, f"row {i}", "hot", "operator", T, T) for i in ids],
    )
    conn.close()
    SQLiteKnowledgeStore(path, migrate_batch_rows=1).close()
    conn = apsw.Connection(str(path))
    assert conn.execute("SELECT id, memory_kind, delivery_policy, review_state FROM chunks ORDER BY id").fetchall() == [
        (i, "standing", "always", "confirmed") for i in ids
    ]
    conn.close()


def test_another_applications_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users(name) VALUES ('ann')")
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
    conn.close()
    before = digest(path)
    message = (
        f"{path}: this SQLite database belongs to something else (its tables: orders, users), so "
        "contextplane will not add its tables to it or change it; point --db, store.path or "
        "$CONTEXTPLANE_DB at a contextplane store or at a new file"
    )
    for opener in (SQLiteKnowledgeStore, SQLiteInjectionLog, SQLiteBackend):
        with pytest.raises(StoreError) as caught:
            opener(path)
        assert str(caught.value) == message
    assert digest(path) == before and journal_mode(path) == "delete"
    assert not Path(f"{path}-wal").exists()
    # An empty database is nobody's: it becomes a store.
    empty = tmp_path / "empty.db"
    apsw.Connection(str(empty)).execute("PRAGMA user_version = 0").fetchall()
    with SQLiteKnowledgeStore(empty) as store:
        assert store.list_chunks() == []


def test_a_newer_schema_is_refused_before_its_journal_mode_changes(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY, content TEXT); PRAGMA user_version = 6")
    conn.close()
    before = digest(path)
    with pytest.raises(StoreError, match=r"schema version 6, but this contextplane understands schema version 5"):
        SQLiteKnowledgeStore(path)
    with pytest.raises(StoreError, match=r"schema version 6"):
        store_connection.connect(path, read_only=True)
    assert digest(path) == before and journal_mode(path) == "delete"


def test_a_dry_run_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    make_adr_store(path)
    before = digest(path)
    conn = store_connection.connect(path, create=False, read_only=True)
    report = m.dry_run(conn, str(path))
    conn.close()
    assert report.total_rows == 4 and report.pending == (*m.PASSES, *m.V3_PASSES)
    assert report.schema_changes == (
        "rewrite the chunks table in the v2 shape, keeping every id: its ids have no AUTOINCREMENT (a "
        "purged id could be handed out again)",
    )
    assert dict(report.review_states) == {"confirmed": 1, "pending": 3}
    assert {r.label: r.rows for r in report.mapping if r.rows} == {
        "hot": 1,
        "general/conversation": 1,
        "finding": 1,
        "anything else": 1,
    }
    assert digest(path) == before and journal_mode(path) == "delete"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "CREATE TABLE chunks (id INTEGER PRIMARY KEY, text TEXT, embedding BLOB)",
            "its chunks table has no content or domain column (its columns: id, text, embedding), so it is "
            "not a contextplane memory table of any version; nothing was changed. Point --db, store.path "
            "or $CONTEXTPLANE_DB at a memory store",
        ),
        (
            "CREATE TABLE chunks (id TEXT PRIMARY KEY, content TEXT, domain TEXT); "
            "INSERT INTO chunks VALUES ('a1', 'x', 'hot'), ('7', 'y', 'hot')",
            "1 rows of its chunks table have an id that is missing, not a whole number or used twice, so "
            "they cannot keep their ids; nothing was changed. Give every row a distinct whole-number id, "
            "then run `contextplane migrate` again",
        ),
    ],
)
def test_a_chunks_table_of_another_shape_is_refused_naming_what_is_wrong(
    tmp_path: Path, sql: str, message: str
) -> None:
    path = tmp_path / "other.sqlite3"
    conn = apsw.Connection(str(path))
    conn.execute(sql)
    conn.close()
    before = digest(path)
    with pytest.raises(StoreError) as caught:
        SQLiteKnowledgeStore(path)
    assert str(caught.value) == f"{path}: {message}"
    assert digest(path) == before


def test_an_id_column_that_is_not_the_rowid_keeps_its_ids(tmp_path: Path) -> None:
    path = tmp_path / "textids.sqlite3"
    conn = apsw.Connection(str(path))
    conn.execute(
        "CREATE TABLE chunks (id TEXT PRIMARY KEY, content TEXT NOT NULL, domain TEXT, source_type TEXT, "
        "tag TEXT NOT NULL); INSERT INTO chunks VALUES ('12', 'twelve', 'hot', 'operator', 't'), "
        "('-2', 'minus two', 'fact', '', 'u')"
    )
    conn.close()
    with SQLiteKnowledgeStore(path) as store:
        assert [(c.id, c.memory_kind) for c in store.list_chunks()] == [("-2", "fact"), ("12", "standing")]
        assert store.search("twelve")[0].chunk.id == "12"
        assert store.add_chunk("thirteen") == "13"  # `tag` was NOT NULL without a default: relaxed


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """While the flag is set, every store connection is capped at the pages it has: SQLite
    answers SQLITE_FULL exactly as on a full disk."""
    on = [True]
    real = store_connection.connect

    def capped(*args, **kwargs):
        conn = real(*args, **kwargs)
        if on[0]:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {max(pages, 2)}").fetchall()
        return conn

    monkeypatch.setattr(store_sqlite, "connect", capped)
    yield on


def test_a_full_disk_is_a_clear_error_and_loses_nothing(tmp_path: Path, full_disk: list[bool]) -> None:
    path = tmp_path / "full.sqlite3"
    full_disk[0] = False
    with SQLiteKnowledgeStore(path) as store:
        store.add_chunks([{"content": f"row {i} " + "x" * 200} for i in range(50)])
    full_disk[0] = True
    with SQLiteKnowledgeStore(path) as store:
        with pytest.raises(StoreError) as caught:
            store.add_chunks([{"content": "y" * 5000} for _ in range(200)])
        assert str(caught.value) == (
            f"{path}: the disk is full (or the database reached its size limit), so the write failed; "
            "nothing is lost (what was not committed was rolled back); free some space and try again"
        )
        assert len(store.list_chunks()) == 50  # all or nothing
        assert store.search("row")  # reads still work


def test_a_migration_on_a_full_disk_stops_cleanly_and_resumes(tmp_path: Path, full_disk: list[bool]) -> None:
    path = tmp_path / "v1.sqlite3"
    rows = [(i, f"memory {i} " + "z" * 300, "hot" if i % 2 else "fact", "operator", None) for i in range(1, 3001)]
    make_adr_store(path, rows)
    with pytest.raises(StoreError) as caught:
        SQLiteKnowledgeStore(path, migrate_batch_rows=500)
    assert str(caught.value) == (
        f"{path}: the disk is full (or the database reached its size limit), so the migration to schema "
        "version 5 (run it again: it resumes where it stopped) failed; nothing is lost (what was not "
        "committed was rolled back); free some space and try again"
    )
    conn = apsw.Connection(str(path))
    assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 3000
    conn.close()
    full_disk[0] = False
    with SQLiteKnowledgeStore(path) as store:
        assert len(store.list_chunks(delivery_policy="always")) == 1500
        assert len(store.list_chunks()) == 3000


def _unwritable(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``path`` read-only; as root (whom permissions do not stop) the check reads the
    permission bits instead, so the store takes the same read-only path."""
    path.chmod(0o444)
    path.parent.chmod(0o555)
    if os.geteuid() == 0:
        monkeypatch.setattr(store_connection, "writable", lambda p: bool(p.stat().st_mode & 0o222))


def test_a_read_only_store_opens_for_reading_and_refuses_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "memory.sqlite3"
    with SQLiteKnowledgeStore(path) as store:
        store.add_chunk("Deploy window: Tuesday", source_type="operator", delivery_policy="always")
    _unwritable(path, monkeypatch)
    before = digest(path)
    try:
        backend = SQLiteBackend(path)
        store = backend.memories
        assert store.read_only
        assert [c.content for c in store.list_chunks()] == ["Deploy window: Tuesday"]
        assert store.search("deploy")[0].chunk.id == "1"
        with pytest.raises(StoreError) as caught:
            store.add_chunk("another")
        assert str(caught.value) == (
            f"{path}: the store is read-only (the file or its directory is not writable), so nothing was "
            "written; make the file and its directory writable, or work on a writable copy"
        )
        from contextplane import compose_projected_context
        from tests.sections.conftest import standard_host

        projection = compose_projected_context(
            "deploy", backend, None, {}, budget_tokens=0, host=standard_host(), record=False
        )
        assert "Deploy window: Tuesday" in projection.text
        assert backend.injections.rows() == [] and backend.snapshots.list() == []
        backend.close()
    finally:
        path.parent.chmod(0o755)
        path.chmod(0o644)
    assert digest(path) == before


def test_a_read_only_store_that_needs_migrating_says_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "v1.sqlite3"
    make_adr_store(path)
    _unwritable(path, monkeypatch)
    try:
        with pytest.raises(StoreError) as caught:
            SQLiteKnowledgeStore(path)
    finally:
        path.parent.chmod(0o755)
        path.chmod(0o644)
    assert str(caught.value) == (
        f"{path}: the store needs migrating (rewrite the chunks table in the v2 shape, keeping every id: its "
        "ids have no AUTOINCREMENT (a purged id could be handed out again); bring it to schema version 5; "
        "run the typed_memory_backfill pass; run the review_state_backfill pass; run the history_backfill "
        "pass; run the content_hash_backfill pass), but it is read-only; run "
        f"`contextplane migrate --db {path}` with write access, or work on a writable copy"
    )


def test_a_corrupt_page_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.sqlite3"
    with SQLiteKnowledgeStore(path) as store:
        store.add_chunks([{"content": f"memory {i} " + "q" * 300} for i in range(2000)])
    size = path.stat().st_size
    with path.open("r+b") as handle:  # one page in the middle of the table, overwritten
        handle.seek((size // 4096 // 2) * 4096)
        handle.write(b"\xff" * 4096)
    with pytest.raises(StoreError) as caught, SQLiteKnowledgeStore(path) as store:
        store.list_chunks()
        store.search("memory", k=2000)
    text = str(caught.value)
    assert text.startswith(f"{path}: the store file is corrupt (database disk image is malformed), so the read failed;")
    assert text.endswith(f"restore it from a backup (`sqlite3 {path} .recover` salvages what it can into a new file)")


def test_migrate_on_a_full_disk_is_one_error_line_and_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from contextplane.cli import main

    path = tmp_path / "v1.sqlite3"
    rows = [(i, f"memory {i} " + "z" * 300, "hot", "operator", None) for i in range(1, 2001)]
    make_adr_store(path, rows)
    real = store_connection.connect

    def capped(*args, **kwargs):
        conn = real(*args, **kwargs)
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}").fetchall()
        return conn

    monkeypatch.setattr(store_connection, "connect", capped)
    res = CliRunner().invoke(main, ["migrate", "--db", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr == (
        f"error: {path}: the disk is full (or the database reached its size limit), so the migration to "
        "schema version 5 (run it again: it resumes where it stopped) failed; nothing is lost (what was not "
        "committed was rolled back); free some space and try again\n"
    )
    monkeypatch.setattr(store_connection, "connect", real)
    res = CliRunner().invoke(main, ["migrate", "--db", str(path)])
    assert res.exit_code == 0 and "migrated from schema version 0 to 5" in res.stdout
    with SQLiteKnowledgeStore(path) as store:
        assert len(store.list_chunks(delivery_policy="always")) == 2000
