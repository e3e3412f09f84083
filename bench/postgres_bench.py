"""PostgreSQL backend benchmark: the store against hand-written SQL and against the embedded
store, measured in the same run on one pgserver (PostgreSQL 16.2, pgvector 0.6.2).

    python bench/postgres_bench.py            # 100k rows x 384 dims, 100k-row copy
    python bench/postgres_bench.py --quick    # 20k rows, 20k-row copy (a smoke run)

Targets (issue 12):
  hybrid search, 100k x 384        <= 1.3x the same statement hand-written (psycopg, no store)
  vector leg recall@10             >= 0.95 vs exact float KNN, at the backend's default settings
  compose p50, 100k                PostgreSQL vs the embedded SQLite store, reported
  copy, 100k-row embedded store    counts, chains and states equal after a kill -9 and a resume

Also reported: the full-text bound (a one-frequent-word query: ranking capped vs every match
ranked), a 1%-selective scope filter (rows returned by the raw ``ORDER BY embedding <=> q
LIMIT k`` against the store's search, which falls back to an exact scan), and recall at
pgvector's own ``ef_search`` default (40). Every latency is a median over the query set, store
and baseline interleaved query by query. Data: bench/store_data.py (Zipf text, a 64-cluster
anisotropic Gaussian mixture for vectors); queries are natural-language sentences around
corpus words. Results also go to bench/results/postgres_bench*.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_data import _words, clustered_vectors, text_corpus, text_queries

from contextplane import PluginHost, compose_projected_context
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.store import SQLiteKnowledgeStore
from contextplane_postgres import PostgresBackend
from contextplane_postgres.copy import cursor_key
from contextplane_postgres.history import latest_seq
from contextplane_postgres.sql import FTS_CAP, term_params

DIMS = 384
RESULTS: list[dict[str, Any]] = []
REPO = Path(__file__).resolve().parents[1]


class LookupEmbedder:
    """Pre-generated vectors for known texts, so timings measure the stores, not a model."""

    def __init__(self, texts: Sequence[str], matrix: np.ndarray) -> None:
        self._index = {t: i for i, t in enumerate(texts)}
        self._matrix = matrix

    @property
    def dimensions(self) -> int:
        return int(self._matrix.shape[1])

    @property
    def name(self) -> str:
        return "bench-lookup"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._matrix[self._index[t]].tolist() for t in texts]


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def paired(a: Callable[[int], Any], b: Callable[[int], Any], count: int) -> tuple[float, float]:
    """Median ms of ``a`` and ``b`` over ``count`` queries, alternating which runs first."""
    for i in range(min(5, count)):
        a(i)
        b(i)
    at, bt = [], []
    for i in range(count):
        if i % 2:
            bt.append(timed(lambda i=i: b(i)))
            at.append(timed(lambda i=i: a(i)))
        else:
            at.append(timed(lambda i=i: a(i)))
            bt.append(timed(lambda i=i: b(i)))
    return statistics.median(at), statistics.median(bt)


def record(name: str, **values: Any) -> None:
    RESULTS.append({"benchmark": name, **values})
    shown = ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
    print(f"  {name}: {shown}", flush=True)


# --------------------------------------------------------------------------- data

SCOPES = ["", "", "", "", "", "", "", "project:web", "project:web", "session:s1"]


def rows_for(corpus: list[str], seed: int = 11) -> list[dict[str, Any]]:
    """The corpus as memory rows: 20 always-on operator rows, the rest retrieved; a spread of
    provenance and scopes, and 1% in a rare scope (the selective-filter case)."""
    rng = random.Random(seed)
    out = []
    for i, text in enumerate(corpus):
        row: dict[str, Any] = {
            "content": text,
            "domain": "hot" if i < 20 else rng.choice(["general", "fact", "finding", "preferences"]),
            "source_type": rng.choice(["operator", "extracted", "ingest"]),
            "namespace": "project:rare" if i % 100 == 7 else rng.choice(SCOPES),
        }
        out.append(row)
    return out


def sentences(words: list[str]) -> list[str]:
    forms = [
        "what do we know about {} and {}?",
        "remind me how {} relates to {}",
        "is there a note on {} {}?",
    ]
    out = []
    for i, w in enumerate(words):
        parts = w.split()
        out.append(forms[i % 3].format(parts[0], " ".join(parts[1:]) or parts[0]))
    return out


# --------------------------------------------------------------------------- the server


def start_server() -> tuple[Any, Path]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    base = Path(tempfile.mkdtemp(prefix="pg-bench-"))
    return pgserver.get_server(base / "data", cleanup_mode="delete"), base


def raw_conn(url: str, schema: str, ef_search: int = 200) -> psycopg.Connection[Any]:
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(
        url, autocommit=True, options=f"-c search_path={schema},public -c hnsw.ef_search={ef_search}"
    )
    register_vector(conn)
    return conn


def load_postgres(
    url: str, schema: str, rows: list[dict[str, Any]], embedder: LookupEmbedder
) -> PostgresBackend:
    """Bulk load through the store's own ``add_chunks``, with the HNSW index built after the load
    (as a bulk load would: incremental HNSW inserts are several times slower)."""
    backend = PostgresBackend(url, schema=schema, embedder=embedder, pool_max_size=4)
    with raw_conn(url, schema) as conn:
        conn.execute("DROP INDEX chunks_embedding")
    start = time.perf_counter()
    for at in range(0, len(rows), 5_000):
        backend.memories.add_chunks(rows[at : at + 5_000])
    ingest = time.perf_counter() - start
    start = time.perf_counter()
    with raw_conn(url, schema) as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("CREATE INDEX chunks_embedding ON chunks USING hnsw (embedding vector_cosine_ops)")
        conn.execute("VACUUM ANALYZE chunks")
    build = time.perf_counter() - start
    record(
        "postgres ingest (add_chunks, 5k per call)", rows_per_s=round(len(rows) / ingest), hnsw_build_s=build
    )
    return backend


def load_sqlite(path: Path, rows: list[dict[str, Any]], embedder: LookupEmbedder) -> SQLiteBackend:
    store = SQLiteKnowledgeStore(path, embedder=embedder, vector_index_min_rows=10**12)
    start = time.perf_counter()
    for at in range(0, len(rows), 20_000):
        store.add_chunks(rows[at : at + 20_000])
    store.train_vector_index()
    record("sqlite ingest + IVF training", seconds=time.perf_counter() - start)
    return SQLiteBackend(path, memories=store)


# --------------------------------------------------------------------------- search

DELIVERABLE = (
    "(c.review_state IS NULL OR c.review_state <> 'rejected') AND (c.expires_at IS NULL OR c.expires_at > now()) "
    "AND c.invalidated_at IS NULL AND c.namespace = ANY(%(ns)s)"
)
COLUMNS = (
    "c.id, c.content, c.domain, c.source_type, c.memory_kind, c.delivery_policy, c.review_state, c.namespace, "
    "c.heading, c.source, c.subject, c.epoch, c.invalidated_at, c.invalidation_reason, c.expires_at, "
    "c.created_at, c.updated_at"
)
#: What one would write by hand for the same answer: both legs filtered, the full-text leg
#: scored by the IDF share of the query's scored terms (their weights computed beforehand) over
#: its newest matches, fused by relevance (lexical + cosine), as the store does.
def raw_hybrid(terms: int) -> str:
    lex = " + ".join(
        f"CASE WHEN t.tsv @@ to_tsquery('simple', %(t{i})s) THEN %(w{i})s::float8 ELSE 0.0 END"
        for i in range(terms)
    )
    fts = f"""fts AS (SELECT t.id, least(1.0, {lex}) AS lex, ts_rank(t.tsv, to_tsquery('simple', %(q)s), 1) AS s
    FROM (SELECT c.id, c.tsv FROM chunks AS c WHERE c.tsv @@ to_tsquery('simple', %(q)s) AND {DELIVERABLE}
        ORDER BY c.id DESC LIMIT {FTS_CAP}) AS t
    ORDER BY lex DESC, s DESC, t.id LIMIT 40),"""
    union = "SELECT id, lex, NULL::float8 AS sim FROM fts UNION ALL " if terms else ""
    return f"""
