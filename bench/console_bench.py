"""The console over a 100k-row store: server time of the memory list's pages, over real HTTP.

The store is a curated one, the case the review queue is for: 100,000 rows of generated prose
(``store_data.text_corpus``), provenance mixed (operator, agent, ingested), 98% confirmed,
1% pending and 1% rejected, spread evenly through the table (so the pending-first page must
scan for its rows), 200 superseded and 100 otherwise invalidated rows, 500 expired. It is
written through the public API (``add_chunks``, ``supersede``, ``invalidate_chunk``).

The console runs in this process on a free loopback port (uvicorn in a thread, exactly as
``contextplane console`` serves it); each request is timed by the server itself (the
``Server-Timing`` header the console sends: from the request's arrival to the response
start, the whole page rendered) and by the client. Baseline, in the same run: the store reads
the first page needs, called directly (``list_chunks(review_state="pending", limit=51)``);
the ratio is the console's server time over it.

Target (issue 15): the memory list's first page in under 300 ms server time. Also reported:
the row view (history, supersession chain both ways) and explain, whose baseline is
``contextplane.explain.explain`` called directly (the console adds a request, not a judgement).

    python bench/console_bench.py [--rows N] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_data import text_corpus, text_queries

from contextplane import Config, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.explain import explain
from contextplane_console import ConsoleServer, create_app
from contextplane_sections import always_on, prior_sessions, retrieved, working_state

TARGET_MS = 300.0
SOURCES = ("operator", "operator", "operator", "extracted", "conversation", "ingest")
KINDS = ("fact", "note", "reference", "decision", "standing")
SCOPES = ("", "project:website", "project:payments", "project:search")


def build(path: Path, rows: int) -> dict[str, Any]:
    texts = text_corpus(rows)
    batch = []
    for i, text in enumerate(texts):
        state = "pending" if i % 100 == 50 else "rejected" if i % 100 == 75 else "confirmed"
        row = {
            "content": text,
            "source_type": SOURCES[i % len(SOURCES)],
            "memory_kind": KINDS[i % len(KINDS)],
            "namespace": SCOPES[i % len(SCOPES)],
            "review_state": state,
        }
        if i % 200 == 13:
            row["expires_at"] = "2020-01-01T00:00:00Z"
        batch.append(row)
    backend = SQLiteBackend(path, config=Config())
    started = time.perf_counter()
    ids = backend.memories.add_chunks(batch)
    for i in ids[7::rows // 200][:200]:
        backend.memories.supersede(i, "corrected: " + texts[int(i) - 1][:80])
    for i in ids[11::rows // 100][:100]:
        backend.memories.invalidate_chunk(i, reason="wrong source")
    built = time.perf_counter() - started
    old = ids[7]
    new = backend.memories.get(old).superseded_by
    backend.close()
    return {
        "rows": rows,
        "build_s": round(built, 2),
        "superseded_id": old,
        "successor_id": new,
        # a global-scope confirmed row (i = 0), the query its own first words, and one it is not
        "global_id": ids[0],
        "global_other_id": ids[4],
        "global_query": " ".join(texts[0].split()[:4]),
    }


def row_cases(info: dict[str, Any]) -> list[tuple[str, str]]:
    """The row view (history, chain both ways) and explain, for rows the build made."""
    old, new = info["superseded_id"], info["successor_id"]
    query = urlencode({"query": info["global_query"]})
    return [
        ("row view of a superseded row (history, chain forward)", f"/memory/{old}"),
        ("row view of its successor (history, chain backward)", f"/memory/{new}"),
        ("row JSON with history and both chains", f"/api/memory/chunks/{new}"),
        ("explain, query composed now, the row's own words (JSON)", f"/api/explain?memory={info['global_id']}&{query}"),
        ("explain, same query, another global row (JSON)", f"/api/explain?memory={info['global_other_id']}&{query}"),
        ("explain page, the first of these", f"/explain?memory={info['global_id']}&{query}"),
    ]


def timed(client: httpx.Client, path: str, repeat: int) -> dict[str, float]:
    server, wall = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = client.get(path)
        wall.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        server.append(float(r.headers["server-timing"].split("dur=")[1]))
    return {
        "server_ms": round(statistics.median(server), 2),
        "server_max_ms": round(max(server), 2),
        "wall_ms": round(statistics.median(wall), 2),
    }


CASES = [
    ("memory list, first page (HTML)", "/memory"),
    ("memory list, first page (JSON)", "/api/memory/chunks"),
    ("first page, review_state=rejected", "/memory?review_state=rejected"),
    ("first page, kind+scope (pushed to the store)", "/memory?memory_kind=note&scope=project%3Awebsite"),
    ("first page, trust_tier=2 (filtered by the console)", "/memory?trust_tier=2"),
    ("first page, full-text search (2-3 corpus words)", "/memory?q=" + "+".join(text_queries(1)[0].split())),
    ("page 21 (offset 1,000)", "/memory?offset=1000"),
    ("page 201 (offset 10,000)", "/memory?offset=10000"),
    ("rare state, console-side: lifecycle=invalidated (worst case, a full scan)", "/memory?lifecycle=invalidated"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        path = Path(tmp) / "memory.sqlite3"
        info = build(path, args.rows)
        # the standard sections, so an explain composes what a turn composes
        conf = structure({"context": {"context_window": 200_000, "retrieved_k": 8}})
        backend = SQLiteBackend(path, config=conf)
        host = plugin_host_with([working_state, always_on, prior_sessions, retrieved], conf)
        store = backend.memories

        baseline = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            first = store.list_chunks(review_state="pending", limit=51)
            baseline.append((time.perf_counter() - t0) * 1000)
        assert len(first) == 51
        base_ms = statistics.median(baseline)

        # the least a deep page can read without an offset in the protocol: the rows before it
        deep = []
        for _ in range(max(3, args.repeat // 3)):
            t0 = time.perf_counter()
            pending = store.list_chunks(review_state="pending", limit=10_051)
            store.list_chunks(review_state="confirmed", limit=max(64, 10_051 - len(pending)))
            deep.append((time.perf_counter() - t0) * 1000)
        deep_ms = statistics.median(deep)

        explain_direct = []
        for _ in range(max(3, args.repeat // 3)):
            t0 = time.perf_counter()
            explain(info["global_id"], backend=backend, host=host, query=info["global_query"])
            explain_direct.append((time.perf_counter() - t0) * 1000)
        explain_ms = statistics.median(explain_direct)

        results = []
        with ConsoleServer(create_app(backend, host)) as server, httpx.Client(base_url=server.url) as client:
            for label, url in CASES + row_cases(info):
                client.get(url)  # warm: the reader connection, the template cache
                result = {"case": label, "path": url, **timed(client, url, args.repeat)}
                if url.startswith("/api/explain"):
                    result["verdict"] = client.get(url).json()["verdict"]
                results.append(result)
        backend.close()

    first_page = results[0]["server_ms"]
    report = {
        "machine": f"{platform.machine()}, {platform.python_version()}",
        **{k: v for k, v in info.items() if not k.endswith("_id")},
        "baseline_store_reads_ms": round(base_ms, 2),
        "baseline_explain_direct_ms": round(explain_ms, 2),
        "baseline_deep_page_reads_ms": round(deep_ms, 2),
        "first_page_ratio": round(first_page / base_ms, 1) if base_ms else None,
        "target_ms": TARGET_MS,
        "target_met": first_page < TARGET_MS,
        "cases": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"console bench: {info['rows']:,} rows (built in {info['build_s']} s), {args.repeat} requests per case")
    print(f"baseline: the first page's store reads called directly: {base_ms:.2f} ms")
    print(f"baseline: the rows before page 201 read directly (one read per review state): {deep_ms:.2f} ms")
    print(f"baseline: contextplane.explain.explain() called directly (the first explain case): {explain_ms:.2f} ms")
    for r in results:
        verdict = f"  ({r['verdict']})" if "verdict" in r else ""
        print(
            f"  {r['case']:<76} server {r['server_ms']:8.2f} ms (max {r['server_max_ms']:.1f})"
            f"  wall {r['wall_ms']:8.2f} ms{verdict}"
        )
    verdict = "met" if report["target_met"] else "MISSED"
    print(
        f"first page: {first_page:.2f} ms server time, {report['first_page_ratio']}x the store reads; "
        f"target < {TARGET_MS:.0f} ms: {verdict}"
    )


if __name__ == "__main__":
    main()
