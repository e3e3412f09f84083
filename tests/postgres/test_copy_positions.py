"""``store copy`` keeps the embedded store's history positions: a turn recorded on the file
names its position by seq, and every row of one write batch has that batch's seq there (a
migrated row's ``migrated`` event is implied, at seq 0). Kept as they are (``chunk_history`` is
keyed by (seq, chunk_id), schema step 5), a recorded turn's position names the same state on
PostgreSQL: ``explain`` and ``replay`` answer after the copy as they did on the file before it.
Also: the walk the copy reads the file's events by, and a version-3 file refused until
``contextplane migrate`` has converted it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import psycopg
import pytest
from click.testing import CliRunner

from contextplane import PluginHost, compose_projected_context
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.cli import main
from contextplane.config import structure
from contextplane.errors import StoreError
from contextplane.explain.replay import replay
from contextplane.explain.verdict import explain
from contextplane.memory.history import HistoryPosition
from contextplane.store import SQLiteKnowledgeStore, history, migrate
from contextplane_postgres import PostgresBackend
from contextplane_postgres.copy import copy_store, cursor_key
from contextplane_postgres.database import Database
from tests.store.helpers import make_v2_store

QUESTION = "when is the kiwi deploy window?"


def _host() -> PluginHost:
    return PluginHost.from_entry_points(structure({"context": {"context_window": 200_000}}))


def _turn(backend: Any, host: PluginHost, index: int) -> Any:
    return compose_projected_context(
        QUESTION, backend, None, {}, session_id="s1", turn_index=index, host=host
    )


def _answers(backend: Any, host: PluginHost, ids: dict[str, str]) -> dict[str, Any]:
    """What explain and replay say about the recorded turns, as plain data."""
    out: dict[str, Any] = {}
    for index in (1, 2):
        for name, memory_id in ids.items():
            verdict = explain(memory_id, backend=backend, host=host, session_id="s1", turn_index=index)
            out[f"turn {index}: {name}"] = (verdict.verdict, verdict.reason, verdict.turn["history_position"])
        report = replay(backend, "s1", index, host=host)
        out[f"turn {index}: replay"] = (report.mode, report.identical, report.history_position.seq)
    return out


def test_a_recorded_turn_names_the_same_state_after_the_copy(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    src = tmp_path / "memory.sqlite3"
    host = _host()
    sqlite = SQLiteBackend(src)
    try:
        m = sqlite.memories
        window, lunch, plants = m.add_chunks(  # one write batch: one seq for the three rows
            {"content": c, "domain": "fact", "source_type": "operator"}
            for c in (
                "the kiwi deploy window is Tuesday afternoon",
                "lunch is at noon on Fridays",
                "the office plants need water",
            )
        )
        first = _turn(sqlite, host, 1)
        assert window in first.delivered_ids.get("retrieved", ()), first.delivered_ids
        moved, staging = m.add_chunks(  # the next batch, at the next seq
            {"content": c, "domain": "fact", "source_type": "operator"}
            for c in ("the kiwi deploy window moved to Thursday", "staging is read only this week")
        )
        m.set_review_state(window, "rejected", by="curator")
        second = _turn(sqlite, host, 2)
        assert moved in second.delivered_ids.get("retrieved", ()), second.delivered_ids
        batch = m.history(window)[0].seq
        assert {m.history(i)[0].seq for i in (window, lunch, plants)} == {batch}
        assert {m.history(i)[0].seq for i in (moved, staging)} == {batch + 1}
        recorded = [sqlite.snapshots.get_inputs("s1", i).history_seq for i in (1, 2)]  # type: ignore[union-attr]
        assert recorded == [batch, batch + 2]  # turn 1 at the first batch's shared seq
        ids = {"window": window, "moved": moved, "lunch": lunch}
        before = _answers(sqlite, host, ids)
    finally:
        sqlite.close()
    assert before["turn 1: window"][:2] == ("delivered", None)
    assert before["turn 1: moved"][:2] == ("filtered", "not_written_yet")
    assert before["turn 2: window"][:2] == ("filtered", "rejected")
    assert before["turn 2: moved"][:2] == ("delivered", None)
    assert before["turn 1: replay"] == ("as_of", True, batch) and before["turn 2: replay"][:2] == (
        "as_of",
        True,
    )

    pg = PostgresBackend(pg_url, schema=pg_schema)
    try:
        copy_store(src, pg.db)
        assert _answers(pg, host, ids) == before
        # the batch's events kept their one seq on this side too
        assert {pg.memories.history(i)[0].seq for i in (window, lunch, plants)} == {batch}
        # a turn composed here after the copy gets a position past every copied one
        third = _turn(pg, host, 3)
        assert moved in third.delivered_ids.get("retrieved", ())
        assert pg.snapshots.get_inputs("s1", 3).history_seq == batch + 2  # type: ignore[union-attr]
        pg.memories.set_review_state(moved, "rejected", by="curator")
        assert pg.memories.history_position().seq == batch + 3
        assert _answers(pg, host, ids) == before  # the copied turns still answer as on the file
    finally:
        pg.close()


def test_the_walk_gives_every_event_once_in_seq_and_row_order_and_resumes_anywhere(tmp_path: Path) -> None:
    path = tmp_path / "v2.sqlite3"
    make_v2_store(
        path,
        [
            (
                f"legacy row {i}",
                "general",
                "operator",
                "reference",
                None,
                "confirmed",
                "",
                "",
                None,
                None,
                None,
            )
            for i in range(30)
        ],
    )
    with SQLiteKnowledgeStore(path) as store:  # migrated: 30 rows with an implied 'migrated' event
        store.set_review_state("4", "rejected", by="sam")
        ids = store.add_chunks({"content": f"new row {i}"} for i in range(25))  # one batch, one seq
        store.invalidate_chunk("4", reason="wrong")
        store.invalidate_chunk(ids[3], reason="wrong")
        store.set_review_state("2", "rejected", by="sam")
        assert store.purge() == 2
        every = [e for i in range(1, 56) for e in store.history(str(i))]
        want = sorted(every, key=lambda e: (e.seq, int(e.chunk_id)))
        conn = store.conn
        assert history.count_events(conn) == len(want) == 30 + 1 + 25 + 2 + 1 + 2
        for size in (1, 7, 30, 1_000):
            batches = list(history.walk_events(conn, batch=size))
            assert [e for b in batches for e in b] == want, size
            assert all(0 < len(b) <= size for b in batches)
        for index, event in enumerate(want):  # resumed after any event: exactly the ones after it
            after = (event.seq, int(event.chunk_id))
            assert [e for b in history.walk_events(conn, after, batch=4) for e in b] == want[index + 1 :]
        with pytest.raises(StoreError, match="history: batch must be at least 1, got 0"):
            next(history.walk_events(conn, batch=0))


def _v3_file(path: Path) -> None:
    """A store as schema 3 left it: its history in ``chunk_history``, one row per event."""
    make_v2_store(
        path,
        [
            (
                f"legacy row {i}",
                "general",
                "operator",
                "reference",
                None,
                "confirmed",
                "",
                "",
                None,
                None,
                None,
            )
            for i in range(5)
        ],
    )
    conn = apsw.Connection(str(path))
    migrate.upgrade_schema(conn)
    migrate.ensure_v3_schema(conn)
    conn.execute(migrate.V3_HISTORY_SQL)
    conn.execute("INSERT OR REPLACE INTO _kb_meta VALUES ('history_backfill', '2026-01-01T00:00:00.000000Z')")
    conn.execute(
        f"INSERT OR REPLACE INTO _kb_meta VALUES ('{migrate.HISTORY_STARTED_KEY}', '2026-01-01T00:00:00.000000Z')"
    )
    conn.execute(f"INSERT OR REPLACE INTO _kb_meta VALUES ('{migrate.HISTORY_BASELINE_KEY}', '5')")
    conn.execute(
        "INSERT INTO chunk_history(seq, chunk_id, at, event, actor, review_state, updated_at, detail) VALUES "
        "(1, 2, '2026-01-01T00:00:00.000000Z', 'migrated', '', 'confirmed', '2025-01-01T00:00:00.000000Z', NULL), "
        "(2, 2, '2026-01-02T00:00:00.000000Z', 'review', 'sam', 'rejected', '2026-01-02T00:00:00.000000Z', NULL)"
    )
    conn.execute(
        "UPDATE chunks SET review_state = 'rejected', updated_at = '2026-01-02T00:00:00.000000Z' WHERE id = 2"
    )
    conn.execute("PRAGMA user_version = 3")
    conn.close()


def test_a_version_3_file_is_refused_naming_migrate_and_copies_once_migrated(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    src = tmp_path / "v3.sqlite3"
    _v3_file(src)
    before = src.read_bytes()
    db = Database(pg_url, schema=pg_schema)
    try:
        with pytest.raises(StoreError) as err:
            copy_store(src, db)
        assert str(err.value) == (
            f"{src}: embedded schema version 3; its lifecycle history is converted to version 4's layout "
            "by the store's own migration, which writes the file, and this copy never changes its source: "
            f"run `contextplane migrate --db {src}` first, then copy again"
        )
        assert src.read_bytes() == before  # left as it was
        with psycopg.connect(pg_url) as pg:
            assert pg.execute(f"SELECT count(*) FROM {pg_schema}.chunks").fetchone() == (0,)
        res = CliRunner().invoke(main, ["store", "copy", str(src), pg_url, "--schema", pg_schema])
        assert (
            res.exit_code == 2
            and "run `contextplane migrate --db" in res.output
            and "Traceback" not in res.output
        )

        migrated = CliRunner().invoke(main, ["migrate", "--db", str(src)])
        assert migrated.exit_code == 0, migrated.output
        copy_store(src, db)
    finally:
        db.close()
    pg = PostgresBackend(pg_url, schema=pg_schema)
    try:
        with SQLiteKnowledgeStore(src, read_only=True) as mine:
            assert [(e.seq, e.event) for e in mine.history("2")] == [(0, "migrated"), (2, "review")]
            for chunk_id in map(str, range(1, 6)):
                assert pg.memories.history(chunk_id) == mine.history(chunk_id), chunk_id
            assert pg.memories.history_position().seq == mine.history_position().seq == 2
            states = []
            for seq in (0, 1, 2):
                position = HistoryPosition(seq, datetime.now(UTC))
                with mine.as_of(position) as was, pg.memories.as_of(position) as now:
                    assert was.list_chunks() == now.list_chunks()
                    states.append(now.get("2").review_state)  # type: ignore[union-attr]
            assert states == ["confirmed", "confirmed", "rejected"]
    finally:
        pg.close()


def test_a_history_cursor_an_older_copy_left_is_refused_before_anything_is_copied(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    src = tmp_path / "memory.sqlite3"
    backend = SQLiteBackend(src)
    backend.memories.add_chunks({"content": f"kiwi {i}"} for i in range(3))
    backend.close()
    db = Database(pg_url, schema=pg_schema)
    try:
        with db.transaction() as conn:  # what a copy from a schema-3 file left when it was killed
            conn.execute(
                "INSERT INTO meta(key, value) VALUES (%s, %s)",
                (cursor_key(src), json.dumps({"chunks": 0, "chunk_history": 12})),
            )
        with pytest.raises(StoreError) as err:
            copy_store(src, db)
        assert "the interrupted copy into this schema was started by an older contextplane_postgres" in str(
            err.value
        )
        assert "(its history cursor is 12, not an event's (seq, row)); copy into an empty schema" in str(
            err.value
        )
        with db.connection() as conn:
            assert conn.execute("SELECT count(*) FROM chunks").fetchone() == (0,)
    finally:
        db.close()
