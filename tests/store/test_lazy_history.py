"""A migration to schema 3 that visits no row for the history or the content key (issue 11: the
1M-row migration within 1.5x one ``UPDATE ... CASE``). The history starts at the migration and a
row's ``migrated`` event is written just before its first change, by every path, and read at the
start of the history wherever it sits; the content key is filled later, in resumable batches,
and until then an exact duplicate of an unkeyed row is still found, through every write path.
After such a migration every public read and write works, explain and replay included, and a
key pass killed part-way resumes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import click
import pytest
from click.testing import CliRunner
from mcp import Client

from contextplane.cli import main as contextplane_main
from contextplane.explain import explain, replay
from contextplane.memory.consolidation import content_hash
from contextplane.memory.history import HISTORY_START, MIGRATION_NOTE
from contextplane.memory.model import format_timestamp
from contextplane.store import SQLiteKnowledgeStore, aio, cli, unkeyed
from contextplane.store import migrate as m
from contextplane.store.migrate import V1_SCHEMA_SQL
from contextplane_external.mcp_server import build_mcp_server
from tests.explain.helpers import backend_at, config, host_with, turn

WEB = "project:web"
T = "2025-01-01T00:00:00.000000Z"
LONG = " ".join(f"word{i}" for i in range(60))  # more tokens than the duplicate lookup's phrase

#: (content, domain, source_type, namespace, subject) of the version-1 rows, ids 1..
LEGACY: list[tuple[str, str, str, str, str]] = [
    ("Deploy window is Tuesday", "hot", "operator", WEB, "deploys"),  # 1: always on
    ("The deploy tool is Jenkins", "fact", "operator", WEB, "tool"),  # 2
    ("Standup is at 09:30", "general", "external", "", ""),  # 3: the MCP tool's provenance
    ("Window is Tuesday", "general", "manual", "", ""),  # 4: the CLI's provenance
    ("!!!  ???  ...", "general", "operator", "", ""),  # 5: no token for the full-text index
    ("Deploys 🥝 run after the canary", "general", "extracted", WEB, ""),  # 6: stemmed, emoji
    (LONG, "fact", "operator", "", ""),  # 7
    ("Replica lag spikes during migrations", "general", "conversation", WEB, ""),  # 8
    ("A wrong claim about caches", "fact", "operator", "", ""),  # 9
]


def make_v1(path: Path, rows: list[tuple[str, str, str, str, str]] = LEGACY) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(V1_SCHEMA_SQL)
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO chunks(content, domain, source_type, namespace, subject, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(*row, T, T) for row in rows],
    )
    conn.execute("COMMIT")
    conn.close()


@pytest.fixture
def legacy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A version-1 store, opened as a large one is: more rows than the open keys (here 2)."""
    monkeypatch.setattr(m, "INLINE_CONTENT_HASH_MAX_ROWS", 2)
    path = tmp_path / "v1.sqlite3"
    make_v1(path)
    return path


