"""Retrieval at scale, measured the way a runtime calls it (issue 11).

    python bench/scale_bench.py                      # N = 10k and 100k, one scope and 20 scopes
    python bench/scale_bench.py --sizes 10000        # one size (iteration)
    python bench/scale_bench.py --million            # adds N = 1M (one scope; long: ~10+ minutes)
    python bench/scale_bench.py --profile            # also print a cProfile of compose at each N

Every figure comes from the public path: the standard sections loaded from the
``contextplane`` entry points, ``compose_projected_context(query, backend, ...)`` with
``record=True`` (the records observer writes the injection log and the trajectory), the turn's
scopes (global, ``project:p0``, ``session:...``), a 4,000-token budget, the retrieved section's default depth (as many rows as the budget could
hold, ``context.retrieved_max``; before issue 21 the bench fixed ``retrieved_k = 20``), 20 always-on facts, natural-language questions of 8 to 15 words (stop words included),
hybrid retrieval with an embedder and, on the same file opened without one, FTS only. The
corpus, the questions and the embedder are described in bench/scale_data.py.

Layouts: "1 scope" puts every memory in the turn's project scope; "20 scopes" spreads them
over 20 project scopes and composes from one (a twentieth of the store in scope).

Reported per N and layout: ingest rows/s through ``add_chunks`` (batches of 5,000, vectors
included; the index training the store does on its own is inside the figure), the seconds of
``contextplane memory reindex`` after it (``reindex_vectors`` + ``train_vector_index``: the
store retrains inside a write only up to 65,536 vectors) and the rate with it, DB size, RSS,
compose p50/p95 (ms of wall time, and of the thread's CPU time: the machine may be shared, and
CPU time is what contention does not inflate) with and without the embedder, relevance (the share of questions whose
target memory is delivered, with and without the embedder), the retrieved rows delivered for
off-corpus questions (target: none), and, to explain the compose figure, the p50 of the two
memory reads alone (``search``, ``list_chunks``) and of compose recorded and unrecorded,
alternated question by question (a recorded turn that slowed the next turn's reads shows here).

Targets (issue 11): compose p50 <= 8 ms and p95 <= 12 ms at 100k in one scope; p50 <= 50 ms at
1M; 20 scopes p95 <= 2x the one-scope p95 at 100k; relevance at 100k >= 0.38 (the figure
before this work); ingest >= 10k rows/s at 1M; off-corpus questions inject nothing.
Results also go to bench/results/scale-<time>.json.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import platform
import pstats
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_data import Corpus, HashingEmbedder, always_on_facts, off_corpus_queries, queries

from contextplane import compose_projected_context
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import Config
from contextplane.plugins import PluginHost

BATCH = 5_000
BUDGET_TOKENS = 4_000
#: The depth the retrieved section searches at this budget (its ``depth``), for the read alone.
RETRIEVED_K = BUDGET_TOKENS * 4 // 80
SCOPES = 20
RESULTS: list[dict[str, Any]] = []


def record(name: str, **values: Any) -> None:
    RESULTS.append({"benchmark": name, **values})
    shown = ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
    print(f"  {name}: {shown}", flush=True)


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def db_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 2**20


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def config() -> Config:
    base = Config()
    context = attrs.evolve(base.context, project="p0")
    return attrs.evolve(base, context=context)


def ingest(
    path: Path, corpus: Corpus, embedder: HashingEmbedder | None, scopes: int, cfg: Config
) -> tuple[float, float]:
    """Write the facts and the corpus through the public API; return the corpus rows per
    second of wall time and of this thread's CPU time."""
    backend = SQLiteBackend(path, config=cfg, embedder=embedder)
    store = backend.memories
    store.add_chunks(
        {"content": fact, "delivery_policy": "always", "source_type": "operator"}
        for fact in always_on_facts()
    )
    texts = corpus.texts
    start, start_cpu = time.perf_counter(), time.thread_time()
    for at in range(0, len(texts), BATCH):
        store.add_chunks(
            {"content": texts[i], "source_type": "conversation", "namespace": f"project:p{i % scopes}"}
            for i in range(at, min(at + BATCH, len(texts)))
        )
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - start_cpu
    backend.close()
    return len(texts) / elapsed, len(texts) / cpu


def reindex(path: Path, embedder: HashingEmbedder, cfg: Config) -> float:
    """What ``contextplane memory reindex`` does (retrain the vector index once it has outgrown
    inline retraining); seconds."""
    backend = SQLiteBackend(path, config=cfg, embedder=embedder)
    start = time.perf_counter()
    backend.memories.reindex_vectors()
    backend.memories.train_vector_index()
    elapsed = time.perf_counter() - start
    backend.close()
    return elapsed


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def run_queries(
    backend: SQLiteBackend, host: PluginHost, questions: Sequence[str], targets: Sequence[int], ids: Sequence[str]
) -> dict[str, Any]:
    """Compose every question once (after a warm-up); latencies, relevance."""
    state = {"goal": "Ship the release", "tasks": ["Check the notes", "Ask the on-call lead"]}

    def compose(i: int, *, record: bool = True) -> Any:
        return compose_projected_context(
            questions[i], backend, None, state, session_id=f"bench-{i % 10}", turn_index=i,
            budget_tokens=BUDGET_TOKENS, record=record, host=host,
        )

    for i in range(min(10, len(questions))):
        compose(i)
    times: list[float] = []
    cpu: list[float] = []
    hits = 0
    for i in range(len(questions)):
        start, start_cpu = time.perf_counter(), time.thread_time()
        projection = compose(i)
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - start_cpu) * 1000)
        delivered = projection.delivered_ids.get("retrieved", ())
        hits += ids[targets[i]] in delivered
    return {
        "p50": statistics.median(times),
        "p95": pct(times, 95),
        "cpu_p50": statistics.median(cpu),
        "cpu_p95": pct(cpu, 95),
        "relevance": hits / len(questions),
    }


