"""Many writers, one server: 4 processes x 4 threads add, confirm, reject and supersede
against one PostgreSQL schema while a reader composes projections through the standard
always-on and retrieved sections.

What must hold afterwards: every acknowledged write is there (0 lost), each row's review state
is the last one acknowledged for it, every supersession chain is linear (no row superseded
twice, none the successor of two) with exactly one deliverable head, a chain holds exactly its
root plus one row per acknowledged supersession (a lost race left nothing behind), and no
projection the reader composed showed two versions of one chain (or none).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from contextplane import (
    ContextSection,
    Envelope,
    Row,
    Shed,
    compose_projected_context,
    hookimpl,
    plugin_host_with,
)
from contextplane.config import structure
from contextplane_postgres import PostgresBackend
from contextplane_sections import always_on, retrieved

REPO = Path(__file__).resolve().parents[2]


class SlowSection:
    """A section between always-on (20) and retrieved (50) that takes 20 ms, as a section that
    calls out would: it holds the two memory reads apart long enough for writers to commit."""

    plugin_name = "slow_section"

    @hookimpl
    def register_context_sections(self, register: Any) -> None:
        def draft(request: Any) -> list[Row]:
            time.sleep(0.02)
            return [Row("slow", 1, "slow section")]

        register(ContextSection("slow", 35, Shed.DROP_SECTION, draft, Envelope("slow")))


PROCESSES, THREADS, OPS, CHAINS = 4, 4, 30, 3


def test_four_processes_of_four_threads_lose_nothing_and_keep_chains_linear(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    backend = PostgresBackend(pg_url, schema=pg_schema, pool_max_size=4)
    store = backend.memories
    roots = [store.add_chunk(f"chain c{c} root", "hot", "operator") for c in range(CHAINS)]
    members = {c: {roots[c]} for c in range(CHAINS)}

    host = plugin_host_with([always_on, SlowSection(), retrieved], structure({"context": {"retrieved_k": 8}}))
    stop = threading.Event()
    projections: list[dict[str, set[str]]] = []
    reader_errors: list[BaseException] = []
    #: Compositions in which a section failed (isolated): not torn, but a failure too, shown
    #: with its error (one run at load ~5 saw a projection with no memory section at all).
    failed: list[dict[str, str]] = []

    def read() -> None:
        try:
            while not stop.is_set():
                p = compose_projected_context(
                    "chain", backend, None, session_id="reader", budget_tokens=0, record=False, host=host
                )
                errors = {s.name: str(s.error) for s in p.sections if s.error is not None}
                if errors:  # isolated, not torn: counted and shown apart (see below)
                    failed.append(errors)
                    continue
                projections.append({name: set(ids) for name, ids in p.delivered_ids.items()})
        except BaseException as exc:
            reader_errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.postgres.concurrency_worker",
                pg_url,
                pg_schema,
                str(w),
                str(OPS),
                str(tmp_path / f"w{w}.json"),
                json.dumps(roots),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(PROCESSES)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    stop.set()
    reader.join(60)
    for p, (_out, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err
    results = [json.loads((tmp_path / f"w{w}.json").read_text()) for w in range(PROCESSES)]
    assert [r["errors"] for r in results] == [[]] * PROCESSES
    log = [entry for r in results for thread in r["logs"] for entry in thread]
    assert len(log) == PROCESSES * THREADS * OPS

    rows = {c.id: c for c in store.list_chunks()}
    # 0 acknowledged writes lost
    adds = [e for e in log if e["op"] == "add"]
    assert len({e["id"] for e in adds}) == len(adds)
    assert [e["id"] for e in adds if e["id"] not in rows or rows[e["id"]].content != e["content"]] == []
    last_state: dict[str, str] = {}
    for r in results:  # a row is only ever reviewed by the thread that added it: its log is ordered
        for thread in r["logs"]:
            for e in thread:
                if e["op"] == "review":
                    last_state[e["id"]] = e["state"]
    assert {i: rows[i].review_state for i in last_state} == last_state
    supersedes = [e for e in log if e["op"] == "supersede"]
    assert len(supersedes) > 20, "too few supersessions to mean anything"
    for e in supersedes:
        assert rows[e["old"]].superseded_by == e["new"], e
        members[e["chain"]].add(e["new"])

    # linear chains, one deliverable head, nothing left by a lost race
    successors = Counter(c.superseded_by for c in rows.values() if c.superseded_by is not None)
    assert [s for s, n in successors.items() if n > 1] == []
    chain_rows = [c for c in rows.values() if c.content.startswith("chain")]
    assert len(chain_rows) == CHAINS + len(supersedes)
    for c in range(CHAINS):
        walk, cur = [roots[c]], rows[roots[c]]
        while cur.superseded_by is not None:
            walk.append(cur.superseded_by)
            cur = rows[cur.superseded_by]
        assert set(walk) == members[c] and len(walk) == len(members[c])
        assert [i for i in walk if rows[i].is_deliverable()] == [walk[-1]]

    # no torn projection
    assert not reader_errors, reader_errors
    assert len(projections) > 10
    # a failed section is reported as what it is, not as a torn projection (and fails as well)
    assert not failed, f"{len(failed)} compositions had a failed section: {failed[:3]}"
    seen_heads: dict[int, set[str]] = {c: set() for c in range(CHAINS)}
    for p in projections:
        delivered = set().union(*p.values()) - {"slow"}
        for c in range(CHAINS):
            shown = delivered & members[c]
            assert len(shown) == 1, f"a projection showed {sorted(shown)} of chain {c}: {p}"
            seen_heads[c] |= shown
    assert all(len(h) > 1 for h in seen_heads.values()), "the reader never saw a chain move"
    backend.close()


PAIRS, ROUNDS = 20, 3


def test_supersede_racing_a_same_subject_add_leaves_one_head(pg_url: str, pg_schema: str) -> None:
    """Issue 26: ``supersede(head)`` and ``add_chunk(subject=S)`` of one subject at the same
    moment, on two connections of two backends (as two processes would be). Either the add
    supersedes the supersede's new row, or the supersede finds its head gone and fails: never
    two deliverable heads. Before the fix 11-15 of 20 subjects kept two."""
    one = PostgresBackend(pg_url, schema=pg_schema, pool_max_size=2)
    two = PostgresBackend(pg_url, schema=pg_schema, pool_max_size=2)
    try:
        doubled: list[tuple[str, list[str]]] = []
        outcomes: Counter[str] = Counter()
        for r in range(ROUNDS):
            for p in range(PAIRS):
                subject = f"race-{r}-{p}"
                head = one.memories.add_chunk(f"{subject} v0", "fact", "operator", subject=subject)
                start = threading.Barrier(2)
                errors: list[BaseException] = []

                def supersede(head: str = head, subject: str = subject) -> None:
                    start.wait()
                    try:
                        one.memories.supersede(head, f"{subject} superseded", source_type="operator")
                        outcomes["supersede stored"] += 1
                    except Exception as exc:  # losing the race is allowed, and must say so
                        if "already invalidated" not in str(exc):
                            errors.append(exc)
                        outcomes["supersede refused"] += 1

                def add(subject: str = subject) -> None:
                    start.wait()
                    try:
                        two.memories.add_chunk(f"{subject} added", "fact", "operator", subject=subject)
                    except BaseException as exc:
                        errors.append(exc)

                threads = [threading.Thread(target=supersede), threading.Thread(target=add)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(30)
                assert not errors, errors
                heads = [c.id for c in one.memories.list_chunks(deliverable=True) if c.subject == subject]
                if len(heads) != 1:
                    doubled.append((subject, heads))
        assert doubled == [], f"{len(doubled)} of {PAIRS * ROUNDS} subjects: {doubled[:5]} ({dict(outcomes)})"
    finally:
        one.close()
        two.close()