def raw_entries(path: Path, chunk_id: int) -> list[list[Any]]:
    """A row's history entries as stored (``[seq, at, event, actor, detail, cells before...]``),
    from ``chunks`` or, purged, ``chunk_gone``."""
    conn = apsw.Connection(str(path))
    try:
        row = conn.execute("SELECT history FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
        if row is None:
            row = conn.execute("SELECT history FROM chunk_gone WHERE chunk_id = ?", (chunk_id,)).fetchone()
        text = row[0] if row else None
        return [json.loads(line) for line in text.splitlines()] if text else []
    finally:
        conn.close()


def written(conn: apsw.Connection) -> tuple[int, int]:
    """Log rows, and rows with a history entry: what the history has written."""
    log_rows = conn.execute("SELECT count(*) FROM chunk_log").fetchone()[0]
    return log_rows, conn.execute("SELECT count(*) FROM chunks WHERE history IS NOT NULL").fetchone()[0]


def test_the_migration_writes_no_event_and_keys_no_row(
    legacy: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "contextplane.store"):
        store = SQLiteKnowledgeStore(legacy)
    with store:
        conn = store.conn
        assert written(conn) == (0, 0)
        assert conn.execute("SELECT count(*) FROM chunks WHERE content_hash IS NULL").fetchone() == (9,)
        assert m.pending_v3_passes(conn) == [m.CONTENT_HASH_BACKFILL]
        assert m.meta_get(conn, m.HISTORY_BASELINE_KEY) == "9"
        started = m.meta_get(conn, m.HISTORY_STARTED_KEY)
        assert started is not None
        # the index of the key is partial: created over unkeyed rows, it holds none of them
        index = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_content_hash'").fetchone()
        assert index[0].endswith("WHERE content_hash IS NOT NULL")
        # every row reads as present since the migration, in the state the backfill gave it
        for chunk in store.list_chunks():
            (event,) = store.history(chunk.id)
            assert (event.seq, event.event, event.actor) == (HISTORY_START, "migrated", "")
            assert event.review_state == chunk.review_state and event.updated_at == chunk.updated_at
            assert event.detail == {"note": MIGRATION_NOTE} and format_timestamp(event.at) == started
        assert store.history("10") == [] and store.history_position().seq == 0
    warned = [r.getMessage() for r in caplog.records if "content key" in r.getMessage()]
    assert warned == [
        f"{legacy}: more than 2 rows have no content key yet; a write finds its exact duplicates among "
        "them through the full-text index until `contextplane migrate` keys them (resumable, in "
        "batches), and each later open keys 2 more"
    ]
    # `memory show` says where the history starts
    shown = CliRunner().invoke(contextplane_main, ["memory", "show", "2", "--db", str(legacy)])
    assert shown.exit_code == 0, shown.output
    assert (
        f"#0 {started} present at migration; history starts at the migration that added it; changes before "
        "it were not recorded" in shown.output
    )


def test_each_first_change_writes_the_rows_migrated_event_just_before_its_own(legacy: Path) -> None:
    with SQLiteKnowledgeStore(legacy) as store:
        pending = store.get("8")
        assert pending is not None and pending.review_state == "pending"
        store.set_review_state("8", "confirmed", by="priya")
        store.set_review_state("8", "rejected", by="sam")  # a second change: no second baseline
        duplicate = store.add_chunk("Standup   is at 09:30", "general", "external")
        assert (duplicate.outcome, duplicate) == ("duplicate", "3")
        store.set_expires_at("3", datetime.now(UTC) - timedelta(minutes=1), by="priya")
        store.invalidate_chunk("9", reason="found wrong", by="priya")
        successor = store.supersede("2", "The deploy tool is Argo")
        by_subject = store.add_chunk(
            "Deploy window is Thursday",
            "hot",
            "operator",
            memory_kind="standing",
            namespace=WEB,
            subject="deploys",
        )
        assert store.purge() == 2  # 3 (expired) and 9 (invalidated)
        assert by_subject.superseded == ("1",)
        expected = {
            "8": [("migrated", "pending"), ("review", "confirmed"), ("review", "rejected")],
            "3": [
                ("migrated", "pending"),
                ("consolidated", "pending"),
                ("expiry", "pending"),
                ("purged", "pending"),
            ],
            "9": [("migrated", "confirmed"), ("invalidated", "confirmed"), ("purged", "confirmed")],
            "2": [("migrated", "confirmed"), ("superseded", "confirmed")],
            "1": [("migrated", "confirmed"), ("superseded", "confirmed")],
        }
        for chunk_id, events in expected.items():
            read = store.history(chunk_id)
            assert [(e.event, e.review_state) for e in read] == events, chunk_id
            assert read[0].seq == HISTORY_START and all(e.seq > HISTORY_START for e in read[1:])
            stored = raw_entries(legacy, int(chunk_id))
            # each change's entry, written by the change: nothing for the migration, nor for the
            # purge (the row moved to chunk_gone); the first holds the state the migration left
            assert [e[2] for e in stored] == [e for e, _ in events if e not in ("migrated", "purged")]
            assert stored[0][5] == events[0][1] and stored[0][7] is None
            assert (
                [e[0] for e in stored]
                == sorted(e[0] for e in stored)
                == [e.seq for e in read[1:] if e.event != "purged"]
            )
        assert [e.event for e in store.history(successor)] == ["created"]
        for untouched in ("4", "5", "6", "7"):
            assert raw_entries(legacy, int(untouched)) == []
            assert [e.event for e in store.history(untouched)] == ["migrated"]


def test_as_of_before_a_first_change_reads_the_row_as_the_migration_left_it(legacy: Path) -> None:
    with SQLiteKnowledgeStore(legacy) as store:
        at_migration = store.history_position()
        new = store.add_chunk("a fresh note about canaries", "general", "operator", namespace=WEB)
        after_write = store.history_position()
        between = datetime.now(UTC)
        deliverable = [c.id for c in store.list_chunks(deliverable=True)]
        store.set_review_state("1", "rejected", by="sam")
        store.invalidate_chunk("9", reason="found wrong")
        store.set_expires_at("7", datetime.now(UTC) - timedelta(minutes=1))
        assert store.purge() == 2
        for position in (at_migration, after_write):
            with store.as_of(position) as then:
                assert then.get("1").review_state == "confirmed"  # type: ignore[union-attr]
                assert [c.id for c in then.list_chunks(delivery_policy="always")] == ["1"]
                assert {h.chunk.id for h in then.search("deploy window")} >= {"1"}
                assert [e.event for e in then.history("1")] == ["migrated"]
                assert then.overlay is not None and set(then.overlay.purged_after) == {"7", "9"}
                assert set(then.overlay.changed) >= {"1", "7", "9"}
                assert (then.get(new) is None) == (position == at_migration)
        with store.as_of(after_write) as then:
            assert [c.id for c in then.list_chunks(deliverable=True)] == [
                i for i in deliverable if i not in ("7", "9")
            ]
        # a time between the write and the changes is the position after the write (the migrated
        # events written since carry the migration's time, and are no change)
        with store.as_of(between) as then:
            assert then.history_position().seq == after_write.seq
            assert then.get("1").review_state == "confirmed"  # type: ignore[union-attr]


def test_explain_and_replay_of_a_turn_on_a_migrated_store(legacy: Path) -> None:
    cfg = config()
    host = host_with(cfg)
    with backend_at(legacy, cfg) as backend:
        store = backend.memories
        assert written(store.conn) == (0, 0)
        first = turn(host, backend, "when is the deploy window?")
        delivered = {i for s in first.sections for i in s.item_ids}
        assert "1" in delivered
        # changes write the rows' baselines; the turn, replayed as of its position, is the same
        store.set_review_state("5", "rejected")
        store.set_review_state("1", "rejected", by="sam")
        report = replay(backend, "s1", 1, host=host)
        assert report.identical, [(d.label, d.reasons) for d in report.changed]
        report = replay(backend, "s1", 1, host=host, now=True)
        assert not report.identical
        reasons = [r for d in report.changed for r in d.reasons]
        assert any(
            r.startswith("memory 1's lifecycle changed after the turn: review state set to rejected")
            for r in reasons
        )
        assert not any("migration" in r for r in reasons), reasons
        then = explain("1", backend=backend, host=host, session_id="s1", turn_index=1)
        now = explain("1", backend=backend, host=host, query="when is the deploy window?")
        assert then.verdict == "delivered" and (now.verdict, now.reason) == ("filtered", "rejected")
        assert now.evidence["by"] == "sam"


# --------------------------------------------------------------------------- duplicates of unkeyed rows


@pytest.fixture(params=["stemmed", "unstemmed"])
def unkeyed_store(legacy: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The migrated store with no row keyed, its full-text index stemmed (the small-store case)
    or not yet (the large-store case: the old index until `contextplane migrate`)."""
    if request.param == "unstemmed":
        monkeypatch.setattr(m, "INLINE_STEMMING_MAX_ROWS", 0)
    monkeypatch.setattr(m, "INLINE_CONTENT_HASH_MAX_ROWS", 0)  # no later open keys a row either
    monkeypatch.setattr(unkeyed, "LOOKUP_COST_IN_KEYS", 0)  # nor a bulk write (see below)
    with SQLiteKnowledgeStore(legacy) as store:
        assert store.conn.execute("SELECT count(*) FROM chunks WHERE content_hash IS NULL").fetchone() == (9,)
        assert m.stemming_pending(store.conn) == (request.param == "unstemmed")
    return legacy


def _root() -> click.Group:
    @click.group()
    def main() -> None:
        pass

    cli.register(main)
    return main


def test_a_duplicate_of_an_unkeyed_row_is_found_through_every_write_path(unkeyed_store: Path) -> None:
    path = unkeyed_store
    with SQLiteKnowledgeStore(path) as store:
        one = store.add_chunk("  The deploy tool\tis Jenkins ", "fact", "operator", namespace=WEB)
        assert (one.outcome, one, one.duplicate_of) == ("duplicate", "2", "2")
        bulk = store.add_chunks(
            [
                {
                    "content": "Replica lag spikes during migrations",
                    "source_type": "conversation",
                    "namespace": WEB,
                },
                {"content": "!!! ??? ...", "source_type": "operator"},
                {"content": "Deploys 🥝 run after the canary", "source_type": "extracted", "namespace": WEB},
                {"content": LONG, "source_type": "operator", "domain": "fact"},
                {"content": "a new row", "source_type": "operator"},
                {"content": "a new row", "source_type": "operator"},
            ]
        )
        assert [(b.outcome, str(b)) for b in bulk[:4]] == [("duplicate", i) for i in ("8", "5", "6", "7")]
        assert bulk[4].outcome == "stored" and (bulk[5].outcome, bulk[5]) == ("duplicate", bulk[4])

        async def through_async() -> str:
            return await aio.aadd_chunk(store, "Window is  Tuesday", "general", "manual")

        assert asyncio.run(through_async()) == "4"
    runner = CliRunner()
    out = runner.invoke(_root(), ["memory", "add", "Window is Tuesday", "--db", str(path), "--json"])
    assert out.exit_code == 0, out.output
    write = json.loads(out.output)["write"]
    assert (write["id"], write["outcome"], write["duplicate_of"]) == ("4", "duplicate", "4")
    with SQLiteKnowledgeStore(path) as store:

        async def through_mcp() -> Any:
            async with Client(build_mcp_server(store)) as client:
                return (
                    await client.call_tool("memory_ingest", {"content": "Standup is at 09:30"})
                ).structured_content

        got = asyncio.run(through_mcp())
        assert (got["outcome"], got["id"]) == ("duplicate", "3")
        for chunk_id, writes in (("2", 1), ("8", 1), ("5", 1), ("6", 1), ("7", 1), ("4", 2), ("3", 1)):
            events = store.history(chunk_id)
            assert [e.event for e in events] == ["migrated"] + ["consolidated"] * writes, chunk_id
        assert store.conn.execute("SELECT count(*) FROM chunks").fetchone() == (10,)  # one row added
        # found without a key: every legacy row is still unkeyed
        assert store.conn.execute("SELECT count(*) FROM chunks WHERE content_hash IS NULL").fetchone() == (9,)


def test_an_unkeyed_row_is_a_duplicate_only_of_a_write_without_an_event_time(unkeyed_store: Path) -> None:
    """Migrated rows have no event time: the same text said at a given time is another event."""
    with SQLiteKnowledgeStore(unkeyed_store) as store:
        said = store.add_chunk("The deploy tool is Jenkins", "fact", "operator", namespace=WEB, occurred_at=T)
        scan = store.add_chunks([{"content": "!!! ??? ...", "source_type": "operator", "occurred_at": T}])[0]
        plain = store.add_chunk("The deploy tool is Jenkins", "fact", "operator", namespace=WEB)
        assert said.outcome != "duplicate" and said not in ("2", scan) and scan.outcome == "stored"
        assert (plain.outcome, plain) == ("duplicate", "2")
        again = store.add_chunk(
            "The deploy tool is  Jenkins", "fact", "operator", namespace=WEB, occurred_at=T
        )
        assert (again.outcome, again) == ("duplicate", said)


def test_what_is_not_an_exact_duplicate_of_an_unkeyed_row_is_stored(unkeyed_store: Path) -> None:
    with SQLiteKnowledgeStore(unkeyed_store) as store:
        store.set_review_state("8", "rejected")  # no longer deliverable: a copy is a new row
        writes = [
            ("The deploy tool is Jenkins today", "operator", WEB),  # holds the text, is not it
            ("the deploy tool is jenkins", "operator", WEB),  # another case
            ("The deploy tool is Jenkins", "operator", ""),  # another scope
            ("The deploy tool is Jenkins", "extracted", WEB),  # another provenance
            ("Replica lag spikes during migrations", "conversation", WEB),
            ("!!! ???", "operator", ""),  # other punctuation
            (" ".join(f"word{i}" for i in range(59)), "operator", ""),  # one word short
        ]
        for content, source, namespace in writes:
            got = store.add_chunk(content, "fact", source, namespace=namespace)
            assert got.outcome in ("stored", "near_duplicate"), (content, got.outcome)
            assert int(got) > 9


def test_a_bulk_write_that_would_cost_more_in_lookups_keys_the_store_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(m, "INLINE_CONTENT_HASH_MAX_ROWS", 0)
    path = tmp_path / "v1.sqlite3"
    make_v1(path, [(f"legacy memory {i}", "general", "operator", "", "") for i in range(100)])

    def unkeyed_rows(store: SQLiteKnowledgeStore) -> int:
        return int(store.conn.execute("SELECT count(*) FROM chunks WHERE content_hash IS NULL").fetchone()[0])

    with SQLiteKnowledgeStore(path) as store:
        # 3 rows: 75 lookups' worth of keying is less than the 100 rows left, so they are looked up
        small = store.add_chunks(
            [{"content": f"legacy memory {i}", "source_type": "operator"} for i in range(3)]
        )
        assert [(w.outcome, str(w)) for w in small] == [("duplicate", str(i + 1)) for i in range(3)]
        assert unkeyed_rows(store) == 100 and m.pending_v3_passes(store.conn) == [m.CONTENT_HASH_BACKFILL]
        # 4 rows: 100 lookups' worth, so the store is keyed first and the key finds them
        bulk = store.add_chunks(
            [{"content": f"legacy memory {i}", "source_type": "operator"} for i in range(10, 14)]
        )
        assert [(w.outcome, str(w)) for w in bulk] == [("duplicate", str(i + 1)) for i in range(10, 14)]
        assert unkeyed_rows(store) == 0 and m.pending_v3_passes(store.conn) == []


def test_later_opens_key_a_batch_each_and_migrate_finishes(legacy: Path) -> None:
    SQLiteKnowledgeStore(legacy).close()  # the migrating open keys nothing

    def unkeyed() -> int:
        conn = apsw.Connection(str(legacy))
        try:
            return int(conn.execute("SELECT count(*) FROM chunks WHERE content_hash IS NULL").fetchone()[0])
        finally:
            conn.close()

    assert unkeyed() == 9
    SQLiteKnowledgeStore(legacy).close()
    assert unkeyed() == 7
    SQLiteKnowledgeStore(legacy).close()
    assert unkeyed() == 5
    # a read-only open reads as usual and keys nothing
    with SQLiteKnowledgeStore(legacy, read_only=True) as reader:
        assert len(reader.list_chunks()) == 9 and reader.history("9")[0].event == "migrated"
    assert unkeyed() == 5
    done = CliRunner().invoke(contextplane_main, ["migrate", "--db", str(legacy)])
    assert done.exit_code == 0, done.output
    assert "passes content_hash_backfill" in done.output
    conn = apsw.Connection(str(legacy))
    assert all(h == content_hash(c) for c, h in conn.execute("SELECT content, content_hash FROM chunks"))
    assert m.pending_v3_passes(conn) == [] and written(conn)[1] == 0
    assert not [k for (k,) in conn.execute("SELECT key FROM _kb_meta") if k.endswith("_cursor")]
    conn.close()
    with SQLiteKnowledgeStore(legacy) as store:  # the key finds them now
        assert (store.add_chunk("A wrong claim about caches", "fact", "operator").outcome) == "duplicate"


_KILL_KEYS = textwrap.dedent(
    """
    import os, signal, sys
    from contextplane.store import migrate
    from contextplane.store.sqlite import connect

    path, limit = sys.argv[1], int(sys.argv[2])
    conn = connect(path)
    migrate.ensure_schema(conn, path, content_hash_rows=0)  # as a large store's open: no key
    assert migrate.pending_v3_passes(conn) == [migrate.CONTENT_HASH_BACKFILL]
    updates = 0
    def hook(op, db, table, rowid):  # die in the middle of a batch's UPDATE, before its COMMIT
        global updates
        if table == "chunks":
            updates += 1
            if updates == limit:
                os.kill(os.getpid(), signal.SIGKILL)
    conn.set_update_hook(hook)
    migrate.migrate_content_hashes(conn, batch_rows=100)
    print("finished without being killed")
    """
)


def test_a_key_pass_killed_part_way_resumes_without_loss(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite3"
    rows = [(f"legacy memory {i}", "general", "operator", "", "") for i in range(1000)]
    make_v1(path, rows)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_KEYS, str(path), "450"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -9, proc.stdout + proc.stderr
    conn = apsw.Connection(str(path))
    assert conn.execute("SELECT count(*) FROM chunks WHERE content_hash IS NOT NULL").fetchone() == (400,)
    assert m.meta_get(conn, "content_hash_backfill_cursor") == "400"
    assert m.pending_v3_passes(conn) == [m.CONTENT_HASH_BACKFILL]
    conn.close()
    visited: list[tuple[int, int]] = []
    with SQLiteKnowledgeStore(
        path, on_migrate_batch=lambda d, t: visited.append((d, t)), migrate_batch_rows=100
    ) as store:
        assert visited[0] == (100, 600) and visited[-1] == (600, 600)  # resumed from the cursor
        assert written(store.conn) == (0, 0)
        keys = store.conn.execute("SELECT content, content_hash FROM chunks").fetchall()
        assert len(keys) == 1000 and all(h == content_hash(c) for c, h in keys)
        assert m.pending_v3_passes(store.conn) == []
        assert len(store.search("legacy memory", k=2000)) == 1000
        assert store.add_chunk("legacy memory 999", "general", "operator") == "1000"
