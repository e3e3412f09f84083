"""Consolidation on write (ADR D7): duplicate, same-subject and near-duplicate writes through
every write path (the API, bulk ingest, the CLI, the MCP tool), each with its reported outcome
and its history event; the configuration keys; concurrent writers of one subject (threads on
separate connections, and separate OS processes)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from mcp import Client

from contextplane.config import structure
from contextplane.errors import ValidationError
from contextplane.memory.consolidation import Consolidation, WriteOutcome, normalise_content, similarity
from contextplane.store import SQLiteKnowledgeStore, cli
from contextplane.store.api import memory_ingest
from contextplane.store.writes import SUBJECT_HEADS_SQL
from contextplane_external.mcp_server import build_mcp_server

WEB = "project:web"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with SQLiteKnowledgeStore(tmp_path / "c.sqlite3") as opened:
        yield opened


def test_normalising_skips_text_already_normal_and_agrees_with_splitting_everywhere() -> None:
    """The fast path (printable, no double space, no space at either end: returned as is) must
    give what collapsing by ``str.split`` gives, for every code point in every position."""
    for point in range(0x110000):
        ch = chr(point)
        for text in (f"a{ch}b", f"{ch}a", f"a{ch}", f"a {ch}b"):
            assert normalise_content(text) == " ".join(text.split()), (hex(point), text)
    plain = "Deploy window is Tuesday"
    assert normalise_content(plain) is plain


def test_the_measures() -> None:
    assert normalise_content("  Deploy   window\n is Tuesday ") == "Deploy window is Tuesday"
    assert similarity("Deploy window: Tuesday!", "deploy WINDOW tuesday") == 1.0
    assert similarity("the deploy window is tuesday", "the deploy window is wednesday") == pytest.approx(
        4 / 6
    )
    assert similarity("ﬁle ﬁx", "file fix") == 1.0  # NFKC: the ligature is two letters
    with pytest.raises(
        ValidationError, match=r"near_duplicate_threshold: expected a number in \(0, 1\], got 0"
    ):
        Consolidation(near_duplicate_threshold=0)


def test_api_exact_duplicate_returns_the_existing_id_and_says_so(store: Any) -> None:
    first = memory_ingest(store, "Deploy window is Tuesday", source_type="operator", namespace=WEB)
    again = memory_ingest(store, "  Deploy window   is Tuesday\n", source_type="operator", namespace=WEB)
    assert isinstance(again, WriteOutcome)
    assert (again, again.outcome, again.duplicate_of) == (first, "duplicate", first)
    assert again.message == f"not stored: an exact duplicate of memory {first}, which is returned"
    assert len(store.list_chunks()) == 1
    event = store.history(first)[-1]
    assert (event.event, event.actor, event.detail["outcome"]) == ("consolidated", "operator", "duplicate")
    # Not a duplicate: another scope, another provenance, or a row that is no longer deliverable.
    assert memory_ingest(store, "Deploy window is Tuesday", source_type="operator").outcome == "stored"
    agents = memory_ingest(store, "Deploy window is Tuesday", source_type="extracted", namespace=WEB)
    assert (agents.outcome, agents.near_duplicates) == ("near_duplicate", ((first, 1.0),))  # for review
    store.set_review_state(first, "rejected")
    assert memory_ingest(store, "Deploy window is Tuesday", source_type="operator", namespace=WEB) != first


def test_api_same_subject_supersedes_in_one_transaction(store: Any) -> None:
    old = memory_ingest(
        store, "Deploy window is Tuesday", source_type="operator", namespace=WEB, subject="window"
    )
    other_kind = memory_ingest(
        store,
        "Window cleaning is on Friday",
        source_type="operator",
        namespace=WEB,
        subject="window",
        memory_kind="note",
    )
    other_scope = memory_ingest(store, "Deploy window is Monday", source_type="operator", subject="window")
    new = memory_ingest(
        store, "Deploy window is Thursday", source_type="operator", namespace=WEB, subject="window"
    )
    assert (new.outcome, new.superseded) == ("superseded", (old,))
    assert new.message == f"stored as {new}; it supersedes memory {old} (same subject, scope and kind)"
    assert store.get(old).superseded_by == new
    assert {c.id for c in store.list_chunks(deliverable=True)} == {new, other_kind, other_scope}
    created = store.history(new)[0]
    assert (created.event, created.detail["outcome"], created.detail["superseded"]) == (
        "created",
        "superseded",
        [old],
    )
    superseded = store.history(old)[-1]
    assert (superseded.event, superseded.superseded_by, superseded.detail["rule"]) == (
        "superseded",
        new,
        "same subject, scope and kind",
    )
    # The chain is kept: a third write supersedes the second, and the first stays superseded.
    third = memory_ingest(
        store, "Deploy window is Friday", source_type="operator", namespace=WEB, subject="window"
    )
    assert third.superseded == (new,) and store.get(old).superseded_by == new


def test_api_near_duplicates_are_reported_for_review_not_merged(store: Any) -> None:
    base = memory_ingest(store, "The canary runs for thirty minutes before rollout", source_type="operator")
    near = memory_ingest(
        store, "the canary runs for thirty minutes before each rollout!", source_type="extracted"
    )
    assert near.outcome == "near_duplicate" and near != base
    assert near.near_duplicates == ((base, round(8 / 9, 4)),)
    assert "recorded for review, nothing merged" in near.message
    assert {c.id for c in store.list_chunks(deliverable=True)} == {base, near}
    assert store.history(near)[0].detail["near_duplicates"] == [[base, round(8 / 9, 4)]]
    far = memory_ingest(store, "Lunch is served at noon", source_type="extracted")
    assert far.outcome == "stored" and far.near_duplicates == ()


def test_bulk_ingest_consolidates_duplicates_and_subjects(store: Any) -> None:
    existing = store.add_chunk("Alpha fact", "fact", "operator")
    ids = store.add_chunks(
        [
            {
                "content": "Alpha fact",
                "domain": "fact",
                "source_type": "operator",
            },  # duplicate of a stored row
            {"content": "Beta fact", "source_type": "operator"},
            {"content": "Beta  fact", "source_type": "operator"},  # duplicate within the batch
            {"content": "Window is Tuesday", "source_type": "operator", "subject": "w"},
            {
                "content": "Window is Thursday",
                "source_type": "operator",
                "subject": "w",
            },  # supersedes the row above
        ]
    )
    assert [i.outcome for i in ids] == ["duplicate", "stored", "duplicate", "stored", "superseded"]
    assert ids[0] == existing and ids[2] == ids[1]
    assert ids[4].superseded == (ids[3],) and store.get(ids[3]).superseded_by == ids[4]
    assert [e.event for e in store.history(existing)] == ["created", "consolidated"]


def test_bulk_supersession_is_what_the_same_writes_one_by_one_give(tmp_path: Path) -> None:
    """The batch's subject lookup is one statement for the batch; within the batch each row
    supersedes the one before it only if that one was deliverable when written, so bulk and
    one-by-one writes leave the same chains."""
    before = [
        {"content": "Window is Monday", "subject": "w", "namespace": "project:a"},
        {"content": "Window is Monday in b", "subject": "w", "namespace": "project:b"},
        {"content": "We chose Monday", "subject": "w", "namespace": "project:a", "memory_kind": "decision"},
    ]
    batch = [
        {"content": "Window is Tuesday", "subject": "w", "namespace": "project:a"},
        {
            "content": "Window is Friday, rejected",
            "subject": "w",
            "namespace": "project:a",
            "review_state": "rejected",
        },
        {"content": "Window is Thursday", "subject": "w", "namespace": "project:a"},
        {"content": "Window is Tuesday in b", "subject": "w", "namespace": "project:b"},
    ]
    chains = []
    for name, bulk in (("bulk", True), ("single", False)):
        with SQLiteKnowledgeStore(tmp_path / f"{name}.sqlite3") as store:
            for row in before:
                store.add_chunk(**row, source_type="operator")
            if bulk:
                outcomes = store.add_chunks([{**row, "source_type": "operator"} for row in batch])
            else:
                outcomes = [store.add_chunk(**row, source_type="operator") for row in batch]
            chains.append(
                (
                    [(w.outcome, w.superseded) for w in outcomes],
                    {c.id: (c.superseded_by, c.is_deliverable()) for c in store.list_chunks()},
                    [[e.event for e in store.history(c.id)] for c in store.list_chunks()],
                )
            )
            plan = store.conn.execute(
                "EXPLAIN QUERY PLAN " + SUBJECT_HEADS_SQL, ('[["w", "project:a", "fact"]]', 99, "x")
            ).fetchall()
            assert any("USING INDEX chunks_subject" in str(step[-1]) for step in plan), plan
    assert chains[0] == chains[1]
    said, rows, _ = chains[0]
    assert said == [("superseded", ("1",)), ("superseded", ("4",)), ("stored", ()), ("superseded", ("2",))]
    assert rows["1"] == ("4", False) and rows["4"] == ("5", False) and rows["5"] == (None, False)
    assert rows["6"] == (None, True) and rows["3"] == (None, True) and rows["7"] == (None, True)


def test_the_configuration_turns_supersession_and_deduplication_off(tmp_path: Path) -> None:
    conf = structure(
        {"store": {"auto_supersede": False, "deduplicate": False, "near_duplicate_threshold": 0.95}}
    )
    policy = Consolidation.from_config(conf)
    assert policy == Consolidation(deduplicate=False, auto_supersede=False, near_duplicate_threshold=0.95)
    with SQLiteKnowledgeStore(tmp_path / "off.sqlite3", consolidation=policy) as store:
        a = store.add_chunk("Window is Tuesday", subject="w", source_type="operator")
        b = store.add_chunk("Window is Thursday", subject="w", source_type="operator")
        c = store.add_chunk("Window is Thursday", subject="w", source_type="operator")
        assert [x.outcome for x in (a, b, c)] == [
            "stored",
            "stored",
            "near_duplicate",
        ]  # identical text: similarity 1
        assert len(store.list_chunks(deliverable=True)) == 3
    with pytest.raises(
        Exception, match=r"invalid value for store\.near_duplicate_threshold: expected a number above 0"
    ):
        structure({"store": {"near_duplicate_threshold": 1.5}})


@pytest.fixture
def root() -> click.Group:
    @click.group()
    def main() -> None:
        pass

    cli.register(main)
    return main


def test_cli_add_reads_the_configuration(
    root: click.Group, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "cli.sqlite3")
    runner = CliRunner()
    args = ["memory", "add", "--subject", "w", "--db", db]
    assert runner.invoke(root, [*args[:2], "Window is Tuesday", *args[2:]]).output == "added 1\n"
    monkeypatch.setenv("CONTEXTPLANE_STORE__AUTO_SUPERSEDE", "false")
    out = runner.invoke(root, [*args[:2], "Window is Thursday", *args[2:], "--json"]).output
    assert json.loads(out)["write"]["outcome"] == "stored"
    monkeypatch.delenv("CONTEXTPLANE_STORE__AUTO_SUPERSEDE")
    out = runner.invoke(root, [*args[:2], "Window is Friday", *args[2:]]).output
    assert out == "added 3: it supersedes memory 1, 2 (same subject, scope and kind)\n"
    shown = runner.invoke(root, ["memory", "show", "1", "--db", db]).output
    assert "superseded by 3 (by manual)" in shown


def test_mcp_memory_ingest_reports_the_outcome(store: Any) -> None:
    async def main() -> list[Any]:
        async with Client(build_mcp_server(store)) as client:
            return [
                (await client.call_tool("memory_ingest", args)).structured_content
                for args in (
                    {"content": "Standup is at 09:30", "subject": "standup"},
                    {"content": "Standup is at 09:30", "subject": "standup"},
                    {"content": "Standup is at 10:00", "subject": "standup"},
                    {"content": "standup is at 10:00!"},
                )
            ]

    stored, duplicate, superseding, near = asyncio.run(main())
    assert stored["outcome"] == "stored"
    assert (duplicate["outcome"], duplicate["id"]) == ("duplicate", stored["id"])
    assert (superseding["outcome"], superseding["superseded"]) == ("superseded", [stored["id"]])
    assert near["outcome"] == "near_duplicate" and near["near_duplicates"] == [
        {"id": superseding["id"], "similarity": 1.0}
    ]
    assert [e.event for e in store.history(stored["id"])] == ["created", "consolidated", "superseded"]
    assert store.history(superseding["id"])[0].actor == "external"


def test_concurrent_writers_of_one_subject_leave_exactly_one_head(tmp_path: Path) -> None:
    path = tmp_path / "race.sqlite3"
    SQLiteKnowledgeStore(path).close()
    threads, per_thread = 6, 8
    start = threading.Barrier(threads)
    written: list[str] = []
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            with SQLiteKnowledgeStore(path) as own:  # one connection per writer: SQLite serialises them
                start.wait()
                for i in range(per_thread):
                    written.append(
                        own.add_chunk(f"Deploy window, take {n}.{i}", "fact", "operator", subject="window")
                    )
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not errors
    with SQLiteKnowledgeStore(path) as store:
        rows = store.list_chunks()
        heads = [c for c in rows if c.is_deliverable()]
        assert len(rows) == threads * per_thread and len(heads) == 1
        # One chain through every row: each row but the head is superseded by exactly one later row.
        successor = {c.id: c.superseded_by for c in rows if c.superseded_by}
        assert len(successor) == len(rows) - 1 and len(set(successor.values())) == len(rows) - 1
        walk, cur = [rows[0].id], rows[0].id
        while cur in successor:
            cur = successor[cur]
            walk.append(cur)
        assert walk[-1] == heads[0].id and len(walk) == len(rows)
        assert sum(1 for w in written if w.outcome == "superseded") == len(rows) - 1


_SUBJECT_WRITER = textwrap.dedent(
    """
    import json, sys
    from contextplane.store import SQLiteKnowledgeStore

    path, tag, singles = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SQLiteKnowledgeStore(path)
    print("ready", flush=True)
    sys.stdin.readline()  # every writer starts at once
    said = []
    for i in range(singles):
        written = store.add_chunk(f"Deploy window, {tag} take {i}", "fact", "operator", subject="window")
        said.append(written.to_dict())
        if i % 4 == 3:  # bulk writes naming the subject twice: a chain inside one transaction too
            rows = [
                {"content": f"Deploy window, {tag} bulk {i}.{j}", "domain": "fact",
                 "source_type": "operator", "subject": "window"}
                for j in (0, 1)
            ]
            said.extend(w.to_dict() for w in store.add_chunks(rows))
    store.close()
    print(json.dumps(said))
    """
)


def test_processes_writing_one_subject_leave_one_head_and_a_linear_chain(tmp_path: Path) -> None:
    path = tmp_path / "processes.sqlite3"
    SQLiteKnowledgeStore(path).close()  # created once, so every writer opens an existing store
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    processes, singles = 4, 40  # 240 rows: the writers interleave (10-18 switches seen)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SUBJECT_WRITER, str(path), f"p{n}", str(singles)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.stderr
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    said: list[dict[str, Any]] = []
    pids = set()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        said.extend(json.loads(out))
        pids.add(proc.pid)
    assert len(pids) == processes
    per_process = singles + 2 * (singles // 4)
    assert len(said) == processes * per_process
    with SQLiteKnowledgeStore(path) as store:
        rows = store.list_chunks()
        assert len(rows) == len(said) and {c.id for c in rows} == {w["id"] for w in said}
        heads = [c for c in rows if c.is_deliverable()]
        assert len(heads) == 1, [c.id for c in heads]
        # A linear chain: every row but the head superseded by exactly one later row, each row
        # superseding at most one, and walking it from the oldest row visits every row.
        successor = {c.id: c.superseded_by for c in rows if c.superseded_by is not None}
        assert len(successor) == len(rows) - 1 and len(set(successor.values())) == len(rows) - 1
        assert all(int(new) > int(old) for old, new in successor.items())
        walk = [rows[0].id]
        while walk[-1] in successor:
            walk.append(successor[walk[-1]])
        assert walk[-1] == heads[0].id and len(walk) == len(rows)
        # Every write reported what it did, and the history agrees with the rows.
        reported = {w["id"]: w["superseded"] for w in said if w["outcome"] == "superseded"}
        assert len(reported) == len(rows) - 1 and all(len(olds) == 1 for olds in reported.values())
        assert {olds[0]: new for new, olds in reported.items()} == successor
        for old, new in successor.items():
            events = store.history(old)
            assert [e.event for e in events] == ["created", "superseded"] and events[-1].superseded_by == new


def test_writing_a_superseded_text_again_returns_the_head_and_the_projection_keeps_one(
    tmp_path: Path,
) -> None:
    """Issue 23 item 2: with 1 superseded by 2, adding 1's text again stored a new active row
    beside 2, and the projection delivered both, contradicting each other. Now the write is
    answered with the current head (outcome 'outdated'), through the API, the CLI and the MCP
    tool, and the projection delivers the head alone."""
    from contextplane.cli import main

    db = tmp_path / "c.sqlite3"
    with SQLiteKnowledgeStore(db) as store:
        old = store.add_chunk("The deploy window is Tuesday", source_type="manual", subject="deploy-window")
        head = store.add_chunk("The deploy window is Wednesday", source_type="manual", subject="deploy-window")
        assert head.outcome == "superseded" and store.get(old).superseded_by == head
        again = store.add_chunk("The deploy window is Tuesday", source_type="manual", subject="deploy-window")
        assert (again, again.outcome, again.duplicate_of, again.stored) == (head, "outdated", old, False)
        assert again.message == (
            f"not stored: the text of memory {old}, which memory {head} superseded; {head}, the current "
            f"one, is returned (to make this text current again, supersede {head} with it)"
        )
        assert store.history(head)[-1].event == "consolidated"
    added = CliRunner().invoke(main, ["memory", "add", "The deploy window is  Tuesday", "--db", str(db)])
    assert added.exit_code == 0 and added.output.startswith(f"not added: not stored: the text of memory {old}, ")

    async def tool() -> Any:
        with SQLiteKnowledgeStore(db) as store:
            async with Client(build_mcp_server(store)) as client:
                # The MCP tool writes with provenance 'external': not the same key, so it is
                # stored (a provenance never borrows another's row), as a duplicate would be.
                return await client.call_tool("memory_ingest", {"content": "The deploy window is Friday"})

    assert not asyncio.run(tool()).is_error
    shown = CliRunner().invoke(main, ["preview", "when is the deploy window", "--db", str(db)])
    assert shown.exit_code == 0, shown.output
    assert "The deploy window is Wednesday" in shown.output
    assert "The deploy window is Tuesday" not in shown.output
    with SQLiteKnowledgeStore(db) as store:
        live = [c.content for c in store.list_chunks(deliverable=True, limit=None)]
        assert live == ["The deploy window is Wednesday", "The deploy window is Friday"]
        # Restating the old text on purpose goes through the head, as the message says.
        restated = store.supersede(head, "The deploy window is Tuesday", source_type="manual")
        live = [c.content for c in store.list_chunks(deliverable=True, limit=None)]
        assert live == ["The deploy window is Friday", "The deploy window is Tuesday"]
        assert store.get(head).superseded_by == restated
