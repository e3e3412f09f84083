"""The event time (``occurred_at``) on PostgreSQL: every write path, schema step 6 on a
database schema 5 wrote (every public read and write afterwards), and the copy of an embedded
store (schema 5 and 4) carrying it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import apsw
import psycopg
import pytest

from contextplane.errors import ValidationError
from contextplane.store import SQLiteKnowledgeStore, aio
from contextplane.store.api import amemory_ingest, memory_ingest
from contextplane_postgres import PostgresBackend
from contextplane_postgres.copy import copy_store
from contextplane_postgres.database import Database
from contextplane_postgres.schema import SCHEMA_VERSION

MAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
JULY = datetime(2023, 7, 14, 9, 30, tzinfo=UTC)


def _version(url: str, schema: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'").fetchone()
    assert row is not None
    return int(row[0])


def test_every_write_path_keeps_the_event_time(pg_url: str, pg_schema: str) -> None:
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        m = backend.memories
        single = m.add_chunk("Caroline: I went to the support group", occurred_at="2023-05-08T15:56:00+02:00")
        batch = m.add_chunks(
            [{"content": f"Melanie: turn {i}", "occurred_at": JULY} for i in range(70)]  # by COPY
            + [{"content": "a note with no event time"}]
        )
        small = m.add_chunks([{"content": "Melanie: we went camping", "occurred_at": MAY}])
        api = memory_ingest(m, "Caroline: the parade", occurred_at=JULY)
        via_async = asyncio.run(amemory_ingest(m, "Melanie: the kids loved it", occurred_at=MAY))
        kept = m.supersede(single, "Caroline: I went to the LGBTQ support group")
        moved = asyncio.run(
            aio.asupersede(m, small[0], "Melanie: we went camping at the lake", occurred_at=JULY)
        )
        got = [m.get(i).occurred_at for i in (single, batch[0], batch[-1], small[0], api, via_async, kept, moved)]  # type: ignore[union-attr]
        assert got == [MAY, JULY, None, MAY, JULY, MAY, MAY, JULY]
        same = m.add_chunk("Melanie: turn 0", occurred_at=JULY)
        other = m.add_chunk("Melanie: turn 0", occurred_at=MAY)
        assert (same.outcome, same.duplicate_of) == ("duplicate", batch[0]) and other != batch[0]
        assert [c.id for c in m.list_chunks(occurred_before="2023-06-01T00:00:00Z")] == [
            single,
            small[0],
            via_async,
            kept,
            other,
        ]
        hits = m.search("camping lake", 5, occurred_after=JULY, namespaces=[""])
        assert [h.chunk.id for h in hits] == [moved]
        with pytest.raises(ValidationError, match=r"^occurred_at: '2023-05-08' has no timezone"):
            m.add_chunks(
                [{"content": "good", "occurred_at": MAY}, {"content": "bad", "occurred_at": "2023-05-08"}]
            )
        assert not [c for c in m.list_chunks() if c.content in ("good", "bad")]
    finally:
        backend.close()


def test_step_6_on_a_schema_5_database_keeps_every_row_readable_and_writable(
    pg_url: str, pg_schema: str
) -> None:
    """Schema 5 is this layout without step 6's column and index: rows (with their history)
    written, step 6 taken away, the version put back to 5; opening runs step 6."""
    first = PostgresBackend(pg_url, schema=pg_schema)
    try:
        m = first.memories
        a = m.add_chunk("The deploy window is Tuesday", source_type="operator", subject="deploy window")
        b, c = m.add_chunks([{"content": "kiwi one", "source_type": "extracted"}, {"content": "kiwi two"}])
        m.set_review_state(b, "rejected", by="sam")
        before = {i: m.history(i) for i in (a, b, c)}
        position = m.history_position()
    finally:
        first.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {pg_schema}.chunks_occurred")
        conn.execute(f"ALTER TABLE {pg_schema}.chunks DROP COLUMN occurred_at")
        conn.execute(f"UPDATE {pg_schema}.meta SET value = '5' WHERE key = 'schema_version'")
    assert _version(pg_url, pg_schema) == 5
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        assert _version(pg_url, pg_schema) == SCHEMA_VERSION == 8
        m = backend.memories
        assert [x.occurred_at for x in m.list_chunks()] == [None, None, None]
        assert {i: m.history(i) for i in (a, b, c)} == before and m.history_position().seq == position.seq
        assert [h.chunk.id for h in m.search("deploy window", 5)] == [a]
        d = m.add_chunk("kiwi three", occurred_at=MAY)
        (e,) = m.add_chunks([{"content": "kiwi four", "occurred_at": JULY}])
        newer = m.supersede(a, "The deploy window is Wednesday", occurred_at=JULY)
        m.set_review_state(c, "confirmed", by="sam")
        m.set_expires_at(d, "2030-01-01T00:00:00Z")
        m.invalidate_chunk(e, reason="wrong")
        assert m.purge() == 1
        assert [(x.id, x.occurred_at) for x in m.list_chunks(deliverable=True)] == [
            (c, None),
            (d, MAY),
            (newer, JULY),
        ]
        assert [x.id for x in m.list_chunks(occurred_after=MAY)] == [d, newer]
        with m.as_of(position) as past:
            assert sorted(x.id for x in past.list_chunks()) == sorted([a, b, c])
        with m.consistent_read() as view:
            assert [x.id for x in view.list_chunks(occurred_after=JULY)] == [newer]
    finally:
        backend.close()


def test_the_copy_carries_the_event_time(tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    src = tmp_path / "memory.sqlite3"
    with SQLiteKnowledgeStore(src) as store:
        said = store.add_chunk("Caroline: I went to the support group", occurred_at=MAY)
        plain = store.add_chunk("a note with no event time")
        kept = store.supersede(said, "Caroline: I went to the LGBTQ support group")
    db = Database(pg_url, schema=pg_schema)
    try:
        copy_store(src, db)
    finally:
        db.close()
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        m = backend.memories
        assert [(x.id, x.occurred_at) for x in m.list_chunks()] == [(said, MAY), (plain, None), (kept, MAY)]
        assert [x.id for x in m.list_chunks(occurred_after=MAY)] == [said, kept]
        later = m.add_chunk("Melanie: camping", occurred_at=JULY)
        assert m.get(later).occurred_at == JULY  # type: ignore[union-attr]
    finally:
        backend.close()


def test_the_copy_of_a_schema_4_file_reads_no_event_time(tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    src = tmp_path / "memory.sqlite3"
    with SQLiteKnowledgeStore(src) as store:
        ids = store.add_chunks([{"content": "kiwi one"}, {"content": "kiwi two"}])
    conn = apsw.Connection(str(src))
    conn.execute("DROP INDEX chunks_occurred")
    conn.execute("ALTER TABLE chunks DROP COLUMN occurred_at")
    conn.execute("PRAGMA user_version = 4")
    conn.close()
    db = Database(pg_url, schema=pg_schema)
    try:
        copy_store(src, db)
    finally:
        db.close()
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        assert [(x.id, x.occurred_at) for x in backend.memories.list_chunks()] == [
            (ids[0], None),
            (ids[1], None),
        ]
    finally:
        backend.close()
