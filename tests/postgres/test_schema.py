"""Schema versioning on PostgreSQL: created at the current version, brought forward step by
step (every public read and write works afterwards), a newer schema refused before anything
reads it, and several processes opening a fresh database at once migrate it exactly once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from contextplane.errors import StoreError
from contextplane.memory.history import HistoryPosition
from contextplane.records import InjectionRow
from contextplane.records.snapshots import SnapshotRow
from contextplane_postgres import PostgresBackend
from contextplane_postgres.database import Database
from contextplane_postgres.schema import SCHEMA_VERSION

from .helpers import HashEmbedder


def version(url: str, schema: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'").fetchone()
    assert row is not None
    return int(row[0])


def test_a_fresh_database_is_created_at_the_current_version(pg_url: str, pg_schema: str) -> None:
    PostgresBackend(pg_url, schema=pg_schema).close()
    assert version(pg_url, pg_schema) == SCHEMA_VERSION == 8


def test_a_newer_schema_is_refused_naming_both_versions(pg_url: str, pg_schema: str) -> None:
    PostgresBackend(pg_url, schema=pg_schema).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"UPDATE {pg_schema}.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError) as err:
        PostgresBackend(pg_url, schema=pg_schema)
    assert f"(schema {pg_schema}): the database was written by schema version 99, but this " in str(err.value)
    assert "understands schema version 8 at most; upgrade contextplane to open it" in str(err.value)
    assert version(pg_url, pg_schema) == 99  # nothing was touched


def test_an_older_schema_is_migrated_and_every_read_and_write_works(pg_url: str, pg_schema: str) -> None:
    # A database the first release wrote: its schema (step 1 only) and rows as it inserted them.
    Database(pg_url, schema=pg_schema, target_version=1).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        a, b = (
            str(conn.execute(
                f"INSERT INTO {pg_schema}.chunks(content, domain, source_type, namespace, memory_kind, "
                "delivery_policy, review_state, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, now(), now()) RETURNING id",
                row,
            ).fetchone()[0])
            for row in (
                ("kiwi deploy window Tuesday", "hot", "operator", "", "standing", "always", "confirmed"),
                ("kiwi canary note", "general", "extracted", "project:web", "fact", None, "pending"),
            )
        )  # fmt: skip
    assert version(pg_url, pg_schema) == 1
    before = datetime.now(UTC)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (f"{pg_schema}.injection_log",)).fetchone() == (None,)
        Database(pg_url, schema=pg_schema, target_version=3).close()  # steps 2 and 3
        tuples = conn.execute(f"SELECT id, ctid, xmin::text FROM {pg_schema}.chunks ORDER BY id").fetchall()

    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        assert version(pg_url, pg_schema) == SCHEMA_VERSION
        # step 4 rewrote no row (a rewrite re-inserts every row into every index, HNSW included)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert (
                conn.execute(f"SELECT id, ctid, xmin::text FROM {pg_schema}.chunks ORDER BY id").fetchall()
                == tuples
            )
        with psycopg.connect(pg_url, autocommit=True) as conn:  # steps 2 and 3 ran
            for name in ("injection_log", "trajectory", "chunks_delivery_policy"):
                assert conn.execute("SELECT to_regclass(%s)", (f"{pg_schema}.{name}",)).fetchone() != (None,)
        m = backend.memories
        assert [c.id for c in m.list_chunks()] == [a, b]
        # step 4: one 'migrated' event per row, the history starts there, and the rows have
        # their content key (an exact duplicate write returns the existing row)
        for cid in (a, b):
            events = m.history(cid)
            assert [(e.event, e.actor) for e in events] == [("migrated", "")]
            assert "history starts at the migration" in events[0].detail["note"]
        assert m.history(b)[0].review_state == "pending"
        too_early = m.as_of(before - timedelta(seconds=5))
        with (
            pytest.raises(StoreError, match=r"the history of this store starts at .* is before it"),
            too_early,
        ):
            pass
        with m.as_of(m.history_position()) as view:
            assert [c.id for c in view.list_chunks()] == [a, b]
        again = m.add_chunk("kiwi canary note", "general", "extracted", namespace="project:web")
        assert (again, again.outcome) == (b, "duplicate")
        assert m.get(a) is not None and m.get(a).memory_kind == "standing"
        c = m.supersede(a, "kiwi deploy window Thursday")
        assert m.get(a).superseded_by == c
        assert m.set_review_state(b, "confirmed").review_state == "confirmed"
        assert m.set_expires_at(b, "2030-01-01T00:00:00Z").expires_at is not None
        ids = m.add_chunks(
            [{"content": "kiwi bulk one"}, {"content": "kiwi bulk two", "namespace": "session:x"}]
        )
        assert [h.chunk.id for h in m.search("kiwi", 10, namespaces=["", "session:x"])] == sorted(
            [c, *ids], key=int
        ) or {h.chunk.id for h in m.search("kiwi", 10, namespaces=["", "session:x"])} == {c, *ids}
        assert m.list_chunks(namespaces=["project:web"])[0].id == b
        m.invalidate_chunk(ids[0], reason="duplicate")
        assert m.purge() == 1
        with m.consistent_read() as view:
            assert view.get(ids[0]) is None and view.get(c) is not None
        s = backend.summaries
        s.add("s1", "kiwi orchard planning", topic="orchard")
        assert [r.session_id for r in s.newest(5)] == ["s1"] and s.relevant("orchard", 5)[
            0
        ].session_id == "s1"
        assert s.count() == 1
        rid = backend.injections.record(
            InjectionRow("s1", 0, "2026-01-01T00:00:00Z", "native", 3, 12, 100, {"r": [c]})
        )
        assert [r.id for r in backend.injections.rows("s1")] == [rid]
        snaps = backend.snapshots
        snaps.register_prefix("h", "the prefix", "[]")
        snaps.put(
            SnapshotRow("s1", 0, 0, 1.9e9, "native", False, "h", "[]", None, "[]", None, 0, 0, 0, "[]", "[]")
        )
        assert (
            snaps.count() == 1
            and snaps.get("s1", 0, 0) is not None
            and snaps.prefix_text("h") == "the prefix"
        )
        assert snaps.sessions() == [("s1", 1, 1.9e9)] and [x.key for x in snaps.list()] == [("s1", 0, 0)]
        traj = backend.trajectory
        assert traj is not None and traj.append("s1", "projection", {"turn_index": 0}) == "1"
        assert [e.kind for e in traj.read("s1").entries] == ["projection"]
    finally:
        backend.close()


def _history_key(url: str, schema: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT array_agg(a.attname::text ORDER BY k.n) FROM pg_index AS i "
            "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
            "JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "WHERE i.indrelid = %s::regclass AND i.indisprimary",
            (f"{schema}.chunk_history",),
        ).fetchone()
    assert row is not None
    return list(row[0])


def test_step_5_keys_the_history_by_seq_and_row_keeping_every_event(pg_url: str, pg_schema: str) -> None:
    # A database schema 4 wrote, with events: step 5 changes only the key, so a copied store's
    # write batch (one seq for its rows) fits, and the events and positions read as before.
    old = PostgresBackend(pg_url, schema=pg_schema, target_version=4)
    try:
        # This release's writes name step 6's event-time column: it is added ahead (step 6 adds it
        # only if missing), so they run on schema 4's history layout, which is what is tested.
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"ALTER TABLE {pg_schema}.chunks ADD COLUMN occurred_at timestamptz")
        a, b = old.memories.add_chunks([{"content": "kiwi one"}, {"content": "kiwi two"}])
        old.memories.set_review_state(a, "rejected", by="sam")
        events = {i: old.memories.history(i) for i in (a, b)}
        position = old.memories.history_position()
    finally:
        old.close()
    assert version(pg_url, pg_schema) == 4 and _history_key(pg_url, pg_schema) == ["seq"]
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        assert version(pg_url, pg_schema) == SCHEMA_VERSION == 8
        assert _history_key(pg_url, pg_schema) == ["seq", "chunk_id"]
        m = backend.memories
        assert {i: m.history(i) for i in (a, b)} == events and m.history_position().seq == position.seq
        created = events[a][0]
        with m.as_of(HistoryPosition(created.seq, created.at)) as view:  # before the review
            assert view.get(a).review_state == created.review_state != "rejected"  # type: ignore[union-attr]
        c = m.add_chunk("kiwi three")
        assert m.history(c)[0].seq == position.seq + 1  # new events still get a seq of their own
        with (
            psycopg.connect(pg_url, autocommit=True) as conn,
            pytest.raises(psycopg.errors.UniqueViolation),  # one event per (seq, row)
        ):
            conn.execute(
                f"INSERT INTO {pg_schema}.chunk_history(seq, chunk_id, at, event) "
                f"VALUES ({position.seq + 1}, {c}, now(), 'review')"
            )
    finally:
        backend.close()


def test_concurrent_first_opens_migrate_once(pg_url: str, pg_schema: str) -> None:
    opened: list[Any] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def open_one() -> None:
        try:
            start.wait()
            opened.append(PostgresBackend(pg_url, schema=pg_schema, pool_max_size=2))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert not errors, errors
        ids = {b.memories.add_chunk(f"kiwi {i}") for i, b in enumerate(opened)}
        assert len(ids) == 6 and version(pg_url, pg_schema) == SCHEMA_VERSION
    finally:
        for b in opened:
            b.close()


def test_vectors_are_added_once_and_another_width_is_refused(pg_url: str, pg_schema: str) -> None:
    first = PostgresBackend(pg_url, schema=pg_schema, embedder=HashEmbedder(64))
    cid = first.memories.add_chunk("kiwi orchard", source_type="operator")
    first.close()
    again = PostgresBackend(pg_url, schema=pg_schema, embedder=HashEmbedder(64))
    assert again.memories.vector_neighbours("kiwi orchard", 1) == [cid]
    again.close()
    with pytest.raises(StoreError) as err:
        PostgresBackend(pg_url, schema=pg_schema, embedder=HashEmbedder(32, name="narrow"))
    assert (
        "stored vectors have 64 dimensions from embedder 'test-hash-bow', but the configured embedder "
        "'narrow' produces 32" in str(err.value)
    )
    assert "run `contextplane memory reindex --rebuild`" in str(err.value)
    plain = PostgresBackend(pg_url, schema=pg_schema)  # without an embedder: full text only
    assert [h.chunk.id for h in plain.memories.search("orchard")] == [cid]
    plain.close()
