"""The lifecycle history of the embedded store: schema 3, the v2 -> v3 migration (resumable, then
every public read and write), append-only events in the change's own transaction, and as-of
reads, including full-text ranking as the corpus stood then."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

from contextplane.errors import StoreError
from contextplane.memory.history import MIGRATION_NOTE, HistoryPosition
from contextplane.store import MemoryHistory, SQLiteKnowledgeStore
from contextplane.store import migrate as m
from contextplane.store.sqlite import connect
from tests.store.helpers import make_v2_store

PAST = "2025-01-01T00:00:00.000000Z"

V2_ROWS = [
    # content, domain, source, kind, policy, review, namespace, subject, expires, invalidated, reason
    (
        "Deploy window is Tuesday",
        "hot",
        "operator",
        "standing",
        "always",
        "confirmed",
        "project:web",
        "deploys",
        None,
        None,
        None,
    ),
    (
        "The migration tool is Flyway",
        "fact",
        "operator",
        "fact",
        None,
        "confirmed",
        "project:web",
        "db",
        None,
        PAST,
        "superseded_by:3",
    ),
    (
        "The migration tool is Alembic",
        "fact",
        "operator",
        "decision",
        None,
        "confirmed",
        "project:web",
        "db",
        None,
        None,
        None,
    ),
    (
        "Deploy any time on Friday",
        "general",
        "extracted",
        "reference",
        None,
        "rejected",
        "project:web",
        "",
        None,
        None,
        None,
    ),
    (
        "Window moved to Wednesday",
        "general",
        "operator",
        "reference",
        None,
        "confirmed",
        "project:web",
        "",
        PAST,
        None,
        None,
    ),
    (
        "A wrong claim about caches",
        "fact",
        "operator",
        "fact",
        None,
        "confirmed",
        "",
        "",
        None,
        PAST,
        "found wrong",
    ),
    (
        "Replica lag spikes during migrations",
        "general",
        "conversation",
        "note",
        None,
        "pending",
        "project:web",
        "",
        None,
        None,
        None,
    ),
]


def _v2(tmp_path: Path) -> Path:
    path = tmp_path / "v2.sqlite3"
    make_v2_store(path, V2_ROWS)
    return path


def test_a_fresh_store_is_created_at_schema_5_with_every_marker(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "fresh.sqlite3") as store:
        assert m.schema_version(store.conn) == m.SCHEMA_VERSION == 5
        for name in (*m.PASSES, *m.V3_PASSES):
            assert (m.meta_get(store.conn, name) or "").startswith("fresh ")
        assert m.table_exists(store.conn, "chunk_log") and m.table_exists(store.conn, "chunk_gone")
        assert not m.table_exists(store.conn, "chunk_history")
        assert {"history", "created_seq"} <= m.column_names(store.conn, "chunks")
        assert m.meta_get(store.conn, m.HISTORY_STARTED_KEY) is None  # nothing predates the history
        assert isinstance(store, MemoryHistory)


def test_v2_store_migrates_and_every_public_read_and_write_works(tmp_path: Path) -> None:
    path = _v2(tmp_path)
    conn = connect(path)
    assert m.dry_run(conn).pending == (m.HISTORY_BACKFILL, m.CONTENT_HASH_BACKFILL)
    result = m.ensure_schema(conn, str(path))
    conn.close()
    assert (result.from_version, result.passes_run, result.added_columns) == (
        2,
        (m.HISTORY_BACKFILL, m.CONTENT_HASH_BACKFILL),
        ("occurred_at", "content_hash", "history", "created_seq"),
    )
    with SQLiteKnowledgeStore(path) as store:
        assert m.schema_version(store.conn) == m.SCHEMA_VERSION == 5
        indexes = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {
            "chunks_content_hash",
            "chunks_subject",
            "chunks_always",  # the one always-on index (issue 11's read path)
        } <= indexes
        assert not [i for i in indexes if "history" in i or "chunk_log" in i]  # no per-row index to keep
        started = m.meta_get(store.conn, m.HISTORY_STARTED_KEY)
        assert started is not None
        # The history starts at the migration and says so: one event per row, the row's state
        # (none written: a row's state then is its first change's before-cells, or the row).
        assert store.conn.execute("SELECT count(*) FROM chunk_log").fetchone() == (0,)
        for i, row in enumerate(V2_ROWS, start=1):
            (event,) = store.history(str(i))
            assert (event.event, event.review_state, event.invalidation_reason) == (
                "migrated",
                row[5],
                row[10],
            )
            assert event.detail["note"] == MIGRATION_NOTE and event.at.isoformat().startswith(started[:19])
        # Reads: get, list (every filter), search (with the audit flag), consistent view.
        assert store.get("3") is not None and store.get("3").memory_kind == "decision"  # type: ignore[union-attr]
        assert [c.id for c in store.list_chunks(deliverable=True)] == ["1", "3", "7"]
        assert [c.id for c in store.list_chunks(delivery_policy="always")] == ["1"]
        assert [c.id for c in store.list_chunks(review_state="pending")] == ["7"]
        assert [c.id for c in store.list_chunks(namespaces=[""])] == ["6"]
        # stemmed full text (issue 11): "migrations" in row 7 matches "migration"
        assert [h.chunk.id for h in store.search("migration tool")] == ["3", "7"]
        assert {h.chunk.id for h in store.search("migration tool", include_superseded=True)} == {"2", "3", "7"}
        with store.consistent_read() as view:
            assert [c.id for c in view.list_chunks(deliverable=True)] == ["1", "3", "7"]
            position = view.history_position()
        # As of a migrated store's history: from the migration on, never before it.
        with store.as_of(position) as then:
            assert [c.id for c in then.list_chunks(deliverable=True)] == ["1", "3", "7"]
        with (
            pytest.raises(
                StoreError, match=r"history of this store starts at .* \(the migration that added it\)"
            ),
            store.as_of(datetime(2025, 6, 1, tzinfo=UTC)),
        ):
            pass
        # Writes: add (and consolidation against a migrated row), bulk, review, expiry,
        # invalidation, supersession, purge; each leaves its event.
        same = store.add_chunk(
            "Replica lag spikes   during migrations", "general", "conversation", namespace="project:web"
        )
        assert same.outcome == "duplicate" and same == "7"  # found by the content key, keyed at open
        assert store.history("7")[-1].event == "consolidated"
        new = store.add_chunk(
            "Deploy window is Thursday",
            "hot",
            "operator",
            memory_kind="standing",
            namespace="project:web",
            subject="deploys",
        )
        assert new.outcome == "superseded" and new.superseded == ("1",)
        assert store.get("1").superseded_by == new  # type: ignore[union-attr]
        bulk = store.add_chunks([{"content": f"bulk {i}", "source_type": "operator"} for i in range(3)])
        assert [b.outcome for b in bulk] == ["stored"] * 3
        store.set_review_state("7", "confirmed", by="curator")
        store.set_expires_at("3", datetime.now(UTC) + timedelta(days=3), by="curator")
        store.invalidate_chunk(bulk[0], reason="test row", by="curator")
        successor = store.supersede("3", "The migration tool is Alembic 1.13")
        assert store.purge() == 3  # expired (5) and invalidated (6, bulk[0]); rejected rows stay
        assert [e.event for e in store.history("3")] == ["migrated", "expiry", "superseded"]
        assert [e.event for e in store.history("6")] == ["migrated", "purged"]
        assert store.history("7")[-1].actor == "curator"
        assert successor in {c.id for c in store.list_chunks(deliverable=True)}
        # The position taken before the writes still reads the store as it was then.
        with store.as_of(position) as then:
            assert [c.id for c in then.list_chunks(deliverable=True)] == ["1", "3", "7"]
            assert then.get("7").review_state == "pending"  # type: ignore[union-attr]
            assert then.get(new) is None
            assert then.overlay is not None and set(then.overlay.purged_after) == {"5", "6"}


def test_v3_backfill_resumes_after_a_crash_between_batches(tmp_path: Path) -> None:
    path = tmp_path / "v2.sqlite3"
    rows = [
        (f"row number {i}", "general", "operator", "reference", None, "confirmed", "", "", None, None, None)
        for i in range(250)
    ]
    make_v2_store(path, rows)
    conn = connect(path)
    m.upgrade_schema(conn)
    m.ensure_v3_schema(conn)
    m.ensure_v4_history(conn)
    calls = 0

    def crash(done: int, total: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt("killed")

    with pytest.raises(KeyboardInterrupt):
        m.run_v3_backfill(conn, on_batch=crash, batch_rows=100)
    # The history started at once, writing no event; two batches of keys committed with their
    # cursor; no marker for the keys.
    assert conn.execute("SELECT count(*) FROM chunk_log").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM chunks WHERE history IS NOT NULL").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM chunks WHERE content_hash IS NULL").fetchone()[0] == 50
    assert m.pending_v3_passes(conn) == [m.CONTENT_HASH_BACKFILL]
    assert m.meta_get(conn, "content_hash_backfill_cursor") == "200"
    started = m.meta_get(conn, m.HISTORY_STARTED_KEY)
    conn.close()
    visited: list[tuple[int, int]] = []
    with SQLiteKnowledgeStore(
        path, on_migrate_batch=lambda d, t: visited.append((d, t)), migrate_batch_rows=100
    ) as store:
        assert visited == [(50, 50)]  # resumed from the cursor
        assert store.conn.execute("SELECT count(*) FROM chunk_log").fetchone()[0] == 0
        assert {e.at for i in (1, 250) for e in store.history(str(i))} == {store.history("1")[0].at}
        assert m.meta_get(store.conn, m.HISTORY_STARTED_KEY) == started
        assert store.conn.execute("SELECT count(*) FROM chunks WHERE content_hash IS NULL").fetchone()[0] == 0
        assert m.pending_v3_passes(store.conn) == []


def test_history_is_append_only(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        cid = store.add_chunk("kiwi", "fact", "operator")
        store.set_review_state(cid, "rejected", by="priya")
        store.set_expires_at(store.add_chunk("gone soon", "fact", "operator"), "2000-01-01T00:00:00Z")
        assert store.purge() == 1
        for table, column in (("chunk_log", "at"), ("chunk_gone", "purged_at")):
            for sql in (f"UPDATE {table} SET {column} = 'x'", f"DELETE FROM {table}"):
                with pytest.raises(apsw.ConstraintError, match=f"{table} is append-only"):
                    store.conn.execute(sql)
        for sql in (
            "UPDATE chunks SET history = NULL",
            "UPDATE chunks SET history = 'rewritten' || char(10)",
            "UPDATE chunks SET history = substr(history, 2)",
        ):
            with pytest.raises(apsw.ConstraintError, match=r"chunks\.history is append-only"):
                store.conn.execute(sql)
        with pytest.raises(apsw.ConstraintError, match="deleted only by purge"):
            store.conn.execute("DELETE FROM chunks")
        assert [(e.event, e.actor) for e in store.history(cid)] == [("created", "operator"), ("review", "priya")]


def test_a_change_that_fails_appends_no_event(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        old = store.add_chunk("kiwi one", "fact", "operator")
        store.invalidate_chunk(old, reason="wrong", by="curator")
        before = store.history_position()
        with pytest.raises(StoreError, match="already invalidated"):
            store.supersede(old, "kiwi two")
        with pytest.raises(StoreError, match="already invalidated"):
            store.invalidate_chunk(old, reason="again")
        assert store.history_position().seq == before.seq
        assert store.get("2") is None  # the supersede's insert rolled back with it


def test_review_history_names_who_and_keeps_each_state(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        cid = store.add_chunk("kiwi agent note", "general", "extracted")
        store.set_review_state(cid, "confirmed", by="priya")
        store.set_review_state(cid, "rejected", by="sam")
        events = store.history(cid)
        assert [(e.event, e.review_state, e.actor) for e in events] == [
            ("created", "pending", "extracted"),
            ("review", "confirmed", "priya"),
            ("review", "rejected", "sam"),
        ]
        assert events[1].describe().endswith("review state set to confirmed (by priya)")
        with pytest.raises(Exception, match=r"^by: expected text"):
            store.set_review_state(cid, "pending", by=7)  # type: ignore[arg-type]


def test_as_of_ranks_as_the_corpus_stood_then(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        a = store.add_chunk("alpha alpha notes", "general", "operator")
        b = store.add_chunk("beta notes here", "general", "operator")
        position = store.history_position()
        then = [h.chunk.id for h in store.search("alpha beta", 2)]
        assert then == [a, b]
        # Many rows holding "alpha" make it a common word: BM25 now ranks the "beta" row first.
        store.add_chunks([{"content": f"alpha filler {i}", "review_state": "rejected"} for i in range(60)])
        assert [h.chunk.id for h in store.search("alpha beta", 2)] == [b, a]
        with store.as_of(position) as view:
            assert [h.chunk.id for h in view.search("alpha beta", 2)] == then
            assert (
                view.overlay is not None
                and view.overlay.exact_ranking
                and len(view.overlay.written_after) == 60
            )
        with store.as_of(position, exact_ranking=False) as view:
            assert [h.chunk.id for h in view.search("alpha beta", 2)] == [
                b,
                a,
            ]  # hidden, but still weighing in
            assert view.overlay is not None and not view.overlay.exact_ranking


def test_as_of_refuses_a_position_from_the_future_and_bad_values(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        store.add_chunk("kiwi", "fact", "operator")
        with (
            pytest.raises(StoreError, match=r"history position 99 is after the latest event \(1\)"),
            store.as_of(HistoryPosition(99, datetime.now(UTC))),
        ):
            pass
        with (
            pytest.raises(
                Exception, match=r"as_of: expected a HistoryPosition or an aware datetime, got str"
            ),
            store.as_of("yesterday"),
        ):  # type: ignore[arg-type]
            pass


def test_in_memory_store_as_of_works_on_a_copy(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(":memory:") as store:
        a = store.add_chunk("kiwi one", "fact", "extracted")
        position = store.history_position()
        store.set_review_state(a, "rejected")
        with store.as_of(position) as view:
            assert [c.id for c in view.list_chunks(deliverable=True)] == [a]
        assert store.list_chunks(deliverable=True) == []


def test_the_migrate_command_upgrades_a_v2_store(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from contextplane.cli import main

    path = _v2(tmp_path)
    dry = CliRunner().invoke(main, ["migrate", "--dry-run", "--db", str(path)])
    assert (
        dry.exit_code == 0
        and "schema version 2 -> 5; 7 rows; pending passes: history_backfill, content_hash_backfill"
        in dry.output
    )
    done = CliRunner().invoke(main, ["migrate", "--db", str(path)])
    assert done.exit_code == 0
    assert (
        "migrated from schema version 2 to 5; passes history_backfill, content_hash_backfill; 7 rows"
        in done.output
    )
    again = CliRunner().invoke(main, ["migrate", "--db", str(path)])
    assert "already at schema version 5; nothing to do" in again.output
