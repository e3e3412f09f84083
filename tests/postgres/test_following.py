"""``following`` on PostgreSQL beyond the kit (tests/postgres/test_kit.py runs STORE-FOLLOWING*):
schema step 8's (namespace, id) index on a database schema 7 wrote, the lookup walking it rather
than the primary key, and the view ``consistent_read`` yields while the server is down."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from contextplane.store import aio
from contextplane.store.filters import following_sql
from contextplane_postgres import PostgresBackend
from contextplane_postgres.pool import ServerUnreachable
from contextplane_postgres.schema import SCHEMA_VERSION
from contextplane_postgres.store import UnreachableView


def _version(url: str, schema: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'").fetchone()
    assert row is not None
    return int(row[0])


def _indexes(url: str, schema: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,)).fetchall()
    return {str(r[0]) for r in rows}


def test_step_8_on_a_schema_7_database_and_every_read_and_write_after_it(pg_url: str, pg_schema: str) -> None:
    old = PostgresBackend(pg_url, schema=pg_schema, target_version=7)
    try:
        m = old.memories
        first = m.add_chunk("Caroline: when is the support group?", namespace="session:c")
        other = m.add_chunk("Jon: the dance studio opens Monday", namespace="session:j")
        answer, rejected = m.add_chunks(
            [
                {"content": "Melanie: Tuesdays at six", "namespace": "session:c"},
                {
                    "content": "Melanie: or was it Wednesday",
                    "namespace": "session:c",
                    "source_type": "extracted",
                },
            ]
        )
    finally:
        old.close()
    assert _version(pg_url, pg_schema) == 7 and "chunks_namespace_id" not in _indexes(pg_url, pg_schema)
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        assert _version(pg_url, pg_schema) == SCHEMA_VERSION == 8
        assert "chunks_namespace_id" in _indexes(pg_url, pg_schema)
        m = backend.memories
        assert {k: v.id for k, v in m.following([first, other, answer]).items()} == {
            first: answer,
            answer: rejected,
        }
        m.set_review_state(rejected, "rejected", by="kit")
        later = m.add_chunk("Caroline: thanks!", namespace="session:c")
        newer = m.supersede(answer, "Melanie: Tuesdays at seven")
        m.invalidate_chunk(later, reason="not said")
        assert {k: v.id for k, v in m.following([first, answer, rejected]).items()} == {
            first: newer,
            answer: newer,
            rejected: newer,
        }
        assert m.following([first], deliverable=False)[first].id == answer
        with m.consistent_read() as view:
            assert view.following([first])[first].id == newer
        asynced = asyncio.run(aio.afollowing(m, [first, other]))
        assert {k: v.id for k, v in asynced.items()} == {first: newer}
        assert [h.chunk.id for h in m.search("support group", 5)] == [first]
    finally:
        backend.close()


def test_the_lookup_walks_the_scope_index_not_the_primary_key(pg_url: str, pg_schema: str) -> None:
    """A scope's row with 2,000 rows of another scope before its next: the lookup is one step down
    (namespace, id), never a walk of the primary key through the other scope's rows (what the
    statement as first written did: 15 ms for a turn 50,000 rows before the next of its scope)."""
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        m = backend.memories
        lone = m.add_chunk("the small scope's first row", namespace="session:small")
        m.add_chunks(
            {"content": f"another conversation's turn {i}", "namespace": "session:big"} for i in range(2000)
        )
        tail = m.add_chunk("the small scope's next row", namespace="session:small")
        last = m.add_chunks([{"content": "the big scope's last row", "namespace": "session:big"}])[0]
        with psycopg.connect(pg_url, autocommit=True, options=f"-c search_path={pg_schema},public") as conn:
            conn.execute("ANALYZE chunks")
            for ids in ([lone], [tail, last]):
                statement, params = following_sql(m.dialect, ids, True, None, m.select)
                assert statement is not None
                plan = "\n".join(
                    r[0] for r in conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + statement, params).fetchall()
                )
                assert "chunks_namespace_id" in plan, plan
                assert "Rows Removed by Filter" not in plan, plan  # no other scope's row was read
        assert {k: v.id for k, v in m.following([lone, tail, last]).items()} == {lone: tail}
    finally:
        backend.close()


def test_an_unreachable_view_refuses_following_at_once(pg_url: str, pg_schema: str) -> None:
    """While the server is down ``consistent_read`` yields an ``UnreachableView``; its
    ``following`` raises why, like its other reads, instead of reaching past the view to the store."""
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        m = backend.memories
        a = m.add_chunk("kiwi one", namespace="session:u")
        m.add_chunk("kiwi two", namespace="session:u")
        view = UnreachableView(m, ServerUnreachable("cannot connect to the PostgreSQL server at test"))
        with pytest.raises(ServerUnreachable, match="cannot connect"):
            view.following([a])
    finally:
        backend.close()