def explain(backend: SQLiteBackend, host: PluginHost, questions: Sequence[str]) -> dict[str, float]:
    """p50 of the pieces: search alone, the always-on list alone, and compose with and without
    recording: the same questions in blocks of 10, each block run both ways, which first
    alternating (a recording that slowed the next turn's reads shows as the difference)."""
    store = backend.memories
    scopes = ["", "project:p0", "session:bench-0"]
    search, listing = [], []
    composed: dict[bool, list[float]] = {False: [], True: []}
    for q in questions:
        with store.consistent_read() as view:
            search.append(timed(lambda q=q: view.search(q, RETRIEVED_K, deliverable=True, namespaces=scopes)))
            listing.append(
                timed(lambda: view.list_chunks(deliverable=True, delivery_policy="always", namespaces=scopes))
            )
    for b, at in enumerate(range(0, len(questions), 10)):
        for record in (False, True) if b % 2 == 0 else (True, False):
            for i, q in enumerate(questions[at : at + 10], start=at):
                composed[record].append(
                    timed(
                        lambda q=q, i=i, record=record: compose_projected_context(
                            q, backend, None, {}, session_id="bench-0", turn_index=i,
                            budget_tokens=BUDGET_TOKENS, record=record, host=host,
                        )
                    )
                )
    return {
        "search_p50": statistics.median(search),
        "list_always_p50": statistics.median(listing),
        "compose_unrecorded_p50": statistics.median(composed[False]),
        "compose_recorded_p50": statistics.median(composed[True]),
    }


def off_corpus(backend: SQLiteBackend, host: PluginHost) -> float:
    """Mean retrieved rows delivered for questions no memory answers (target 0)."""
    delivered = []
    for i, q in enumerate(off_corpus_queries(20)):
        projection = compose_projected_context(
            q, backend, None, {}, session_id="bench-off", turn_index=i, budget_tokens=BUDGET_TOKENS, host=host
        )
        delivered.append(len(projection.delivered_ids.get("retrieved", ())))
    return float(statistics.mean(delivered))


def bench_size(work: Path, n: int, scopes: int, count: int, profile: bool) -> None:
    label = f"N={n}, {scopes} scope{'s' if scopes > 1 else ''}"
    print(f"{label}: building the corpus", flush=True)
    corpus = Corpus(n)
    embedder = HashingEmbedder()
    start = time.perf_counter()
    embedder.preload(corpus.texts, embedder.fit_matrix(corpus.texts))
    embed_rate = n / (time.perf_counter() - start)
    path = work / f"scale-{n}-{scopes}.sqlite3"
    cfg = config()
    rate, cpu_rate = ingest(path, corpus, embedder, scopes, cfg)
    reindex_s = reindex(path, embedder, cfg)
    rng = np.random.default_rng(5)
    in_scope = np.arange(0, n, scopes)
    targets = rng.choice(in_scope, size=min(count, len(in_scope)), replace=False).tolist()
    questions = queries(corpus, targets)
    # ids: facts took 1..20, the corpus follows in order
    ids = [str(21 + i) for i in range(n)]
    host = PluginHost.from_entry_points(cfg)
    out: dict[str, Any] = {
        "n": n,
        "scopes": scopes,
        "ingest_rows_s": rate,
        "ingest_cpu_rows_s": cpu_rate,
        "reindex_s": reindex_s,
        "ingest_and_reindex_rows_s": n / (n / rate + reindex_s),
        "embedder_rows_s": embed_rate,
    }
    for mode, emb in (("hybrid", embedder), ("fts", None)):
        backend = SQLiteBackend(path, config=cfg, embedder=emb)
        gc.collect()
        result = run_queries(backend, host, questions, targets, ids)
        out[f"{mode}_p50_ms"] = result["p50"]
        out[f"{mode}_p95_ms"] = result["p95"]
        out[f"{mode}_cpu_p50_ms"] = result["cpu_p50"]
        out[f"{mode}_cpu_p95_ms"] = result["cpu_p95"]
        out[f"{mode}_relevance"] = result["relevance"]
        out[f"{mode}_off_corpus_rows"] = off_corpus(backend, host)
        for key, value in explain(backend, host, questions[:50]).items():
            out[f"{mode}_{key}"] = value
        if profile and mode == "hybrid":
            profiler = cProfile.Profile()
            profiler.enable()
            run_queries(backend, host, questions[:50], targets[:50], ids)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        backend.close()
    out["db_mb"] = db_mb(path)
    out["rss_mb"] = rss_mb()
    out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    record(f"compose {label}", **{k: v for k, v in out.items() if k not in ("n", "scopes")})
    del corpus, embedder
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    shutil.rmtree(path.parent / "trajectories", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--million", action="store_true", help="add N = 1,000,000 (one scope)")
    parser.add_argument("--layouts", type=int, nargs="+", default=[1, SCOPES], help="scope counts")
    parser.add_argument("--queries", type=int, default=200, help="questions per run (1M: half)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--work", type=Path, default=None, help="directory for the stores (default: temp)")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores", flush=True)
    work = Path(tempfile.mkdtemp(prefix="cp-scale-", dir=args.work))
    try:
        for n in args.sizes:
            for scopes in args.layouts:
                bench_size(work, n, scopes, args.queries, args.profile)
        if args.million:
            bench_size(work, 1_000_000, 1, max(50, args.queries // 2), args.profile)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    target = out / f"scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    target.write_text(json.dumps(RESULTS, indent=2))
    print(f"results: {target}")


if __name__ == "__main__":
    main()
