"""``following`` on PostgreSQL beyond the kit (tests/postgres/test_kit.py runs STORE-FOLLOWING*):
schema step 8's (namespace, id) index on a database schema 7 wrote, the lookup walking it rather
than the primary key, and the view ``consistent_read`` yields while the server is down."""

from __future__ import annotations

import asyncio
import re
from typing import Any

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
                {"content": "Melanie: or was it Wednesday", "namespace": "session:c"},
            ]
        )
    finally:
        old.close()
    assert _version(pg_url, pg_schema) == 7
    assert {"chunks_namespace"} <= _indexes(pg_url, pg_schema) and "chunks_namespace_id" not in _indexes(
        pg_url, pg_schema
    )
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        assert _version(pg_url, pg_schema) == SCHEMA_VERSION == 8
        indexes = _indexes(pg_url, pg_schema)  # the scope index replaced by (namespace, id)
        assert "chunks_namespace_id" in indexes and "chunks_namespace" not in indexes
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


#: Rows a one-step lookup may read: far from the 2,000 a walk through the other scope reads.
FEW = 5


def _plan(conn: psycopg.Connection[Any], statement: str | None, params: dict[str, Any]) -> str:
    """The statement's plan, run, when the planner may use indexes only (``enable_seqscan``,
    ``enable_bitmapscan`` and the sorts off): on a table this small it would as soon scan it, so
    this asks what the statement and the indexes allow; which plan the planner prefers at
    scale, before and after ``ANALYZE`` and in an as-of view, is bench/following_bench.py's."""
    assert statement is not None
    for name in ("enable_seqscan", "enable_bitmapscan", "enable_sort", "enable_incremental_sort"):
        conn.execute(f"SET LOCAL {name} = off")
    rows = conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + statement, params).fetchall()
    for name in ("enable_seqscan", "enable_bitmapscan", "enable_sort", "enable_incremental_sort"):
        conn.execute(f"RESET {name}")
    return "\n".join(str(r[0]) for r in rows)


def _one_step(plan: str) -> None:
    """For one or two ids, no scan read or dropped more than a few rows a loop: no walk through
    the 2,000 rows of the other scope, no scan or sort of the table."""
    removed = [int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan)]
    read = [int(n) for n in re.findall(r"Scan .*\(actual time=\S+ rows=(\d+)", plan)]
    assert read and max(read) <= FEW and max(removed, default=0) <= FEW, plan
    assert "Sort" not in plan and "chunks_namespace_id" in plan, plan


def test_the_lookup_is_one_step_down_the_scope_index(pg_url: str, pg_schema: str) -> None:
    """A scope's row with 2,000 rows of another scope before its next: the statement lets the
    lookup be one step down (namespace, id), live and in an as-of view; the statement as first
    written could only walk the primary key through the other scope's rows, or sort."""
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        m = backend.memories
        lone = m.add_chunk("the small scope's first row", namespace="session:small")
        m.add_chunks(
            {"content": f"another conversation's turn {i}", "namespace": "session:big"} for i in range(2000)
        )
        tail = m.add_chunk("the small scope's next row", namespace="session:small")
        last = m.add_chunks([{"content": "the big scope's last row", "namespace": "session:big"}])[0]
        cases = ([lone], [tail, last])
        with m._reading(None) as conn, conn.transaction():
            for ids in cases:
                _one_step(_plan(conn, *following_sql(m.dialect, ids, True, None, m.select)))
        position = m.history_position()
        m.set_review_state(tail, "rejected")
        later = m.add_chunk("the small scope's row after the position", namespace="session:small")
        with m.as_of(position) as view:
            with m._reading(view) as conn:  # the view's connection, in its transaction
                for ids in cases:
                    _one_step(_plan(conn, *following_sql(m.dialect, ids, True, view.now, m.select)))
            assert {k: v.id for k, v in view.following([lone, tail, last]).items()} == {lone: tail}
        assert {k: v.id for k, v in m.following([lone, tail, last]).items()} == {lone: later, tail: later}
    finally:
        backend.close()


def test_without_statistics_the_lookup_reads_no_more_than_it_returns(pg_url: str, pg_schema: str) -> None:
    """A store just filled, before autovacuum's first ``ANALYZE``, and an as-of view (whose state
    columns never have statistics): the planner cannot estimate the deliverable filter. Written
    as plain clauses it took them to pass a row in thousands and scanned and sorted a scope per
    id (0.4 s for 40 ids at 10k rows); the statement as first written hashed the whole table.
    Now each lookup reads its row and the one it returns (bench/following_bench.py)."""
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        m = backend.memories
        with m._reading(None) as conn:
            conn.execute("ALTER TABLE chunks SET (autovacuum_enabled = false)")  # no ANALYZE meanwhile
        small = m.add_chunks(
            {"content": f"a short talk, turn {i}", "namespace": "session:small"} for i in range(5)
        )
        big = m.add_chunks(
            {"content": f"turn {i} of one of two long talks", "namespace": f"session:c{i % 2}"}
            for i in range(10_000)
        )
        late = m.add_chunks(
            {"content": f"the short talk again, turn {i}", "namespace": "session:small"} for i in range(5)
        )
        asked = big[100:10_000:250]
        position = m.history_position()
        m.set_review_state(big[102], "rejected")  # big[100]'s next in its scope
        m.add_chunk("a turn after the position", namespace="session:small")
        with m._reading(None) as conn:
            (tuples,) = conn.execute(
                "SELECT reltuples FROM pg_class WHERE oid = 'chunks'::regclass"
            ).fetchone()
            assert tuples <= 0  # never analyzed: what this test is about
            for ids in (asked, small):
                _reads_what_it_returns(
                    _unrestricted_plan(conn, *following_sql(m.dialect, ids, True, None, m.select)), ids
                )
        with m.as_of(position) as view:
            with m._reading(view) as conn:
                for ids in (asked, small):
                    statement, params = following_sql(m.dialect, ids, True, view.now, m.select)
                    _reads_what_it_returns(_unrestricted_plan(conn, statement, params), ids)
            assert {k: v.id for k, v in view.following([small[-1], big[100]]).items()} == {
                small[-1]: late[0],
                big[100]: big[102],
            }
        assert {k: v.id for k, v in m.following([big[100]]).items()} == {big[100]: big[104]}
    finally:
        backend.close()


def _unrestricted_plan(conn: psycopg.Connection[Any], statement: str | None, params: dict[str, Any]) -> str:
    assert statement is not None
    rows = conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + statement, params).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def _reads_what_it_returns(plan: str, ids: list[str]) -> None:
    """No scan of the table, no sort, and no scan read more rows a loop than ids were asked."""
    read = [int(n) for n in re.findall(r"Scan .*\(actual time=\S+ rows=(\d+)", plan)]
    removed = [int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan)]
    assert "Seq Scan on chunks" not in plan and "Sort" not in plan, plan
    assert max(read) <= len(ids) and max(removed, default=0) <= FEW, plan


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
