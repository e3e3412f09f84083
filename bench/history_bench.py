"""Lifecycle-history benchmark (issue 14): what the history costs writes, and what explain costs.

    python bench/history_bench.py            # 100k rows
    python bench/history_bench.py --quick    # 20k rows (a smoke run)

Targets:
  history write overhead, bulk ingest     <= 1.15x the same store with the history seams off
  history write overhead, single writes   <= 1.15x (add_chunk; and review-state changes)
  explain one memory, 100k rows           < 50 ms median (a recorded turn, the store changed since)

Single writes are measured on copies of the bulk-loaded store with its full-text segments
merged (``optimize``), so they measure a steady state rather than FTS5's merging after a bulk
load. Baselines run in the same invocation: the baseline store is the same class with its four
history seams (``_log_created``, ``_record_created``, ``_change``, ``_record_purged``) doing the
write without its history (``_change`` makes the same ``UPDATE`` with no entry and no log row),
so the ratio is the history's cost and nothing else (consolidation runs in both). Arms are
interleaved batch by batch / write by write, so load from other processes hits both alike.

For comparison (reported, not targets), against the same baseline in the same state: the
review-state change with version 3's layout, the event in a table of its own with a per-row
index (``TableHistoryStore``: two more 4 KiB WAL frames per commit, which is why version 4 keeps
a row's history in the row, ``contextplane.store.history``); and the store-wide log row alone,
with no entry (``LogOnlyStore``, not a usable history): what an exact store-wide order costs by
itself, one insert and the one more WAL frame of the log's last page, the floor under any
history whose positions are exact.

Explain is measured on the path a user takes: a recorded turn composed by
``compose_projected_context`` with the standard memory sections (working state, always-on,
the digest, retrieved) and ``record=True`` on the embedded backend, then rows reviewed after
it, then ``explain(memory, session, turn)`` for memories with different verdicts. Two more
cases are reported: rows *written* after the turn (the as-of view rebuilds the full-text
statistics of the corpus as it stood, an O(rows) step) and the same with ``exact_ranking``
off (ranks from today's statistics).

A migrated store (issue 11: the migration visits no row for the history or the content key) is
reported too: the history's start and the content-key pass of a 1M-row migration; writes while
its keys are pending (duplicates looked up through the full-text index) against the same store
keyed; and a review-state change on it against a store written with its history.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_data import build_v1_store, text_corpus, text_queries

from contextplane import compose_projected_context, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.explain import explain
from contextplane.store import SQLiteKnowledgeStore, migrate
from contextplane.store import history as store_history
from contextplane.store.connection import connect
from contextplane_sections import always_on, prior_sessions, retrieved, working_state

RESULTS: list[dict[str, Any]] = []


class NoHistoryStore(SQLiteKnowledgeStore):
    """The baseline: the same store with the history writes taken out."""

    def _log_created(self, conn: apsw.Connection, ids: range, at: str) -> int | None:
        return None

    def _record_created(self, conn: apsw.Connection, details: dict[int, str]) -> None:
        pass

    def _change(
        self, conn: apsw.Connection, chunk_id: int, sets: str, params: Any, event: str, actor: str, at: str, **kw: Any
    ) -> None:
        if not store_history.plain_change(conn, chunk_id, sets, params):
            raise AssertionError(f"no row {chunk_id}")

    def _record_purged(self, conn: apsw.Connection, where: str, params: Mapping[str, Any], at: str) -> None:
        pass


_V3_EVENT = (
    "INSERT INTO chunk_history(chunk_id, at, event, actor, review_state, expires_at, invalidated_at, "
    "invalidation_reason, updated_at, detail) SELECT id, ?, ?, ?, review_state, expires_at, invalidated_at, "
    "invalidation_reason, updated_at, ? FROM chunks WHERE id = ?"
)


class LogOnlyStore(NoHistoryStore):
    """The floor of an exact order, not a usable history: the change's ``chunk_log`` row and the
    change as the baseline makes it, no entry in the row."""

    def _change(
        self, conn: apsw.Connection, chunk_id: int, sets: str, params: Any, event: str, actor: str, at: str, **kw: Any
    ) -> None:
        conn.execute("INSERT INTO chunk_log(chunk_id, at) VALUES (?, ?)", (chunk_id, at))
        super()._change(conn, chunk_id, sets, params, event, actor, at)


class TableHistoryStore(NoHistoryStore):
    """Version 3's layout, for comparison: the change as the baseline makes it, then its event
    in ``chunk_history`` (``migrate.V3_HISTORY_SQL``: a table with a per-row index)."""

    def _change(
        self, conn: apsw.Connection, chunk_id: int, sets: str, params: Any, event: str, actor: str, at: str, **kw: Any
    ) -> None:
        super()._change(conn, chunk_id, sets, params, event, actor, at)
        detail = kw.get("detail")
        conn.execute(_V3_EVENT, (at, event, actor, None if detail is None else json.dumps(detail), chunk_id))


def record(name: str, **values: Any) -> None:
    RESULTS.append({"benchmark": name, **values})
    print(f"  {name}: {values}", flush=True)


def bench_bulk(work: Path, corpus: list[str], trials: int) -> None:
    batch = 10_000
    ratios, rates = [], []
    for trial in range(trials):
        with_h = SQLiteKnowledgeStore(work / f"bulk-h-{trial}.sqlite3")
        without = NoHistoryStore(work / f"bulk-n-{trial}.sqlite3")
        h_s = n_s = 0.0
        for at in range(0, len(corpus), batch):
            rows = [{"content": t} for t in corpus[at : at + batch]]
            first, second = (with_h, without) if (at // batch + trial) % 2 == 0 else (without, with_h)
            for store in (first, second):
                start = time.perf_counter()
                store.add_chunks(rows)
                elapsed = time.perf_counter() - start
                if store is with_h:
                    h_s += elapsed
                else:
                    n_s += elapsed
        created = "SELECT count(*) FROM chunks WHERE created_seq IS NOT NULL"
        assert with_h.conn.execute(created).fetchone()[0] == len(corpus)
        assert without.conn.execute(created).fetchone()[0] == 0
        with_h.close()
        without.close()
        ratios.append(h_s / n_s)
        rates.append(len(corpus) / h_s)
    ratio = statistics.median(ratios)
    record(
        "history overhead, bulk ingest (10k-row batches)",
        rows=len(corpus),
        ratio=round(ratio, 3),
        trials=[round(r, 3) for r in ratios],
        rows_per_s_with_history=round(statistics.median(rates)),
        target="<= 1.15x",
        met=ratio <= 1.15,
    )


def bench_single(work: Path, base: Path, corpus: list[str], writes: int) -> None:
    h_path, n_path = work / "single-h.sqlite3", work / "single-n.sqlite3"
    # Merge the bulk load's full-text segments first: otherwise FTS5's incremental merging
    # right after a bulk load dominates the first thousand small writes in both arms alike.
    conn = apsw.Connection(str(base))
    conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('optimize')")
    conn.close()
    shutil.copyfile(base, h_path)
    shutil.copyfile(base, n_path)
    with_h, without = SQLiteKnowledgeStore(h_path), NoHistoryStore(n_path)
    fresh = text_corpus(writes, seed=7)
    add_h: list[float] = []
    add_n: list[float] = []
    for i, text in enumerate(fresh):
        for store, out in (
            ((with_h, add_h), (without, add_n)) if i % 2 == 0 else ((without, add_n), (with_h, add_h))
        ):
            start = time.perf_counter()
            store.add_chunk(text, "general", "extracted")
            out.append(time.perf_counter() - start)
    review_h: list[float] = []
    review_n: list[float] = []
    for i in range(writes):
        chunk_id = str(1 + i * 7 % len(corpus))
        state = "confirmed" if i % 2 == 0 else "rejected"
        for store, out in (
            ((with_h, review_h), (without, review_n))
            if i % 2 == 0
            else ((without, review_n), (with_h, review_h))
        ):
            start = time.perf_counter()
            store.set_review_state(chunk_id, state, by="bench")
            out.append(time.perf_counter() - start)
    with_h.close()
    without.close()
    for name, h, n in (("add_chunk", add_h, add_n), ("set_review_state", review_h, review_n)):
        ratio = statistics.median(h) / statistics.median(n)
        record(
            f"history overhead, single writes ({name}, {len(corpus)}-row store)",
            writes=writes,
            with_history_ms=round(statistics.median(h) * 1e3, 4),
            without_ms=round(statistics.median(n) * 1e3, 4),
            ratio=round(ratio, 3),
            target="<= 1.15x",
            met=ratio <= 1.15,
        )


def _review_pair(work: Path, base: Path, rows: int, writes: int, name: str, cls: type, setup: str = "") -> None:
    """The review-state change on a ``cls`` store against the baseline, in the state
    ``bench_single`` measures in: copies of the merged store, the same ``add_chunk`` writes first
    (untimed), then the same reviews, interleaved alike."""
    t_path, n_path = work / f"{name}-h.sqlite3", work / f"{name}-n.sqlite3"
    shutil.copyfile(base, t_path)
    shutil.copyfile(base, n_path)
    other, without = cls(t_path), NoHistoryStore(n_path)
    if setup:
        other.conn.execute(setup)  # after the open (which would convert a version-3 table)
    for text in text_corpus(writes, seed=7):
        for store in (other, without):
            store.add_chunk(text, "general", "extracted")
    t_times: list[float] = []
    n_times: list[float] = []
    for i in range(writes):
        chunk_id = str(1 + i * 7 % rows)
        state = "confirmed" if i % 2 == 0 else "rejected"
        for store, out in (
            ((other, t_times), (without, n_times)) if i % 2 == 0 else ((without, n_times), (other, t_times))
        ):
            start = time.perf_counter()
            store.set_review_state(chunk_id, state, by="bench")
            out.append(time.perf_counter() - start)
    table = "chunk_history WHERE event = 'review'" if setup else "chunk_log WHERE kind = 'change'"
    events = int(migrate.scalar(other.conn, f"SELECT count(*) FROM {table}"))
    other.close()
    without.close()
    assert events == writes, (events, writes)
    ratio = statistics.median(t_times) / statistics.median(n_times)
    what = {
        "v3": "version 3's layout, the event in a table with a per-row index",
        "log": "the store-wide log row alone, no entry (the floor of an exact order; not a usable history)",
    }[name]
    record(
        f"for comparison, single writes (set_review_state, {rows}-row store): {what}",
        writes=writes,
        with_event_ms=round(statistics.median(t_times) * 1e3, 4),
        without_ms=round(statistics.median(n_times) * 1e3, 4),
        ratio=round(ratio, 3),
        target="(reported)",
    )


def _explain_times(
    backend: SQLiteBackend, host: Any, ids: list[str], repeats: int, **kw: Any
) -> tuple[float, dict[str, int]]:
    times = []
    verdicts: dict[str, int] = {}
    for _ in range(repeats):
        for memory_id in ids:
            start = time.perf_counter()
            verdict = explain(memory_id, backend=backend, host=host, session_id="bench", turn_index=1, **kw)
            times.append(time.perf_counter() - start)
            verdicts[verdict.verdict] = verdicts.get(verdict.verdict, 0) + 1
    return statistics.median(times) * 1e3, verdicts


def bench_explain(work: Path, base: Path, corpus: list[str]) -> None:
    path = work / "explain.sqlite3"
    shutil.copyfile(base, path)
    conf = structure({"context": {"context_window": 200_000, "retrieved_k": 8}})
    host = plugin_host_with([working_state, always_on, prior_sessions, retrieved], conf)
    backend = SQLiteBackend(path, config=conf)
    try:
        store = backend.memories
        store.add_chunk("Deploy window is Tuesday 14:00 UTC", "hot", "operator")
        query = text_queries(1, seed=11)[0]
        projection = compose_projected_context(
            query, backend, None, {"goal": "bench"}, session_id="bench", turn_index=1, host=host
        )
        delivered = list(projection.section("retrieved").item_ids)  # type: ignore[union-attr]
        hits = store.search(query, 40, deliverable=False)
        missed = [h.chunk.id for h in hits if h.chunk.id not in delivered][:4]
        rejected = [str(i) for i in range(100, 104)]
        for chunk_id in rejected:  # reviews after the turn: the as-of view must undo them
            store.set_review_state(chunk_id, "rejected", by="bench")
        ids = [*delivered[:4], *missed, *rejected[:2], "1"]
        median_ms, verdicts = _explain_times(backend, host, ids, 5)
        record(
            f"explain one memory, recorded turn, {len(corpus)} rows, reviewed since",
            median_ms=round(median_ms, 2),
            verdicts=verdicts,
            target="< 50 ms",
            met=median_ms < 50,
        )
        store.add_chunks([{"content": t} for t in text_corpus(50, seed=5)])  # rows written after the turn
        exact_ms, _ = _explain_times(backend, host, ids, 1)
        record(
            f"explain one memory, {len(corpus)} rows, rows written since (exact ranking: FTS of the corpus then)",
            median_ms=round(exact_ms, 2),
            target="(reported)",
        )
        fast_ms, _ = _explain_times(backend, host, ids, 3, exact_ranking=False)
        record(
            f"explain one memory, {len(corpus)} rows, rows written since, exact_ranking=False",
            median_ms=round(fast_ms, 2),
            target="(reported)",
        )
        now_times = []
        for memory_id in ids:
            start = time.perf_counter()
            explain(memory_id, backend=backend, host=host, query=query)
            now_times.append(time.perf_counter() - start)
        record(
            f"explain one memory, {len(corpus)} rows, --query (a turn composed now)",
            median_ms=round(statistics.median(now_times) * 1e3, 2),
            target="< 50 ms",
            met=statistics.median(now_times) * 1e3 < 50,
        )
    finally:
        backend.close()


def bench_migration(work: Path, rows: int) -> None:
    """The version-3 steps on a version-2 store (the common upgrade): the history's start (no row
    visited: a row's ``migrated`` event is written at its first change) and the content-key pass
    (what ``contextplane migrate``, or a batch on each later open, does after the migration)."""
    v1 = work / "mig-v1.sqlite3"
    build_v1_store(v1, rows)
    conn = connect(v1)
    start = time.perf_counter()
    migrate.upgrade_schema(conn)
    migrate.run_backfill(conn)
    v2_s = time.perf_counter() - start
    start = time.perf_counter()
    migrate.ensure_v3_schema(conn)
    migrate.ensure_v4_history(conn)
    migrate.start_history(conn)
    history_s = time.perf_counter() - start
    events = conn.execute("SELECT count(*) FROM chunk_log").fetchone()[0]
    events += conn.execute("SELECT count(*) FROM chunks WHERE history IS NOT NULL").fetchone()[0]
    conn.close()
    pending = _lookup_times(work, v1, rows)
    conn = connect(v1)
    start = time.perf_counter()
    keyed = migrate.migrate_content_hashes(conn)
    keys_s = time.perf_counter() - start
    conn.close()
    done = _lookup_times(work, v1, rows)
    record(
        f"a write while a migrated {rows}-row store's keys are pending (most rows unkeyed) vs once keyed, "
        "whole add_chunk, median ms",
        **{name: [pending[name], done[name], round(pending[name] / done[name], 2)] for name in pending},
        columns="[pending, keyed, ratio]",
        target="(reported)",
    )
    assert events == 0 and keyed == rows
    record(
        f"migration, {rows} rows: v2 passes (D4, D7), the history's start, then the content-key pass",
        v2_passes_s=round(v2_s, 3),
        history_start_s=round(history_s, 3),
        events_written=events,
        content_key_pass_s=round(keys_s, 3),
        content_key_per_row_us=round(keys_s / rows * 1e6, 2),
        target="(reported)",
    )


def _lookup_times(work: Path, migrated: Path, rows: int, writes: int = 200) -> dict[str, float]:
    """Median ms of writes on a copy of a migrated store opened as a runtime opens it (which keys
    50,000 rows if its keys are pending): duplicates of rows near its end, new usual texts, texts
    of only the corpus's commonest words, texts with no token. While keys are pending each
    looks its duplicates up through the full-text index too (``store.unkeyed``)."""
    path = work / "mig-lookups.sqlite3"
    shutil.copyfile(migrated, path)
    times: dict[str, list[float]] = {}
    with SQLiteKnowledgeStore(path) as store:
        high = rows - rows // 20
        for i in range(writes):
            chunk_id = high - i * 97
            content, source = store.conn.execute(
                "SELECT content, source_type FROM chunks WHERE id = ?", (chunk_id,)
            ).fetchone()
            cases = (
                ("duplicate", content, source),
                ("new_usual_text", text_corpus(1, seed=100 + i)[0], "operator"),
                ("only_common_words", f"legacy memory {i % 7} about topic {i % 7}", "agent"),
            )
            for name, text, provenance in cases:
                start = time.perf_counter()
                got = store.add_chunk(text, "general", provenance)
                times.setdefault(name, []).append(time.perf_counter() - start)
                if name == "duplicate":
                    assert got == str(chunk_id) and got.outcome == "duplicate", (got, chunk_id)
        for i in range(5):
            start = time.perf_counter()
            store.add_chunk("!!! ??? " + "." * i, "general", "operator")
            times.setdefault("no_token", []).append(time.perf_counter() - start)
    path.unlink()
    return {name: round(statistics.median(t) * 1e3, 3) for name, t in times.items()}


def bench_migrated_review(work: Path, rows: int, writes: int) -> None:
    """What a migrated store's history costs a review-state change: a row that was there has no
    event written for the migration (its first change's entry holds the state then); against the
    same change on a store whose rows were all written with their history."""
    migrated, fresh = work / "review-migrated.sqlite3", work / "review-fresh.sqlite3"
    build_v1_store(migrated, rows)
    with SQLiteKnowledgeStore(fresh) as store:
        store.add_chunks([{"content": f"legacy memory {i}", "source_type": "extracted"} for i in range(rows)])
    times: dict[tuple[str, int], list[float]] = {}
    with SQLiteKnowledgeStore(migrated) as lazy, SQLiteKnowledgeStore(fresh) as eager:
        for change, state in enumerate(("confirmed", "rejected")):
            for i in range(writes):
                chunk_id = str(1 + i * 7 % rows)
                for name, store in (("migrated", lazy), ("fresh", eager))[:: 1 if i % 2 == 0 else -1]:
                    start = time.perf_counter()
                    store.set_review_state(chunk_id, state, by="bench")
                    times.setdefault((name, change), []).append(time.perf_counter() - start)
        events = lazy.conn.execute("SELECT count(*) FROM chunks WHERE history IS NOT NULL").fetchone()[0]
    assert events == writes
    for change, what in enumerate(("first change of a row that was there at the migration", "a later change")):
        lazy_ms = statistics.median(times[("migrated", change)]) * 1e3
        eager_ms = statistics.median(times[("fresh", change)]) * 1e3
        record(
            f"set_review_state on a migrated {rows}-row store, {what}",
            writes=writes,
            migrated_ms=round(lazy_ms, 4),
            fresh_store_ms=round(eager_ms, 4),
            ratio=round(lazy_ms / eager_ms, 3),
            target="(reported)",
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="20k rows")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    rows = 20_000 if args.quick else 100_000
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}, "
        f"sqlite {apsw.sqlite_lib_version()}, load average at start {os.getloadavg()[0]:.2f}"
    )
    work = args.workdir or Path(tempfile.mkdtemp(prefix="history-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        corpus = text_corpus(rows)
        bench_bulk(work, corpus, 1 if args.quick else 3)
        base = work / "bulk-h-0.sqlite3"
        bench_single(work, base, corpus, 300 if args.quick else 1000)
        for name, cls, setup in (("v3", TableHistoryStore, migrate.V3_HISTORY_SQL), ("log", LogOnlyStore, "")):
            _review_pair(work, base, len(corpus), 300 if args.quick else 1000, name, cls, setup)
        bench_explain(work, base, corpus)
        bench_migration(work, 200_000 if args.quick else 1_000_000)
        bench_migrated_review(work, rows, 300 if args.quick else 1000)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / f"history_bench{'_quick' if args.quick else ''}.json").write_text(json.dumps(RESULTS, indent=2))


if __name__ == "__main__":
    main()
