"""Prompt snapshots, the trajectory, redaction, retention and the inspector CLI (D5)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner
from langchain_core.messages import AIMessage, HumanMessage

from contextplane import PluginHost, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend, SQLiteSnapshotStore
from contextplane.config import structure
from contextplane.observability import Redactor, TrajectoryWriter, bound_bytes, read_trajectory
from contextplane.observability.cli import snapshots
from contextplane.records import SnapshotRow

from .conftest import MARK, MEMTEXT, InjectionLog, MarkerSections, cfg, make_agent


def db_dump(path: Path) -> str:
    conn = apsw.Connection(str(path))
    out = []
    for (table,) in list(conn.execute("SELECT name FROM sqlite_master WHERE type='table'")):
        out.extend(repr(row) for row in conn.execute(f"SELECT * FROM {table}"))
    conn.close()
    return "\n".join(out)


def files_dump(directory: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(directory.rglob("*")) if p.is_file())


# --- the trajectory -----------------------------------------------------------------------


def test_trajectory_is_append_only_and_skips_a_torn_final_line(tmp_path: Path) -> None:
    w = TrajectoryWriter(tmp_path)
    assert w.append("s/1", "projection", {"text": "one"}) == "1"
    assert w.append("s/1", "projection", {"text": "two"}) == "2"
    path = w.path_for("s/1")
    intact = path.read_bytes()
    # A crash mid-write: half a line, no newline.
    path.write_bytes(intact + b'{"ref":"3","kind":"projection","te')
    read = read_trajectory(path)
    assert [e.data["text"] for e in read.entries] == ["one", "two"]
    assert (read.skipped, read.torn_tail) == (1, True)
    # A new writer (after restart) never merges into the fragment and never rewrites lines.
    w2 = TrajectoryWriter(tmp_path)
    assert w2.append("s/1", "projection", {"text": "three"}) == "3"
    data = path.read_bytes()
    assert data.startswith(intact + b'{"ref":"3","kind":"projection","te\n')
    read = read_trajectory(path)
    assert [(e.ref, e.data["text"]) for e in read.entries] == [("1", "one"), ("2", "two"), ("3", "three")]
    assert (read.skipped, read.torn_tail) == (1, False)
    assert path.name == "s_2f1.jsonl"
    w.close()
    w2.close()


def test_trajectory_keeps_a_bounded_number_of_files_open(tmp_path: Path) -> None:
    w = TrajectoryWriter(tmp_path)
    w.MAX_OPEN = 2
    for round_ in range(2):
        for s in ("a", "b", "c", "d"):
            w.append(s, "note", {"n": round_})
    assert sum(f.handle is not None for f in w._files.values()) <= 2
    w.close()
    for s in ("a", "b", "c", "d"):
        assert [(e.ref, e.data["n"]) for e in w.read(s).entries] == [("1", 0), ("2", 1)]


# --- redaction ----------------------------------------------------------------------------


def test_default_redaction_rules() -> None:
    r = Redactor.from_patterns()
    text = (
        "Authorization: Bearer eyJhbGciOi.payload.sig mail ops@example.com "
        "key sk-ant-api03-abcdefghijklmnop1234 cfg api_key=hunter2secret aws AKIAABCDEFGHIJKLMNOP"
    )
    assert r.redact(text) == (
        "Authorization: [REDACTED:bearer] mail [REDACTED:email] key [REDACTED:api_key] "
        "cfg api_key=[REDACTED:api_key] aws [REDACTED:api_key]"
    )
    assert Redactor.from_patterns(["ticket-\\d+"]).redact("see ticket-42") == "see [REDACTED:custom]"
    assert Redactor.from_patterns(defaults=False).redact("ops@example.com") == "ops@example.com"
    with pytest.raises(ValueError, match="redaction rule 'custom': invalid regular expression"):
        Redactor.from_patterns(["("])


def test_bound_bytes_cuts_on_a_character_boundary() -> None:
    text = "é" * 100  # 200 bytes
    out = bound_bytes(text, 64)
    assert len(out.encode()) <= 64
    assert out.endswith("[... truncated at 64 bytes]")
    assert bound_bytes("short", 64) == "short"


# --- the store ----------------------------------------------------------------------------


def row(session: str, turn: int, call: int, created: float, prefix: str | None = "p" * 64) -> SnapshotRow:
    return SnapshotRow(
        session,
        turn,
        call,
        created,
        "native",
        0,
        prefix,
        "[]",
        None,
        "[]",
        None,
        0,
        0,
        0,
        "[]",
        "[]",
        None,
    )


def test_retention_by_days_and_by_count(tmp_path: Path) -> None:
    store = SQLiteSnapshotStore(tmp_path / "t.sqlite3", retention_days=1, retention_count=3)
    now = time.time()
    store.register_prefix("p" * 64, "prefix text", "[]")
    store.register_prefix("q" * 64, "orphan prefix", "[]")
    store.put(row("old", 0, 0, now - 2 * 86_400))
    for i in range(5):
        store.put(row("new", i, 0, now - 10 + i))
    assert store.prune(now) == 3  # 1 too old, then 2 beyond the newest 3
    assert [s.key for s in store.list()] == [("new", 2, 0), ("new", 3, 0), ("new", 4, 0)]
    assert store.prefix_text("p" * 64) == "prefix text"
    assert store.prefix_text("q" * 64) is None  # no snapshot references it any more
    store.close()


def test_batched_rows_are_written_on_flush(tmp_path: Path) -> None:
    store = SQLiteSnapshotStore(tmp_path / "t.sqlite3", batch_size=10)
    for i in range(3):
        store.put(row("b", 0, i, time.time()))
    other = SQLiteSnapshotStore(tmp_path / "t.sqlite3")
    assert other.count() == 0
    store.flush()
    assert other.count() == 3
    store.close()
    other.close()


def test_prefix_text_is_stored_once_per_hash(tmp_path: Path, host, backend) -> None:
    agent, _model, _saver, mw = make_agent(
        host, policy=lambda _m: AIMessage("ok"), tools=[], backend=backend, stable_prefix=True
    )
    for n in range(3):
        agent.invoke({"messages": [HumanMessage(f"p:{n}")]}, cfg("p1"))
        agent.invoke({"messages": [HumanMessage(f"p:{n}")]}, cfg("p2"))
    dump = db_dump(backend.snapshots.path)
    assert dump.count("PREFIX-IDENTITY") == 1
    snaps = backend.snapshots.list()
    assert len(snaps) == 6 and {s.prefix_sha256 for s in snaps} == {mw.stable_prefix.sha256}
    # One stable_prefix trajectory entry per session, referenced by every snapshot of it.
    for session in ("p1", "p2"):
        kinds = [e.kind for e in backend.trajectory.read(session).entries]
        assert kinds.count("stable_prefix") == 1 and kinds.count("projection") == 3


def test_projected_sections_are_stored_by_label_chars_hash_and_ids(host, backend) -> None:
    agent, model, _saver, _mw = make_agent(
        host, policy=lambda _m: AIMessage("ok"), tools=[], backend=backend
    )
    agent.invoke({"messages": [HumanMessage("h:q")]}, cfg("h"))
    [snap] = backend.snapshots.list("h")
    text = model.calls[0][-1].content
    assert snap.projection_sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert [(s.label, s.ids) for s in snap.sections] == [
        ("working", ("ws-1", "ws-2")),
        ("memory", ("mem-0",)),
        ("digest", ("digest-1",)),
    ]
    assert all(s.sha256 is not None and len(s.sha256) == 64 for s in snap.sections)
    assert all(s.chars > 0 for s in snap.sections)
    # The snapshot (and the injection log beside it) holds no text: the projection lives in
    # the trajectory only.
    assert MARK not in db_dump(backend.path)
    assert MARK in files_dump(backend.trajectory.directory)


# --- full text and incognito --------------------------------------------------------------


def full_text_capture(
    tmp_path: Path, sections: MarkerSections, limit: int = 4096
) -> tuple[PluginHost, SQLiteBackend]:
    """A host and backend with ``context.capture_full_text`` on, bounded at ``limit`` bytes;
    the trajectory goes to ``tmp_path / "ft-traj"``."""
    config = structure(
        {
            "context": {"context_window": 200_000, "capture_full_text": True},
            "observability": {"full_text_max_bytes": limit, "trajectory_dir": str(tmp_path / "ft-traj")},
        }
    )
    host = plugin_host_with([sections, InjectionLog()], config)
    return host, SQLiteBackend(tmp_path / "ft.sqlite3", config=config)


def test_full_text_capture_is_redacted_and_bounded(tmp_path: Path, sections) -> None:
    host, backend = full_text_capture(tmp_path, sections, limit=400)
    agent, _model, _saver, _mw = make_agent(
        host, policy=lambda _m: AIMessage("ok"), tools=[], backend=backend, stable_prefix=True
    )
    agent.invoke(
        {"messages": [HumanMessage("ft:mail me at ops@example.com with token Bearer abc.def.ghi")]}, cfg("ft")
    )
    [snap] = backend.snapshots.list("ft")
    assert snap.full_text is not None
    assert snap.full_text.startswith("[system]\nYou are the test agent.")
    assert "ops@example.com" not in snap.full_text and "[REDACTED:email]" in snap.full_text
    assert "abc.def.ghi" not in snap.full_text and "[REDACTED:bearer]" in snap.full_text
    assert len(snap.full_text.encode()) <= 400 and snap.full_text.endswith("[... truncated at 400 bytes]")
    backend.close()


def test_incognito_turn_leaves_no_text_behind(tmp_path: Path, sections) -> None:
    host, backend = full_text_capture(tmp_path, sections)
    agent, model, _saver, _mw = make_agent(host, backend=backend, stable_prefix=True, incognito=True)
    agent.invoke({"messages": [HumanMessage("inc:a very private question")]}, cfg("inc"))
    assert len(model.calls) == 2
    snaps = backend.snapshots.list("inc")
    assert [s.key for s in snaps] == [("inc", 0, 0), ("inc", 0, 1)]
    assert all(s.incognito and s.full_text is None and s.projection_sha256 is None for s in snaps)
    assert all(s.sha256 is None for s in snaps[0].sections)
    assert snaps[0].delivered_ids == {"working": ("ws-1", "ws-2")}
    assert backend.injections.rows() == []
    stored = db_dump(backend.path) + files_dump(tmp_path / "ft-traj")
    for secret in ("private question", MARK, MEMTEXT, "PREFIX-IDENTITY", "looked up"):
        assert secret not in stored
    backend.close()


# --- the inspector ------------------------------------------------------------------------


def test_cli_list_and_show(tmp_path: Path, host, backend) -> None:
    agent, model, _saver, _mw = make_agent(host, backend=backend, stable_prefix=True)
    agent.invoke({"messages": [HumanMessage("cli:what now")]}, cfg("cli"))
    backend.flush()
    db, traj = str(backend.snapshots.path), str(backend.trajectory.directory)
    runner = CliRunner()

    listed = runner.invoke(snapshots, ["list", "--session", "cli", "--db", db])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].split() == [
        "session",
        "turn",
        "call",
        "at",
        "mode",
        "prefix",
        "sections",
        "projected",
        "history",
        "stripped",
        "cacheable",
        "prefix",
    ]
    assert [ln.split()[:3] for ln in lines[2:]] == [["cli", "0", "0"], ["cli", "0", "1"]]

    shown = runner.invoke(snapshots, ["show", "cli", "0", "1", "--db", db, "--trajectories", traj])
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert out.startswith("snapshot cli turn 0 call 1")
    assert "-- identity (" in out and "You are the test agent. PREFIX-IDENTITY" in out
    assert "== session history  3 messages" in out
    assert "ws-1, ws-2" in out and "mem-0" in out
    assert model.calls[1][-1].content in out  # the projection text, from the trajectory

    as_json = runner.invoke(snapshots, ["show", "cli", "0", "--db", db, "--json"])
    assert json.loads(as_json.output)["call_index"] == 0

    missing = runner.invoke(snapshots, ["show", "cli", "0", "7", "--db", db])
    assert missing.exit_code == 2
    assert missing.output == "error: no snapshot for session 'cli' turn 0 call 7; calls recorded for that turn: 0, 1\n"
    nodb = runner.invoke(snapshots, ["list", "--db", str(tmp_path / "none.sqlite3")])
    assert nodb.exit_code == 2 and nodb.output.startswith(f"error: {tmp_path / 'none.sqlite3'}: no store here (no such file), and nothing was created")
    assert not (tmp_path / "none.sqlite3").exists()
    # The same group is reachable from the contextplane command.
    from contextplane.cli import main

    via_main = runner.invoke(main, ["snapshots", "list", "--session", "cli", "--db", db])
    assert via_main.exit_code == 0 and via_main.output == listed.output


def test_retention_never_leaves_a_snapshot_pointing_at_a_removed_prefix_text(tmp_path: Path) -> None:
    # The reported case: prefixes A, B, A under retention; A's text was pruned while B's rows
    # were the newest, and the rows written for A afterwards referenced text that was gone.
    from contextplane.authority import StablePrefix
    from contextplane.observability.snapshots import PromptRecorder

    db = tmp_path / "t.sqlite3"
    store = SQLiteSnapshotStore(db, retention_days=0, retention_count=100, prune_every=10)
    recorder = PromptRecorder(store)
    a, b = StablePrefix("prefix A " * 40, ()), StablePrefix("prefix B " * 40, ())
    n = 0
    for prefix in (a, b, a):
        for _ in range(400):
            ref = recorder.register_prefix(prefix, session_id="s")
            recorder.capture(session_id="s", turn_index=n, call_index=0, prefix=ref, turn=None)
            n += 1
    store.close()
    conn = apsw.Connection(str(db))
    kept, orphaned = conn.execute(
        "SELECT count(*), sum(t.text IS NULL) FROM prompt_snapshots AS s "
        "LEFT JOIN prefix_texts AS t ON t.sha256 = s.prefix_sha256"
    ).fetchone()
    texts = dict(conn.execute("SELECT sha256, text FROM prefix_texts"))
    conn.close()
    assert kept == 100 and orphaned == 0
    assert texts == {a.sha256: a.text}  # B's text went with its last row; A's came back
