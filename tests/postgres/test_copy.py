"""``contextplane store copy SRC DST``: an embedded store moved into PostgreSQL with ids,
chains, review states, expiry, vectors and records intact; killed midway and resumed, nothing
lost or doubled; the source file never touched. The lifecycle history and the turn inputs come
along, so the history of every row and the store as of any position read the same on both
sides (a newer file is refused)."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import psycopg
import pytest
from click.testing import CliRunner

from contextplane.backends.sqlite import SQLiteBackend
from contextplane.cli import main
from contextplane.errors import StoreError
from contextplane.memory.history import HistoryPosition
from contextplane.records import InjectionRow
from contextplane.records.snapshots import SnapshotRow
from contextplane.records.turn_inputs import TurnInputs
from contextplane.store import SQLiteKnowledgeStore, migrate
from contextplane_postgres import PostgresBackend
from contextplane_postgres.copy import copy_store, cursor_key
from contextplane_postgres.database import Database
from tests.store.helpers import make_v1_store

from .helpers import HashEmbedder

REPO = Path(__file__).resolve().parents[2]
ROWS = 3_000


def generate(path: Path, rows: int = ROWS, seed: int = 7) -> dict[str, Any]:
    """A store like a real one: kinds, scopes, review states, expiry, chains, vectors, records."""
    rng = random.Random(seed)
    backend = SQLiteBackend(path, embedder=HashEmbedder(32))
    m = backend.memories
    now = datetime.now(UTC)
    batch = []
    for i in range(rows):
        batch.append(
            {
                "content": f"row {i} {rng.choice(['kiwi', 'deploy', 'canary', 'window'])} NUL\x00 ü {rng.random():.6f}",
                "domain": rng.choice(["hot", "general", "fact", "preferences", "custom"]),
                "source_type": rng.choice(["operator", "extracted", "ingest", ""]),
                "namespace": rng.choice(["", "project:web", "session:s1"]),
                "heading": f"h{i % 17}",
                "expires_at": (now + timedelta(days=rng.randint(-5, 30))) if i % 7 == 0 else None,
            }
        )
    ids = m.add_chunks(batch)
    chains = []
    for start in rng.sample(ids, 40):
        chain = [start]
        for _ in range(rng.randint(1, 4)):
            chain.append(m.supersede(chain[-1], f"newer version of {start} {len(chain)}"))
        chains.append(chain)
    for cid in rng.sample(ids, 300):
        if m.get(cid).invalidated_at is None:
            m.set_review_state(cid, rng.choice(["confirmed", "rejected"]))
    for cid in rng.sample(ids, 50):
        if m.get(cid).invalidated_at is None:
            m.invalidate_chunk(cid, reason="found wrong")
    for s in range(30):
        backend.summaries.add(
            f"s{s}",
            f"summary {s} about kiwi {s % 3}",
            topic=f"t{s}",
            at=f"2026-01-{1 + s % 28:02d}T00:00:00+00:00",
        )
        backend.injections.record(
            InjectionRow(
                f"s{s}", s, "2026-01-01T00:00:00Z", "native", s, 4 * s, 16_000, {"retrieved": [str(s)]}
            )
        )
        backend.snapshots.put(
            SnapshotRow(
                f"s{s}",
                s,
                0,
                1.9e9 + s,
                "native",
                False,
                "h1",
                "[]",
                "p",
                "[]",
                16_000,
                s,
                1,
                2,
                "[]",
                "[]",
                f"full \x00 {s}",
            )
        )
    backend.snapshots.register_prefix("h1", "the prefix text", "[]")
    m.purge()  # the purged rows' histories stay, ending in 'purged'
    latest = m.history_position().seq
    for s in range(12):
        backend.snapshots.put_inputs(turn_inputs(f"s{s}", s, (latest * (s + 1)) // 12))
    backend.close()
    return {"chains": chains}


def turn_inputs(session: str, turn: int, seq: int) -> TurnInputs:
    return TurnInputs(
        session_id=session, turn_index=turn, created_at=1.9e9 + turn, query=f"kiwi \x00 {turn}",
        state='{"goal": "ship"}', state_exact=True, surface="chat", goal_turn=turn % 2 == 0,
        project="web" if turn % 3 else None, only_sections=None, budget_tokens=4_000, context_window=None,
        skills_index=None, extra="{}", config="{}", config_sha256="c" * 64, config_base_dir="/srv",
        plugins='{"retrieved": "1.0"}', history_seq=seq, history_at="2026-06-01T00:00:00.000000Z",
        projection_sha256=None, sections="[]", budget_chars=16_000, used_chars=turn, trajectory_ref=None,
    )  # fmt: skip


def source_events(src: Path) -> int:
    """The file's events, counted through the store's public reads (purged rows included)."""
    with SQLiteKnowledgeStore(src, read_only=True) as mine:
        high = max(int(c.id) for c in mine.list_chunks())
        return sum(len(mine.history(str(i))) for i in range(1, high + 1))


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_same(src: Path, dst: PostgresBackend) -> None:
    """Every public read gives the same answer on both sides."""
    sqlite = SQLiteBackend(src)
    try:
        a, b = sqlite.memories.list_chunks(), dst.memories.list_chunks()
        assert len(a) == len(b) and [c.id for c in a] == [c.id for c in b]
        assert a == b  # every attribute, timestamps included
        assert sqlite.summaries.newest(100) == dst.summaries.newest(100)
        assert sqlite.injections.rows() == dst.injections.rows()
        assert sqlite.snapshots.list() == dst.snapshots.list()
        assert dst.snapshots.prefix_text("h1") == "the prefix text"
        inputs = sqlite.snapshots.list_inputs()
        assert len(inputs) == 12 and dst.snapshots.list_inputs() == inputs
        assert dst.snapshots.get_inputs("s3", 3) == next(i for i in inputs if i.key == ("s3", 3))
        # the lifecycle history, event by event, purged rows included
        mine, theirs = sqlite.memories, dst.memories
        latest = mine.history_position().seq
        assert theirs.history_position().seq == latest
        every = {str(i) for i in range(1, int(a[-1].id) + 1)}
        purged = every - {c.id for c in a}
        assert purged and all(theirs.history(i)[-1].event == "purged" for i in purged)
        assert all(mine.history(i) == theirs.history(i) for i in every)
        # the store as of the positions the recorded turns name, and as of a time
        for turn in inputs[::3]:
            assert turn.history_seq is not None
            position = HistoryPosition(turn.history_seq, mine.history(str(1))[0].at + timedelta(days=2))
            with mine.as_of(position) as was, theirs.as_of(position) as now:
                assert was.list_chunks() == now.list_chunks()
                assert was.list_chunks(deliverable=True) == now.list_chunks(deliverable=True)
        middle = mine.history(a[len(a) // 2].id)[0].at
        with mine.as_of(middle) as was, theirs.as_of(middle) as now:
            assert was.history_position() == now.history_position()
            assert was.list_chunks(deliverable=True) == now.list_chunks(deliverable=True)
    finally:
        sqlite.close()
    conn = apsw.Connection(str(src), flags=apsw.SQLITE_OPEN_READONLY)
    want = {
        str(i): np.frombuffer(v, dtype=np.float32)
        for i, v in conn.execute("SELECT chunk_id, embedding FROM chunks_vec")
    }
    conn.close()
    with psycopg.connect(dst.db.url, options=f"-c search_path={dst.db.schema},public") as pg:
        got = {str(i): np.array([float(x) for x in e.strip("[]").split(",")], dtype=np.float32)
               for i, e in pg.execute("SELECT id, embedding::text FROM chunks WHERE embedding IS NOT NULL")}  # fmt: skip
    assert set(got) == set(want) and len(want) == len(a)
    assert max(float(np.abs(got[i] - want[i]).max()) for i in want) < 1e-6


KILLER = textwrap.dedent(
    """
    import os, signal, sys, threading
    from contextplane_postgres.copy import copy_store
    from contextplane_postgres.database import Database

    src, url, schema, which, after = sys.argv[1:6]
    db = Database(url, schema=schema, vectors=True, pool_max_size=2)
    batches = []

    def on_batch(table, done, total):
        if which in ("any", table):
            batches.append(table)
        if len(batches) == int(after):  # die inside the next batch's transaction, without any cleanup
            threading.Timer(0.002, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()

    copy_store(src, db, batch_rows=200, on_batch=on_batch)
    print("finished without being killed")
    """
)


def test_copy_killed_midway_resumes_with_nothing_lost_or_doubled(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    src = tmp_path / "memory.sqlite3"
    made = generate(src)
    before = sha(src)
    run = subprocess.run(
        [sys.executable, "-c", KILLER, str(src), pg_url, pg_schema, "any", "4"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == -9, run.stdout + run.stderr
    with psycopg.connect(pg_url) as pg:
        copied = pg.execute(f"SELECT count(*) FROM {pg_schema}.chunks").fetchone()[0]
        cursor = json.loads(
            pg.execute(f"SELECT value FROM {pg_schema}.meta WHERE key = %s", (cursor_key(src),)).fetchone()[0]
        )
    conn = apsw.Connection(str(src), flags=apsw.SQLITE_OPEN_READONLY)
    upto = conn.execute("SELECT count(*) FROM chunks WHERE id <= ?", (cursor["chunks"],)).fetchone()[0]
    total, max_id = conn.execute("SELECT count(*), max(id) FROM chunks").fetchone()
    conn.close()
    assert total < ROWS + sum(len(c) - 1 for c in made["chains"])  # the purge left gaps in the ids
    assert 800 <= copied < ROWS + 200 and copied == upto, (copied, cursor)  # whole batches only
    assert "done" not in cursor

    res = CliRunner().invoke(
        main, ["store", "copy", str(src), pg_url, "--schema", pg_schema, "--batch-rows", "500", "--json"]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(res.output[res.output.index("{") :])
    assert report["resumed"] is True
    chunks = report["tables"]["chunks"]
    assert chunks["source_rows"] == total and chunks["already_copied"] == copied
    assert chunks["copied"] == total - copied
    assert report["vectors"] == total - copied
    events = source_events(src)
    assert events > total and report["not_copied"] == {}
    history = report["tables"]["chunk_history"]
    assert history["source_rows"] == events and history["copied"] + history["already_copied"] == events
    assert report["tables"]["turn_inputs"] == {"source_rows": 12, "copied": 12, "already_copied": 0}

    dst = PostgresBackend(pg_url, schema=pg_schema, embedder=HashEmbedder(32))
    try:
        assert_same(src, dst)
        for chain in made["chains"]:  # chains intact, id by id
            walk, cur = [chain[0]], dst.memories.get(chain[0])
            while cur is not None and cur.superseded_by is not None:
                walk.append(cur.superseded_by)
                cur = dst.memories.get(cur.superseded_by)
            assert walk == chain
        states = [c.review_state for c in dst.memories.list_chunks()]
        assert {"confirmed", "pending", "rejected"} <= set(states)
        new = dst.memories.add_chunk("written after the copy")  # the sequence moved past the copied ids
        assert int(new) == max_id + 1
        assert dst.summaries.add("later", "a summary") == "31"
        hits = dst.memories.search("kiwi deploy", 5)
        assert hits and all(h.chunk.is_deliverable() for h in hits)
    finally:
        dst.close()
    assert sha(src) == before, "the copy changed its source"

    again = CliRunner().invoke(main, ["store", "copy", str(src), pg_url, "--schema", pg_schema])
    assert again.exit_code == 0, again.output
    assert (
        "resumed and finished" in again.output
        and f"chunks: {total} in the source, 0 copied now, {total + 0} before" in again.output
        and f"chunk_history: {events} in the source, 0 copied now, {events} before" in again.output
        and "turn_inputs: 12 in the source, 0 copied now, 12 before" in again.output
        and "not copied" not in again.output
    )


def test_copy_killed_inside_the_history_resumes_with_no_event_lost_or_doubled(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    src = tmp_path / "memory.sqlite3"
    generate(src, rows=1_000)
    run = subprocess.run(
        [sys.executable, "-c", KILLER, str(src), pg_url, pg_schema, "chunk_history", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == -9, run.stdout + run.stderr
    events = source_events(src)
    with SQLiteKnowledgeStore(src, read_only=True) as mine:
        max_id = int(mine.list_chunks()[-1].id)
        batch = mine.history("1")[0]  # the first write: 1,000 rows, one seq
        assert batch.event == "created" and mine.history("1000")[0].seq == batch.seq
    with psycopg.connect(pg_url) as pg:
        copied = pg.execute(f"SELECT count(*) FROM {pg_schema}.chunk_history").fetchone()[0]
        cursor = json.loads(
            pg.execute(f"SELECT value FROM {pg_schema}.meta WHERE key = %s", (cursor_key(src),)).fetchone()[0]
        )
        shared = pg.execute(
            f"SELECT count(*) FROM {pg_schema}.chunk_history WHERE seq = %s", (batch.seq,)
        ).fetchone()[0]
    assert cursor["chunks"] == max_id and "done" not in cursor  # every memory in, the history half-way
    # killed inside the first write batch's events: the cursor names an event by (seq, row)
    assert 400 <= copied < 1_000 and copied % 200 == 0 and shared == copied, (copied, cursor)
    assert cursor["chunk_history"] == [batch.seq, copied]
    db = Database(pg_url, schema=pg_schema, vectors=True)
    try:
        result = copy_store(src, db, batch_rows=200)
    finally:
        db.close()
    assert result.resumed and result.table("chunk_history").already == copied
    assert result.table("chunk_history").copied == events - copied
    dst = PostgresBackend(pg_url, schema=pg_schema, embedder=HashEmbedder(32))
    try:
        assert_same(src, dst)  # every row's history event by event, so none lost or doubled
        with psycopg.connect(pg_url) as pg:
            assert pg.execute(f"SELECT count(*) FROM {pg_schema}.chunk_history").fetchone()[0] == events
    finally:
        dst.close()


def test_a_migrated_store_copies_with_its_history_starting_at_the_migration(
    tmp_path: Path, pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The embedded migration writes no 'migrated' event (a row the migration found has one
    # implied, with its state then, at seq 0; and its rows are keyed later): a copy must read
    # every row's history, and the store as of every position, as the file does.
    monkeypatch.setattr(migrate, "INLINE_CONTENT_HASH_MAX_ROWS", 0)
    src = tmp_path / "v1.sqlite3"
    make_v1_store(
        src, [(f"legacy {i} kiwi window", "fact", ("operator", "extracted")[i % 2]) for i in range(40)]
    )
    with SQLiteKnowledgeStore(src) as mine:
        assert mine.history_position().seq == 0  # nothing written at the migration
        assert [(e.seq, e.event) for e in mine.history("3")] == [(0, "migrated")]
        positions = [mine.history_position()]
        mine.set_review_state("3", "rejected", by="sam")
        new = mine.add_chunk("legacy 5 kiwi window", "fact", "extracted")  # a duplicate of row 6
        assert (new.outcome, new) == ("duplicate", "6")
        positions.append(mine.history_position())
        between = datetime.now(UTC)
        mine.invalidate_chunk("5", reason="wrong")
        mine.supersede("8", "legacy 7 kiwi window, newer")
        mine.set_review_state("3", "confirmed", by="priya")
        assert mine.purge() == 1
        positions.append(mine.history_position())
    before = sha(src)
    db = Database(pg_url, schema=pg_schema, vectors=False)
    try:
        copy_store(src, db)
    finally:
        db.close()
    assert sha(src) == before
    dst = PostgresBackend(pg_url, schema=pg_schema)
    try:
        with SQLiteKnowledgeStore(src, read_only=True) as mine:
            theirs = dst.memories
            for chunk_id in map(str, range(1, 42)):
                assert mine.history(chunk_id) == theirs.history(chunk_id), chunk_id
            assert [e.event for e in theirs.history("3")] == ["migrated", "review", "review"]
            assert theirs.history("3")[0].seq == 0 and theirs.history("40")[0].event == "migrated"
            for when in (*positions, between):
                with mine.as_of(when) as was, theirs.as_of(when) as now:
                    assert was.list_chunks() == now.list_chunks()
                    assert was.list_chunks(deliverable=True) == now.list_chunks(deliverable=True)
                    assert was.history_position() == now.history_position()
            with theirs.as_of(positions[0]) as now:
                assert now.get("3").review_state == "confirmed"  # type: ignore[union-attr]
                assert now.get("8").superseded_by is None  # type: ignore[union-attr]
                assert now.get("41") is None and theirs.get("41") is not None  # written since
    finally:
        dst.close()


def test_a_destination_holding_other_memories_is_refused(tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    src = tmp_path / "memory.sqlite3"
    backend = SQLiteBackend(src)
    backend.memories.add_chunk("kiwi")
    backend.close()
    other = PostgresBackend(pg_url, schema=pg_schema)
    other.memories.add_chunk("already here")
    with pytest.raises(StoreError) as err:
        copy_store(src, other.db)
    other.close()
    assert "already holds 1 memories that were not copied from" in str(err.value)
    assert "copy into an empty schema" in str(err.value)


def test_a_newer_embedded_schema_is_refused_rather_than_half_copied(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    src = tmp_path / "memory.sqlite3"
    SQLiteBackend(src).close()
    conn = apsw.Connection(str(src))
    conn.execute("PRAGMA user_version = 6")
    conn.close()
    db = Database(pg_url, schema=pg_schema)
    try:
        with pytest.raises(
            StoreError, match=r"embedded schema version 6; this copy reads versions 1, 2, 4 and 5 only"
        ):
            copy_store(src, db)
    finally:
        db.close()


def test_copy_of_a_missing_or_foreign_file_is_a_clear_error(tmp_path: Path, pg_url: str) -> None:
    res = CliRunner().invoke(main, ["store", "copy", str(tmp_path / "nope.sqlite3"), pg_url])
    assert res.exit_code == 2 and "no embedded store here" in res.output
    (tmp_path / "notes.txt").write_text("hello")
    res = CliRunner().invoke(main, ["store", "copy", str(tmp_path / "notes.txt"), pg_url])
    assert res.exit_code == 2 and "Traceback" not in res.output and "error: " in res.output


def test_a_corrupt_records_file_beside_the_store_is_named_and_nothing_is_copied(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    src = tmp_path / "memory.sqlite3"
    backend = SQLiteBackend(src)
    backend.memories.add_chunk("Priya approves deploys", "fact", "operator")
    backend.close()
    records = tmp_path / "memory.records.sqlite3"
    records.write_bytes(b"this is not a database" * 100)
    db = Database(pg_url, schema=pg_schema)
    try:
        with pytest.raises(StoreError, match=r"memory\.records\.sqlite3: cannot read the per-turn records"):
            copy_store(src, db)
        with db.connection() as conn:
            assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
    finally:
        db.close()
    assert records.read_bytes() == b"this is not a database" * 100  # left as it was
    res = CliRunner().invoke(main, ["store", "copy", str(src), pg_url])
    assert res.exit_code == 2 and "Traceback" not in res.output and "per-turn records" in res.output


def test_the_store_command_is_plugged_into_the_command_line() -> None:
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0 and "store" in res.output
    res = CliRunner().invoke(main, ["store", "--help"])
    assert {"copy", "init", "status"} <= set(res.output.split())


def test_store_init_and_status(pg_url: str, pg_schema: str) -> None:
    res = CliRunner().invoke(main, ["store", "init", pg_url, "--schema", pg_schema])
    assert res.exit_code == 0 and res.output.strip().endswith(f"(schema {pg_schema}): at schema version 8")
    res = CliRunner().invoke(main, ["store", "status", pg_url, "--schema", pg_schema])
    status = json.loads(res.output)
    assert status["schema_version"] == 8 and status["chunks"] == 0 and status["trajectory"] == 0
