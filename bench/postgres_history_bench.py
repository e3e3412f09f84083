"""What the lifecycle history and consolidation cost on the PostgreSQL backend, measured in one
run on one pgserver (PostgreSQL 16.2) against the write path without them.

    python bench/postgres_history_bench.py            # 100k rows
    python bench/postgres_history_bench.py --quick    # 20k rows (a smoke run)

The baseline is the same store's insert and update statements without events and without
consolidation (what this backend did before it kept a history): ``prepare_row`` + ``_insert``
in one transaction, and a bare ``UPDATE ... RETURNING``. Single writes alternate with their
baseline write by write, medians reported. Also: an as-of read (list + search in the turn's
scopes) against the same reads through ``consistent_read``, with a few hundred rows changed
since the position; ``store copy`` of an embedded store with its history; and schema steps 4
and 5 on a database a schema-3 release filled. Results also go to
bench/results/postgres_history_bench*.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_data import text_corpus, text_queries

from contextplane.backends.sqlite import SQLiteBackend
from contextplane.memory.model import utc_now
from contextplane_postgres import PostgresBackend
from contextplane_postgres.copy import copy_store
from contextplane_postgres.database import Database
from contextplane_postgres.store import prepare_row

RESULTS: list[dict[str, Any]] = []
SCOPES = ["", "", "", "project:web", "session:s1"]


def record(name: str, **values: Any) -> None:
    RESULTS.append({"benchmark": name, **values})
    shown = ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
    print(f"  {name}: {shown}", flush=True)


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def paired(a: Callable[[int], Any], b: Callable[[int], Any], count: int) -> tuple[float, float]:
    """Median ms of ``a`` and ``b`` over ``count`` calls, alternating which runs first."""
    at, bt = [], []
    for i in range(count):
        if i % 2:
            bt.append(timed(lambda i=i: b(i)))
            at.append(timed(lambda i=i: a(i)))
        else:
            at.append(timed(lambda i=i: a(i)))
            bt.append(timed(lambda i=i: b(i)))
    return statistics.median(at), statistics.median(bt)


def rows_for(corpus: list[str], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "content": text,
            "domain": rng.choice(["general", "fact", "finding"]),
            "source_type": rng.choice(["operator", "extracted", "ingest"]),
            "namespace": rng.choice(SCOPES),
        }
        for text in corpus
    ]


def baseline_add(backend: PostgresBackend, rows: list[dict[str, Any]]) -> None:
    """The write without events or consolidation: validate, stamp, insert, in one transaction."""
    store = backend.memories
    now = utc_now()
    prepared = [prepare_row(row, now, i) for i, row in enumerate(rows)]
    with backend.db.transaction() as conn:
        store._insert(conn, prepared, None)


def baseline_review(backend: PostgresBackend, chunk_id: str, state: str) -> None:
    with backend.db.transaction() as conn:
        conn.execute(
            "UPDATE chunks AS c SET review_state = %s, updated_at = %s WHERE c.id = %s RETURNING c.id",
            (state, utc_now(), int(chunk_id)),
        ).fetchone()


def bench_ingest(url: str, corpus: list[str]) -> None:
    shipped = PostgresBackend(url, schema="ingest_new")
    bare = PostgresBackend(url, schema="ingest_old")
    rows = rows_for(corpus, 3)
    times = {"new": 0.0, "old": 0.0}
    for n, at in enumerate(range(0, len(rows), 5_000)):
        batch = rows[at : at + 5_000]
        order = (("new", shipped), ("old", bare)) if n % 2 == 0 else (("old", bare), ("new", shipped))
        for name, backend in order:
            if name == "new":
                times[name] += timed(lambda b=backend: b.memories.add_chunks(batch))
            else:
                times[name] += timed(lambda b=backend: baseline_add(b, batch))
    record(
        f"bulk ingest {len(rows)} rows (add_chunks, 5k per call): history + consolidation vs without",
        rows_per_s=round(len(rows) / times["new"] * 1000),
        baseline_rows_per_s=round(len(rows) / times["old"] * 1000),
        ratio=times["new"] / times["old"],
    )
    # single writes on the loaded stores
    count = 400
    stamp = time.time_ns()
    a, b = paired(
        lambda i: shipped.memories.add_chunk(
            f"single write {stamp} {i} about {corpus[i]}", "fact", "extracted"
        ),
        lambda i: baseline_add(bare, [{"content": f"single write {stamp} {i}", "source_type": "extracted"}]),
        count,
    )
    record(
        f"single add_chunk at {len(rows)} rows (duplicate, near-duplicate lookups, created event)",
        ms=a,
        baseline_ms=b,
        ratio=a / b,
    )
    ids = [c.id for c in shipped.memories.list_chunks(limit=count)]
    a, b = paired(
        lambda i: shipped.memories.set_review_state(ids[i], "confirmed" if i % 4 < 2 else "pending"),
        lambda i: baseline_review(bare, ids[i], "confirmed" if i % 4 < 2 else "pending"),
        count,
    )
    record(f"single set_review_state at {len(rows)} rows (review event)", ms=a, baseline_ms=b, ratio=a / b)
    # as-of reads: a position, then a few hundred changes, then the same reads then and now
    m = shipped.memories
    position = m.history_position()
    rng = random.Random(5)
    for cid in rng.sample([c.id for c in m.list_chunks(limit=20_000)], 300):
        m.set_review_state(cid, rng.choice(["rejected", "confirmed"]))
    m.add_chunks(rows_for([f"later {t}" for t in corpus[:200]], 9))
    queries = text_queries(60)

    def reads(view: Any, i: int) -> None:
        view.list_chunks(deliverable=True, delivery_policy="always", namespaces=["", "project:web"])
        view.search(queries[i % len(queries)], 10, namespaces=["", "project:web"])

    def past(i: int) -> None:
        with m.as_of(position) as view:
            reads(view, i)

    def present(i: int) -> None:
        with m.consistent_read() as view:
            reads(view, i)

    a, b = paired(past, present, 60)
    record(
        f"as-of read at {len(rows)} rows, 500 rows changed since (open + always-on list + search)",
        ms=a,
        consistent_read_ms=b,
        ratio=a / b,
    )
    shipped.close()
    bare.close()


def bench_copy(url: str, work: Path, corpus: list[str]) -> None:
    path = work / "copy.sqlite3"
    src = SQLiteBackend(path)
    ids = src.memories.add_chunks(rows_for(corpus, 4))
    rng = random.Random(6)
    for cid in rng.sample(ids, min(5_000, len(ids) // 4)):
        src.memories.set_review_state(cid, rng.choice(["confirmed", "rejected"]))
    # the file's events, through its public reads (a write batch's rows share one seq there)
    events = sum(len(src.memories.history(cid)) for cid in ids)
    position = src.memories.history_position().seq
    src.close()
    db = Database(url, schema="copied")
    start = time.perf_counter()
    result = copy_store(path, db)
    seconds = time.perf_counter() - start
    with db.connection() as conn:
        copied = conn.execute("SELECT count(*), max(seq) FROM chunk_history").fetchone()
    db.close()
    assert copied is not None and (int(copied[0]), int(copied[1])) == (events, position), (copied, events)
    record(
        f"store copy, {len(ids)} rows + {events} history events",
        seconds=seconds,
        rows_per_s=round(len(ids) / seconds),
        events_copied=result.table("chunk_history").copied,
    )


def bench_step_4(url: str, corpus: list[str]) -> None:
    """Schema step 4 on a database the previous release (schema 3) filled: the DDL, one
    ``migrated`` event per row and every row's content key, in the one transaction of the step."""
    Database(url, schema="old", target_version=3).close()
    with (
        psycopg.connect(url, autocommit=True) as conn,
        conn.cursor().copy(
            "COPY old.chunks (content, domain, source_type, namespace, memory_kind, review_state, "
            "created_at, updated_at) FROM STDIN"
        ) as copy,
    ):
        for i, text in enumerate(corpus):
            copy.write_row(
                (text, "fact", "operator", SCOPES[i % 5], "fact", "confirmed", utc_now(), utc_now())
            )
    start = time.perf_counter()
    backend = PostgresBackend(url, schema="old")
    seconds = time.perf_counter() - start
    events = backend.memories.history_position().seq
    backend.close()
    assert events == len(corpus), events
    record(
        f"schema steps 4 and 5 on a {len(corpus)}-row schema-3 database (open: events + content keys, "
        "then the history's key)",
        seconds=seconds,
        rows_per_s=round(len(corpus) / seconds),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="20k rows")
    parser.add_argument("--only", choices=["writes", "copy", "migrate"], help="run one part")
    args = parser.parse_args()
    rows = 20_000 if args.quick else 100_000
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}, "
        f"psycopg {psycopg.__version__}, load average at start {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    base = Path(tempfile.mkdtemp(prefix="pg-hbench-"))
    work = Path(tempfile.mkdtemp(prefix="pg-hbench-work-"))
    server = pgserver.get_server(base / "data", cleanup_mode="delete")
    try:
        url = server.get_uri()
        corpus = [f"{t} #{i}" for i, t in enumerate(text_corpus(rows))]
        if args.only in (None, "writes"):
            print("Writes and as-of reads", flush=True)
            bench_ingest(url, corpus)
        if args.only in (None, "copy"):
            print("Copy", flush=True)
            bench_copy(url, work, corpus)
        if args.only in (None, "migrate"):
            print("Schema step 4", flush=True)
            bench_step_4(url, corpus)
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    name = "postgres_history_bench_quick.json" if args.quick else "postgres_history_bench.json"
    (out / name).write_text(json.dumps(RESULTS, indent=2) + "\n")


if __name__ == "__main__":
    main()
