"""``following`` benchmark: the memory written right after each of 40 hits, on 100k rows.

    python bench/following_bench.py               # embedded SQLite store, 100k rows
    python bench/following_bench.py --postgres    # also PostgreSQL (pgserver), 50k rows
    python bench/following_bench.py --quick       # 20k / 10k rows (a smoke run)

The retrieved section asks ``following`` for its hits' next turns on every turn, so it has to
cost about what reading those hits costs: the baseline, measured in the same run, is one
``get`` per id (40 point reads). Target: following(40 ids) <= 1.5x the 40 gets, on one scope
and on 20 scopes written interleaved (19 rows of other conversations between a turn and the
next of its own; what the scope index steps over).

SQLite: the lookup is ``namespace = ? AND rowid > ?`` on ``chunks_namespace`` (which holds the
rowid), one step; ``EXPLAIN QUERY PLAN`` is printed. PostgreSQL: schema 7 with the statement as
first written (a scalar subquery ``c.namespace = h.namespace AND c.id > h.id ORDER BY c.id``
joined back to ``chunks``) against this release's (schema step 8's (namespace, id) index, a
``LATERAL`` row comparison down it), on the same rows: 2 big interleaved scopes plus a small
scope whose rows sit at both ends of the table (a turn 50k rows before the next of its
conversation); just filled (no statistics yet), analyzed, and in an as-of view. Figures are
medians; the SQLite arms alternate run by run.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextplane.store import SQLiteKnowledgeStore
from contextplane.store.filters import Dialect, following_sql

TARGET = 1.5
RUNS = 41


def _median_ms(fn: Callable[[], object], runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _paired(a: Callable[[], object], b: Callable[[], object], runs: int = RUNS) -> tuple[float, float]:
    """Medians of ``a`` and ``b``, run alternately (load from other processes hits both alike)."""
    ta, tb = [], []
    for _ in range(runs):
        for fn, out in ((a, ta), (b, tb)):
            started = time.perf_counter()
            fn()
            out.append(time.perf_counter() - started)
    return statistics.median(ta) * 1000, statistics.median(tb) * 1000


def _rows(n: int, scopes: int) -> list[dict[str, Any]]:
    return [
        {
            "content": f"turn {i}: words w{i % 977} x{i % 131} about topic {i % 53}",
            "namespace": f"session:s{i % scopes}",
            "source_type": "operator",
        }
        for i in range(n)
    ]


def sqlite_arm(n: int, scopes: int, base: Path) -> bool:
    store = SQLiteKnowledgeStore(base / f"following-{scopes}.sqlite3")
    try:
        rows = _rows(n, scopes)
        started = time.perf_counter()
        for k in range(0, n, 10_000):
            store.add_chunks(rows[k : k + 10_000])
        filled = time.perf_counter() - started
        ids = [str(i) for i in random.Random(scopes).sample(range(1, n), 40)]
        statement, params = following_sql(store.dialect, ids, True, None, store.select)
        assert statement is not None
        with store._reading(None) as conn:
            plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + statement, params)]
        found = store.following(ids)
        assert len(found) >= 39, f"following found {len(found)} of 40"  # the last row may have none
        follow_ms, get_ms = _paired(lambda: store.following(ids), lambda: [store.get(i) for i in ids])
        ratio = follow_ms / get_ms
        print(f"sqlite, {n:,} rows in {scopes} scope(s) (filled in {filled:.1f} s)")
        print(f"  plan: {' | '.join(plan)}")
        print(
            f"  following(40 ids) p50 {follow_ms:.3f} ms; 40 x get p50 {get_ms:.3f} ms; "
            f"ratio {ratio:.2f} (target <= {TARGET}) {'MET' if ratio <= TARGET else 'MISSED'}"
        )
        return ratio <= TARGET
    finally:
        store.close()


def postgres_arm(n: int) -> None:

    from contextplane_postgres import PostgresBackend
    from contextplane_postgres.sql import PostgresDialect

    class PgFirstWritten(PostgresDialect):
        """The statement as first written, in PostgreSQL's spelling (the before figure)."""

        following = Dialect.following

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    base = Path(tempfile.mkdtemp(prefix="following-pg-"))
    server = pgserver.get_server(base / "data", cleanup_mode="delete")
    try:
        url = server.get_uri()
        small = [
            {"content": f"a small conversation's turn {i}", "namespace": "session:small"} for i in range(10)
        ]
        big = [
            {"content": f"turn {i} of a big conversation", "namespace": f"session:big{i % 2}"}
            for i in range(n)
        ]
        # before: schema 7 (the scope index alone) and the statement as first written; after:
        # this release's schema and statement. The same rows in each, autovacuum off, so each
        # state below is the state named.
        arms: dict[str, Any] = {}
        for name, target in (("before", 7), ("after", None)):
            options = {} if target is None else {"target_version": target}
            backend = PostgresBackend(url, schema=name, **options)
            store = backend.memories
            with store._reading(None) as conn:
                conn.execute("ALTER TABLE chunks SET (autovacuum_enabled = false)")
            store.add_chunks(small)
            for k in range(0, n, 10_000):
                store.add_chunks(big[k : k + 10_000])
            store.add_chunks([{**r, "content": r["content"] + " (later)"} for r in small])
            dialect = PgFirstWritten() if name == "before" else store.dialect
            arms[name] = (backend, store, dialect)
        ids_big = [str(i) for i in random.Random(7).sample(range(11, n + 10), 40)]
        ids_small = [str(i) for i in range(1, 11)]
        sets = (
            ("40 ids of the big scopes", ids_big),
            (f"the small scope's 10 (one {n:,} rows from its next)", ids_small),
        )
        print(f"postgres, {n:,} rows in 2 interleaved scopes + a 20-row scope at both ends")

        def measure(state: str, reading: dict[str, Any], now: Any) -> None:
            print(f"  {state}:")
            for label, ids in sets:
                figures = {}
                for name, (_backend, store, dialect) in arms.items():
                    statement, params = following_sql(dialect, ids, True, now, store.select)
                    with store._reading(reading[name]) as conn:
                        figures[name] = _median_ms(lambda: conn.execute(statement, params).fetchall(), runs=7)
                print(
                    f"    {label}: as first written {figures['before']:.2f} ms, now {figures['after']:.2f} ms"
                )

        plain = {"before": None, "after": None}
        measure("just filled (no ANALYZE yet)", plain, None)
        for _backend, store, _dialect in arms.values():
            with store._reading(None) as conn:
                conn.execute("VACUUM ANALYZE chunks")
        measure("analyzed", plain, None)
        _backend, store, _dialect = arms["after"]
        public_ms, get_ms = _paired(lambda: store.following(ids_big), lambda: [store.get(i) for i in ids_big])
        print(
            f"    store.following(40 ids) p50 {public_ms:.2f} ms; 40 x get p50 {get_ms:.2f} ms "
            f"(a pooled connection each); ratio {public_ms / get_ms:.2f}"
        )
        positions = {}
        for name, (_backend, store, _dialect) in arms.items():
            positions[name] = store.history_position()
            store.add_chunk("written after the position", namespace="session:small")
            store.set_review_state(ids_big[0], "rejected")
        with (
            arms["before"][1].as_of(positions["before"]) as old,
            arms["after"][1].as_of(positions["after"]) as new,
        ):
            measure(
                "as of a position (a row written and one rejected since)",
                {"before": old, "after": new},
                old.now,
            )
        for backend, _store, _dialect in arms.values():
            backend.close()
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k rows (10k on PostgreSQL)")
    parser.add_argument("--postgres", action="store_true", help="also measure PostgreSQL (pgserver)")
    args = parser.parse_args()
    n = 20_000 if args.quick else 100_000
    base = Path(tempfile.mkdtemp(prefix="following-bench-"))
    try:
        met = [sqlite_arm(n, scopes, base) for scopes in (1, 20)]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.postgres:
        postgres_arm(n // 2)
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main())