WITH {fts if terms else ""}
vec AS (SELECT c.id, 1.0 - (c.embedding <=> %(v)s) AS sim FROM chunks AS c WHERE {DELIVERABLE}
    ORDER BY c.embedding <=> %(v)s LIMIT 40),
fused AS (SELECT id, coalesce(max(lex), 0.0) AS lex, greatest(coalesce(max(sim), 0.0), 0.0) AS sim
    FROM ({union}SELECT id, NULL::float8 AS lex, sim FROM vec) AS u GROUP BY id)
SELECT {COLUMNS}, fused.lex + fused.sim AS score, greatest(fused.lex, fused.sim) AS relevance
FROM fused JOIN chunks AS c ON c.id = fused.id ORDER BY score DESC, c.id LIMIT 10
"""


RAW_FTS_UNBOUNDED = f"""
SELECT c.id, ts_rank(c.tsv, q, 1) AS s FROM chunks AS c, to_tsquery('simple', %(q)s) AS q
WHERE c.tsv @@ q AND {DELIVERABLE} ORDER BY s DESC, c.id LIMIT 40
"""


def bench_search(
    url: str,
    schema: str,
    pg: PostgresBackend,
    data: np.ndarray,
    qtexts: list[str],
    qvecs: np.ndarray,
    words: list[str],
) -> None:
    store = pg.memories
    scopes = ["", "project:web", "session:s1"]
    conn = raw_conn(url, schema)
    # the hand-written statement gets the store's term plan as precomputed parameters
    raw: list[tuple[str, dict[str, Any]]] = []
    with pg.db.connection() as plan_conn:
        version = ("present", latest_seq(plan_conn))
        for i, text in enumerate(qtexts):
            plan = store._term_stats.plan(plan_conn, text, version)
            params: dict[str, Any] = {"v": qvecs[i], "ns": scopes}
            term_params(plan, params)
            raw.append((raw_hybrid(len(plan.terms)), params))
    n = len(qtexts)
    store_ms, raw_ms = paired(
        lambda i: store.search(qtexts[i], 10, namespaces=scopes),
        lambda i: conn.execute(raw[i][0], raw[i][1], prepare=False).fetchall(),  # as the store does
        n,
    )
    same = sum(
        [h.chunk.id for h in store.search(qtexts[i], 10, namespaces=scopes)]
        == [str(r[0]) for r in conn.execute(raw[i][0], raw[i][1])]
        for i in range(min(n, 50))
    )
    record(
        "hybrid search, store vs hand-written SQL",
        store_ms=store_ms,
        raw_ms=raw_ms,
        ratio=store_ms / raw_ms,
        same_ids=f"{same}/{min(n, 50)}",
        target="<= 1.3x",
        met=store_ms / raw_ms <= 1.3,
    )

    # the full-text bound: the most frequent corpus word matches a large share of the rows
    frequent = words[0]
    matches = conn.execute(
        "SELECT count(*) FROM chunks WHERE tsv @@ to_tsquery('simple', %s)", (f"'{frequent}'",)
    )
    matched = matches.fetchone()[0]
    fts_only = PostgresBackend(url, schema=schema, pool_max_size=2)  # no embedder: full text only
    capped, unbounded = paired(
        lambda i: fts_only.memories.search(f"tell me about {frequent}", 10, namespaces=scopes),
        lambda i: conn.execute(
            RAW_FTS_UNBOUNDED, {"q": f"'tell' | 'me' | 'about' | '{frequent}'", "ns": scopes}
        ).fetchall(),
        30,
    )
    fts_only.close()
    record(
        f"one frequent word ({matched} matching rows): ranking capped at {FTS_CAP} vs all ranked",
        store_ms=capped,
        unbounded_ms=unbounded,
    )

    # recall@10 of the vector leg (HNSW, the backend's settings) against exact KNN
    exact = [set(np.argsort(-(data @ q))[:10].tolist()) for q in qvecs]
    found = [[int(i) - 1 for i in store.vector_neighbours(qtexts[i], 10)] for i in range(n)]
    recall = statistics.mean(len(set(f) & e) / 10 for f, e in zip(found, exact, strict=True))
    leg_ms = statistics.median(timed(lambda i=i: store.vector_neighbours(qtexts[i], 10)) for i in range(n))
    record("vector leg recall@10 (HNSW m=16, ef_construction=64, ef_search=200)", recall=recall, median_ms=leg_ms,
           target=">= 0.95", met=recall >= 0.95)  # fmt: skip
    with raw_conn(url, schema, ef_search=40) as low:
        got = [
            [int(r[0]) - 1 for r in low.execute(
                "SELECT id FROM chunks ORDER BY embedding <=> %s LIMIT 10", (qvecs[i],))]
            for i in range(n)
        ]  # fmt: skip
    record("vector leg recall@10 at pgvector's default ef_search=40 (for reference)",
           recall=statistics.mean(len(set(f) & e) / 10 for f, e in zip(got, exact, strict=True)))  # fmt: skip

    # a 1%-selective scope: what the raw index scan returns, what the store returns
    rare = ["project:rare"]
    raw_counts = [
        len(conn.execute(
            f"SELECT c.id FROM chunks AS c WHERE {DELIVERABLE} ORDER BY c.embedding <=> %(v)s LIMIT 10",
            {"v": qvecs[i], "ns": rare}).fetchall())
        for i in range(n)
    ]  # fmt: skip
    store_counts = [len(store.search(qtexts[i], 10, namespaces=rare)) for i in range(n)]
    rare_ms = statistics.median(
        timed(lambda i=i: store.search(qtexts[i], 10, namespaces=rare)) for i in range(n)
    )
    record(
        "1%-selective scope, k=10",
        raw_index_rows_median=statistics.median(raw_counts),
        raw_index_rows_min=min(raw_counts),
        store_rows_min=min(store_counts),
        store_ms=rare_ms,
    )
    conn.close()


# --------------------------------------------------------------------------- compose


def bench_compose(sqlite: SQLiteBackend, pg: PostgresBackend, queries: list[str]) -> None:
    config = structure(
        {"context": {"context_window": 200_000, "project": "web", "prior_sessions": "relevant"}}
    )
    host = PluginHost.from_entry_points(config)
    state = {"goal": "Ship checkout", "tasks": ["Ask Priya", "Book the window"]}
    for b in (sqlite, pg):
        for s in range(20):
            b.summaries.add(f"old-{s}", f"session {s}: {queries[s]} was discussed", topic=queries[s][:30])

    def turn(backend: Any, i: int) -> Any:
        return compose_projected_context(
            queries[i % len(queries)], backend, state, session_id="s1", turn_index=i, context_window=200_000,
            host=host,
        )  # fmt: skip

    sizes = (len(turn(sqlite, 0).text), len(turn(pg, 0).text))
    pg_ms, sqlite_ms = paired(lambda i: turn(pg, i), lambda i: turn(sqlite, i), len(queries))
    record(
        "compose_projected_context p50 (standard sections, record=True)",
        postgres_ms=pg_ms,
        sqlite_ms=sqlite_ms,
        ratio=pg_ms / sqlite_ms,
        chars=f"{sizes[1]} / {sizes[0]}",
    )


# --------------------------------------------------------------------------- copy


def build_copy_source(path: Path, corpus: list[str]) -> dict[str, Any]:
    store = SQLiteKnowledgeStore(path)
    rows = rows_for(corpus, seed=5)
    for at in range(0, len(rows), 20_000):
        store.add_chunks(rows[at : at + 20_000])
    rng = random.Random(3)
    ids = [str(i) for i in range(1, len(rows) + 1)]
    chains = 0
    for start in rng.sample(ids, 500):
        cur = start
        for _ in range(rng.randint(1, 3)):
            cur = store.supersede(cur, f"newer version of {start}")
        chains += 1
    for cid in rng.sample(ids, 2_000):
        if store.get(cid).invalidated_at is None:
            store.set_review_state(cid, rng.choice(["confirmed", "rejected"]))
    store.close()
    return {"chains": chains}


def bench_copy(url: str, work: Path, corpus: list[str]) -> None:
    src = work / "copy-source.sqlite3"
    build_copy_source(src, corpus)
    schema = "copybench"
    cmd = [sys.executable, "-m", "contextplane", "store", "copy", str(src), url, "--schema", schema,
           "--batch-rows", "2000"]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    key = cursor_key(src)
    killed_at = None
    with psycopg.connect(url, autocommit=True) as conn:
        while proc.poll() is None:
            time.sleep(0.05)
            try:
                row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = %s", (key,)).fetchone()
            except psycopg.errors.UndefinedTable:
                continue
            if row and json.loads(row[0]).get("chunks", 0) >= len(corpus) * 0.4:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                killed_at = conn.execute(f"SELECT count(*) FROM {schema}.chunks").fetchone()[0]
                break
    first = time.perf_counter() - start
    start = time.perf_counter()
    resumed = subprocess.run([*cmd, "--json"], cwd=REPO, capture_output=True, text=True, check=True)
    second = time.perf_counter() - start
    report = json.loads(resumed.stdout)
    sqlite = SQLiteKnowledgeStore(src)
    a = sqlite.list_chunks()
    sqlite.close()
    dst = PostgresBackend(url, schema=schema, pool_max_size=2)
    b = dst.memories.list_chunks()
    dst.close()
    states = lambda rows: sorted((c.id, c.review_state, c.invalidation_reason, c.expires_at) for c in rows)  # noqa: E731
    record(
        f"store copy of {len(a)} rows, SIGKILL at 40% then resumed",
        killed_with_rows=killed_at,
        resumed=report["resumed"],
        counts_equal=len(a) == len(b),
        rows_equal=a == b,
        chains_and_states_equal=states(a) == states(b),
        superseded=sum(1 for c in b if c.superseded_by),
        rows_per_s=round(len(a) / (first + second)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="20k rows")
    parser.add_argument("--no-copy", action="store_true", help="skip the copy benchmark")
    args = parser.parse_args()
    rows = 20_000 if args.quick else 100_000
    queries = 60 if args.quick else 200
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}, "
        f"psycopg {psycopg.__version__}, load average at start {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    server, base = start_server()
    url = server.get_uri()
    with psycopg.connect(url) as conn:
        print(f"server: {conn.execute('SELECT version()').fetchone()[0][:30]}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="pg-bench-work-"))
    try:
        corpus = [f"{t} #{i}" for i, t in enumerate(text_corpus(rows))]
        data, qvecs = clustered_vectors(rows, queries)
        words = text_queries(queries)
        qtexts = sentences(words)
        embedder = LookupEmbedder([*corpus, *qtexts], np.vstack([data, qvecs]))
        memory_rows = rows_for(corpus)
        print(f"Loading {rows} rows x {DIMS} dims into PostgreSQL and SQLite", flush=True)
        pg = load_postgres(url, "bench", memory_rows, embedder)
        sqlite = load_sqlite(work / "bench.sqlite3", memory_rows, embedder)
        # the corpus vocabulary in Zipf rank order (the same seed as text_corpus): [0] is the most frequent
        ranked = [str(w) for w in _words(np.random.default_rng(1))]
        print("Search", flush=True)
        bench_search(url, "bench", pg, data, qtexts, qvecs, ranked)
        print("Compose", flush=True)
        bench_compose(sqlite, pg, qtexts)
        pg.close()
        sqlite.close()
        if not args.no_copy:
            print("Copy", flush=True)
            bench_copy(url, work, corpus)
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print()
    for row in RESULTS:
        figures = {k: v for k, v in row.items() if k != "benchmark"}
        text = ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items())
        print(f"{row['benchmark']}: {text}")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / f"postgres_bench{'_quick' if args.quick else ''}.json").write_text(
        json.dumps(RESULTS, indent=2, default=str)
    )


if __name__ == "__main__":
    main()
