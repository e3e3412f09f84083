"""The cacheable-prefix figures of prompt snapshots on PostgreSQL (issue 24): recorded through a
runtime and read back, and schema step 7 on a database schema 6 wrote (its snapshots read back
with no figures; every read and write works afterwards)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import attrs
import psycopg

from contextplane import plugin_host_with
from contextplane.config import structure
from contextplane.delivery import PLAIN
from contextplane.records.cache_prefix import CachePrefix
from contextplane.records.snapshots import SnapshotRow
from contextplane.runtime import open_runtime
from contextplane_postgres import PostgresBackend
from contextplane_postgres.schema import SCHEMA_VERSION

PREFIX = "You are a careful assistant for the orchard team. " * 100

ROW = SnapshotRow(
    "s", 5, 0, 1.9e9, "native", False, "h", "[]", None, "[]", None, 0, 1, 10, "[]", "[]", None,
    "c" * 64, 5010, 4990, '{"sections":["tools"]}',
)  # fmt: skip


def _version(url: str, schema: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'").fetchone()
    assert row is not None
    return int(row[0])


def test_a_session_s_figures_round_trip(pg_backend_factory: Callable[..., Any]) -> None:
    backend = pg_backend_factory()
    host = plugin_host_with([], structure({"context": {"context_window": 200_000}}))
    history: list[dict[str, str]] = []
    with open_runtime(backend=backend, host=host, prefix=PREFIX) as runtime:
        for n in range(3):
            turn = runtime.compose(runtime.request(f"q{n}", session_id="s", turn_index=n))
            history.append({"role": "user", "content": f"question {n}"})
            runtime.deliver(turn, history, PLAIN, call_index=0)
            history.append({"role": "assistant", "content": f"answer {n}"})
    snaps = backend.snapshots.list("s")
    caches = [s.cache for s in snaps]
    assert all(c is not None for c in caches) and len(caches) == 3
    assert caches[0] == CachePrefix(caches[0].sha256, len(PREFIX) + 10, 0, first=True)
    for before, now in itertools.pairwise(caches):
        assert now is not None and before is not None
        assert now.unchanged and now.shared == before.chars and now.sha256 != before.sha256
    backend.snapshots.put(ROW)
    got = backend.snapshots.get("s", 5, 0)
    assert got is not None and got.cache == CachePrefix("c" * 64, 5010, 4990, sections=("tools",))


def test_step_7_on_a_schema_6_database(pg_url: str, pg_schema: str) -> None:
    first = PostgresBackend(pg_url, schema=pg_schema)
    try:
        first.snapshots.register_prefix("h", "the prefix", "[]")
        first.snapshots.put(attrs.evolve(ROW, turn_index=1, cache_prefix_sha256=None,
                                         cache_prefix_chars=None, cache_shared_chars=None,
                                         cache_break=None))  # fmt: skip
        first.snapshots.flush()
    finally:
        first.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # back to what schema 6 created
        for column in ("cache_prefix_sha256", "cache_prefix_chars", "cache_shared_chars", "cache_break"):
            conn.execute(f"ALTER TABLE {pg_schema}.prompt_snapshots DROP COLUMN {column}")
        conn.execute(f"UPDATE {pg_schema}.meta SET value = '6' WHERE key = 'schema_version'")
    backend = PostgresBackend(pg_url, schema=pg_schema)
    try:
        assert _version(pg_url, pg_schema) == SCHEMA_VERSION == 8
        old = backend.snapshots.get("s", 1, 0)
        assert old is not None and old.cache is None and old.history_chars == 10
        backend.snapshots.put(ROW)
        got = backend.snapshots.get("s", 5, 0)
        assert got is not None and got.cache == CachePrefix("c" * 64, 5010, 4990, sections=("tools",))
        assert [s.key for s in backend.snapshots.list("s")] == [("s", 1, 0), ("s", 5, 0)]
        assert backend.snapshots.prefix_text("h") == "the prefix"
    finally:
        backend.close()
