"""As-of reads against the store's own past, on random sequences of every kind of write.

Schema 4 keeps a row's history in the row: each change's entry holds the row's cells *before*
it, so the state at a position is reconstructed, never stored. These tests check that
reconstruction the only way that cannot share its mistakes: a snapshot of the live store taken
after every write (every row's lifecycle state, the deliverable list, a search) must be exactly
what ``as_of`` of that write's position shows later, after everything that came since. They
also check the stored history's own invariants: each entry's before-cells are the state the
previous event left, one log row per change, seqs increasing per row and store-wide.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from contextplane.errors import StoreError
from contextplane.memory.history import HistoryPosition
from contextplane.memory.model import MemoryChunk
from contextplane.store import SQLiteKnowledgeStore

FUTURE = datetime(2200, 1, 1, tzinfo=UTC)
PAST = datetime(2000, 1, 1, tzinfo=UTC)
WORDS = ["deploy", "window", "canary", "replica", "cache", "tuesday", "rollback", "jenkins", "argo", "lag"]
SCOPES = ["", "project:web", "project:db"]


def _state(chunk: MemoryChunk | None) -> tuple[Any, ...] | None:
    if chunk is None:
        return None
    return (
        chunk.content,
        chunk.review_state,
        chunk.expires_at,
        chunk.invalidated_at,
        chunk.invalidation_reason,
        chunk.updated_at,
        chunk.namespace,
    )


def _snapshot(view: Any, ids: list[str], at: datetime) -> dict[str, Any]:
    return {
        "rows": {i: _state(view.get(i)) for i in ids},
        "deliverable": [c.id for c in view.list_chunks(deliverable=True, now=at)],
        "always": [c.id for c in view.list_chunks(deliverable=True, delivery_policy="always", now=at)],
        "search": sorted(h.chunk.id for h in view.search("deploy window canary", 50, deliverable=True, now=at)),
    }


def _write(store: SQLiteKnowledgeStore, rng: random.Random, ids: list[str]) -> str:
    """One random write through the public API; returns what it did."""
    live = [c.id for c in store.list_chunks()]
    valid = [c.id for c in store.list_chunks() if c.invalidated_at is None]
    choice = rng.random()
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))
    if choice < 0.25 or not live:
        got = store.add_chunk(
            text,
            rng.choice(["fact", "hot", "general"]),
            rng.choice(["operator", "extracted", "conversation"]),
            namespace=rng.choice(SCOPES),
            subject=rng.choice(["", "", "deploys", "tool"]),
            memory_kind=rng.choice(["fact", "standing"]),
        )
        if got not in ids:
            ids.append(str(got))
        return f"add {got} ({got.outcome})"
    if choice < 0.33:
        rows = [{"content": f"{text} {k}", "namespace": rng.choice(SCOPES)} for k in range(rng.randint(2, 4))]
        for got in store.add_chunks(rows):
            if got not in ids:
                ids.append(str(got))
        return "add_chunks"
    target = rng.choice(live)
    if choice < 0.55:
        store.set_review_state(target, rng.choice(["confirmed", "rejected", "pending"]), by=rng.choice(["priya", "sam"]))
        return f"review {target}"
    if choice < 0.68:
        store.set_expires_at(target, rng.choice([None, PAST, FUTURE]), by="priya")
        return f"expiry {target}"
    if choice < 0.76 and valid:
        store.invalidate_chunk(rng.choice(valid), reason="found wrong", by="sam")
        return "invalidate"
    if choice < 0.86 and valid:
        old = rng.choice(valid)
        new = store.supersede(old, f"{text} (revised)")
        ids.append(new)
        return f"supersede {old} -> {new}"
    if choice < 0.92:
        # an exact duplicate of a live row: consolidation returns it and records the attempt
        chunk = store.get(target)
        assert chunk is not None
        got = store.add_chunk(chunk.content, chunk.domain, chunk.source_type, namespace=chunk.namespace)
        if got not in ids:  # not deliverable, so not a duplicate of it: a new row
            ids.append(str(got))
        return f"duplicate of {target}: {got} ({got.outcome})"
    return f"purge {store.purge()}"


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_as_of_every_position_shows_exactly_what_the_store_held_then(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    ids: list[str] = []
    taken: list[tuple[HistoryPosition, dict[str, Any], str]] = []
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        for _ in range(70):
            did = _write(store, rng, ids)
            position = store.history_position()
            with store.consistent_read() as view:
                taken.append((position, _snapshot(view, list(ids), position.at), did))
        for position, then, did in taken:
            with store.as_of(position) as view:
                got = _snapshot(view, list(then["rows"]), position.at)
                gone = set(view.overlay.purged_after) if view.overlay is not None else set()
            # the one thing no as-of read restores: the text of a row purged since (reported)
            assert gone == {i for i, was in then["rows"].items() if was is not None and store.get(i) is None}
            expected = {
                "rows": {i: None if i in gone else was for i, was in then["rows"].items()},
                **{name: [i for i in then[name] if i not in gone] for name in ("deliverable", "always", "search")},
            }
            assert got == expected, f"as of #{position.seq} (after {did})"
        _check_stored_history(store, ids)


def _check_stored_history(store: SQLiteKnowledgeStore, ids: list[str]) -> None:
    conn = store.conn
    entries = 0
    for chunk_id in ids:
        events = store.history(chunk_id)
        assert events, chunk_id
        assert events[0].event == "created"
        seqs = [e.seq for e in events]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), (chunk_id, seqs)
        row = conn.execute("SELECT history FROM chunks WHERE id = ?", (int(chunk_id),)).fetchone()
        if row is None:
            row = conn.execute("SELECT history FROM chunk_gone WHERE chunk_id = ?", (int(chunk_id),)).fetchone()
        stored = [json.loads(line) for line in (row[0] or "").splitlines()]
        changes = [e for e in stored if e[2] != "created"]
        entries += len(changes)
        # each entry's before-cells are the state the event before it left
        for before, entry in zip(events, [e for e in events[1:] if e.event != "purged"], strict=False):
            cells = next(e for e in changes if e[0] == entry.seq)[5:10]
            assert cells[0] == before.review_state, (chunk_id, entry.seq)
            assert (cells[4] is None) == (before.updated_at is None), (chunk_id, entry.seq)
    logged = conn.execute("SELECT count(*) FROM chunk_log WHERE kind = 'change'").fetchone()[0]
    assert logged == entries
    log = [r[0] for r in conn.execute("SELECT seq FROM chunk_log ORDER BY rowid")]
    assert log == sorted(log) and len(set(log)) == len(log)


_WRITER = textwrap.dedent(
    """
    import random, sys
    from contextplane.store import SQLiteKnowledgeStore
    path, seed, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    with SQLiteKnowledgeStore(path, busy_timeout_ms=30000) as store:
        for i in range(150):
            target = str(rng.randint(1, rows))
            if i % 10 == 9:
                store.set_expires_at(target, None if rng.random() < 0.5 else "2200-01-01T00:00:00Z", by=f"w{seed}")
            else:
                store.set_review_state(target, rng.choice(["confirmed", "rejected", "pending"]), by=f"w{seed}")
    """
)


def test_concurrent_writer_processes_leave_one_consistent_history(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    rows = 12  # few rows, so the writers change the same ones
    with SQLiteKnowledgeStore(path) as store:
        store.add_chunks([{"content": f"memory {i}", "source_type": "operator"} for i in range(rows)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(seed), str(rows)], env=env)
        for seed in range(4)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0, 0]
    with SQLiteKnowledgeStore(path) as store:
        conn = store.conn
        log = conn.execute("SELECT seq, chunk_id FROM chunk_log WHERE kind = 'change' ORDER BY seq").fetchall()
        assert len(log) == 4 * 150
        by_row: dict[int, list[int]] = {}
        for seq, chunk_id in log:
            by_row.setdefault(chunk_id, []).append(seq)
        for chunk_id in range(1, rows + 1):
            events = store.history(str(chunk_id))
            changes = [e for e in events if e.event != "created"]
            # every logged change is in the row, in log order, and each entry's before-cells are
            # what the change before it (another process's, maybe) left
            assert [e.seq for e in changes] == by_row.get(chunk_id, [])
            text = conn.execute("SELECT history FROM chunks WHERE id = ?", (chunk_id,)).fetchone()[0] or ""
            stored = [json.loads(line) for line in text.splitlines()]
            for previous, entry in zip(events, stored, strict=False):
                assert (entry[5], entry[6]) == (
                    previous.review_state,
                    None if previous.expires_at is None else entry[6],
                ), (chunk_id, entry[0])
                assert (entry[6] is None) == (previous.expires_at is None), (chunk_id, entry[0])
            chunk = store.get(str(chunk_id))
            assert chunk is not None and (chunk.review_state, chunk.expires_at) == (
                events[-1].review_state,
                events[-1].expires_at,
            )
        # as of every change's position, the row shows exactly the state that change left
        for seq, chunk_id in log[:: len(log) // 40]:
            left = next(e for e in store.history(str(chunk_id)) if e.seq == seq)
            with store.as_of(HistoryPosition(seq, datetime.now(UTC) - timedelta(seconds=1))) as view:
                then = view.get(str(chunk_id))
            assert then is not None and (then.review_state, then.expires_at) == (left.review_state, left.expires_at)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("'{not json' || char(10)", "not JSON"),
        ("'[1, 2, 3]' || char(10)", "not a 10-item array"),
        ("json_array(99, 'x', 'rewritten', '', NULL, NULL, NULL, NULL, NULL, NULL) || char(10)", "no seq or an unknown event"),
    ],
)
def test_a_damaged_history_entry_is_refused_by_name_and_loses_nothing(
    tmp_path: Path, damage: str, problem: str
) -> None:
    path = tmp_path / "m.sqlite3"
    with SQLiteKnowledgeStore(path) as store:
        hurt = store.add_chunk("Deploy window is Tuesday", "hot", "operator")
        fine = store.add_chunk("The canary runs for an hour", "fact", "operator")
        store.set_review_state(hurt, "confirmed", by="priya")
        before = store.history_position()
        store.set_review_state(hurt, "rejected", by="sam")
        store.set_review_state(fine, "rejected", by="sam")
    conn = apsw.Connection(str(path))  # a hand edit the append guard cannot see:
    conn.execute("DROP TRIGGER chunks_history_append")  # its own guard dropped first
    conn.execute(f"UPDATE chunks SET history = history || {damage} WHERE id = ?", (int(hurt),))
    conn.close()
    with SQLiteKnowledgeStore(path) as store:
        message = rf"entry 3 of memory {hurt}'s history is damaged \({problem}.*restored from a backup"
        with pytest.raises(StoreError, match=message):
            store.history(hurt)
        with pytest.raises(StoreError, match=message), store.as_of(before):  # a read that needs its past
            pass
        # everything else reads and writes as usual; nothing was lost
        assert store.get(hurt).review_state == "rejected"  # type: ignore[union-attr]
        assert [e.event for e in store.history(fine)] == ["created", "review"]
        assert {c.id for c in store.list_chunks()} == {hurt, fine}
        assert store.search("canary", deliverable=False)[0].chunk.id == fine
        added = store.add_chunk("Replica lag spikes at night", "fact", "operator")
        store.set_review_state(added, "confirmed", by="priya")
        assert [e.event for e in store.history(added)] == ["created", "review"]
