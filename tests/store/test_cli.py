"""``contextplane memory ...`` and ``contextplane migrate``: tables, --json, errors, dry run, progress."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from contextplane.store import cli
from tests.store.helpers import make_v1_store


@pytest.fixture
def root() -> click.Group:
    @click.group()
    def main() -> None:
        pass

    cli.register(main)
    return main


def _run(root: click.Group, *args: str) -> str:
    result = CliRunner().invoke(root, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_memory_lifecycle_through_the_cli(root: click.Group, tmp_path: Path) -> None:
    db = str(tmp_path / "cli.sqlite3")
    assert _run(root, "memory", "add", "use metric units", "--db", db) == "added 1\n"
    added = json.loads(
        _run(
            root,
            "memory",
            "add",
            "agent thinks X",
            "--source-type",
            "extracted",
            "--kind",
            "fact",
            "--namespace",
            "project:a",
            "--expires-in-days",
            "30",
            "--db",
            db,
            "--json",
        )
    )
    assert (added["memory_kind"], added["review_state"], added["trust_tier"]) == ("fact", "pending", 2)
    assert added["expires_at"].endswith("Z")

    table = _run(root, "memory", "list", "--db", db)
    assert table.splitlines()[0].split() == [
        "id",
        "kind",
        "policy",
        "review",
        "tier",
        "scope",
        "status",
        "content",
    ]
    assert "3:operator" in table and "project:a" in table

    assert _run(root, "memory", "confirm", "2", "--db", db) == "2: confirmed\n"
    assert _run(root, "memory", "reject", "1", "--db", db) == "1: rejected\n"
    assert json.loads(_run(root, "memory", "show", "1", "--db", db, "--json"))["review_state"] == "rejected"
    assert "review_state: rejected" in _run(root, "memory", "show", "1", "--db", db)

    assert _run(root, "memory", "supersede", "2", "agent now thinks Y", "--db", db) == "2 superseded by 3\n"
    hits = json.loads(_run(root, "memory", "search", "agent thinks", "--db", db, "--json"))
    assert [h["chunk"]["id"] for h in hits] == ["3"]
    hits = json.loads(
        _run(root, "memory", "search", "agent thinks", "--include-superseded", "--db", db, "--json")
    )
    assert {h["chunk"]["id"] for h in hits} == {"2", "3"}
    assert "rank" in _run(root, "memory", "search", "agent", "--db", db)

    assert "expires 2030-01-01T00:00:00+00:00" in _run(
        root, "memory", "expire", "3", "--at", "2030-01-01T00:00:00Z", "--db", db
    )
    _run(root, "memory", "expire", "3", "--db", db)
    # the table on stdout; on stderr, the one line saying the search was full text only
    searched = CliRunner().invoke(root, ["memory", "search", "agent", "--db", db], catch_exceptions=False)
    assert searched.stdout == "no matches\n"
    assert searched.stderr.startswith("note: full-text search only: no embedder is configured")
    listed = json.loads(_run(root, "memory", "list", "--deliverable", "--db", db, "--json"))
    assert listed == []


def test_cli_errors_are_one_line(root: click.Group, tmp_path: Path) -> None:
    db = str(tmp_path / "cli.sqlite3")
    runner = CliRunner()
    result = runner.invoke(root, ["memory", "add", "x", "--namespace", "team:1", "--db", db])
    assert result.exit_code == 2 and result.output.startswith("error: namespace: 'team:1' is not a scope")
    result = runner.invoke(root, ["memory", "confirm", "99", "--db", db])
    assert result.exit_code == 2 and "no memory with id '99'" in result.output
    result = runner.invoke(root, ["memory", "add", "x", "--expires-in-days", "-2", "--db", db])
    assert result.exit_code == 2 and "error: expires_in_days: -2 is outside" in result.output
    bad = tmp_path / "bad.sqlite3"
    bad.write_text("hello")
    result = runner.invoke(root, ["memory", "list", "--db", str(bad)])
    assert result.exit_code == 2 and "not a SQLite database" in result.output
    assert "Traceback" not in result.output


def test_default_db_from_environment(
    root: click.Group, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTPLANE_DB", str(tmp_path / "env.sqlite3"))
    _run(root, "memory", "add", "from env")
    assert (tmp_path / "env.sqlite3").exists()


def test_migrate_dry_run_then_migrate_with_progress(root: click.Group, tmp_path: Path) -> None:
    db = tmp_path / "v1.sqlite3"
    rows = (
        [("x", "hot", "operator")] * 4000
        + [("x", "general", "conversation")] * 6000
        + [("x", "misc", "")] * 2000
    )
    make_v1_store(db, rows)
    dry = _run(root, "migrate", "--dry-run", "--db", str(db))
    assert "schema version 1 -> 5; 12000 rows" in dry
    lines = {line.split()[0]: line.split() for line in dry.splitlines()[2:]}
    assert lines["hot"][-1] == "4000" and lines["general/conversation"][-1] == "6000"
    assert lines["anything"][-1] == "2000" and lines["preferences"][-1] == "0"
    data = json.loads(_run(root, "migrate", "--dry-run", "--db", str(db), "--json"))
    assert data["review_states"] == {"confirmed": 4000, "pending": 8000}
    out = _run(root, "migrate", "--db", str(db), "--batch-rows", "1000")
    assert "backfilling" in out  # the progress bar (>= PROGRESS_MIN_ROWS rows)
    assert "migrated from schema version 1 to 5" in out
    assert "already at schema version 5" in _run(root, "migrate", "--db", str(db))
    assert len(rows) >= cli.PROGRESS_MIN_ROWS


def test_migrate_refuses_newer_schema(root: click.Group, tmp_path: Path) -> None:
    import apsw

    db = tmp_path / "new.sqlite3"
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA user_version = 6")
    conn.close()
    result = CliRunner().invoke(root, ["migrate", "--db", str(db)])
    assert result.exit_code == 2
    assert result.output == (
        f"error: {db}: the store was written by schema version 6, but this contextplane understands "
        "schema version 5 at most; upgrade contextplane to open it\n"
    )


def test_memory_list_shows_the_real_lifecycle_state(root: click.Group, tmp_path: Path) -> None:
    db = str(tmp_path / "states.sqlite3")
    _run(root, "memory", "add", "an operator fact", "--db", db)  # 1: active (operator, confirmed)
    _run(root, "memory", "add", "an agent note", "--source-type", "extracted", "--db", db)  # 2: pending
    _run(root, "memory", "add", "a wrong agent note", "--source-type", "extracted", "--db", db)  # 3
    _run(root, "memory", "reject", "3", "--db", db)
    _run(root, "memory", "add", "an old fact", "--db", db)  # 4, superseded by 6
    _run(root, "memory", "add", "a stale fact", "--db", db)  # 5
    _run(root, "memory", "expire", "5", "--at", "2020-01-01T00:00:00Z", "--db", db)
    _run(root, "memory", "supersede", "4", "a new fact", "--db", db)
    rows = [line.split()[:7] for line in _run(root, "memory", "list", "--db", db).splitlines()[2:]]
    assert {r[0]: r[6] for r in rows} == {
        "1": "active",
        "2": "pending",
        "3": "rejected",
        "4": "superseded→6",
        "5": "expired",
        "6": "active",
    }
    listed = json.loads(_run(root, "memory", "show", "3", "--db", db, "--json"))
    assert listed["lifecycle_state"] == "rejected"


def test_memory_show_prints_the_history(root: click.Group, tmp_path: Path) -> None:
    import getpass

    db = str(tmp_path / "history.sqlite3")
    _run(root, "memory", "add", "an agent note", "--source-type", "extracted", "--db", db)
    _run(root, "memory", "confirm", "1", "--db", db)
    _run(root, "memory", "expire", "1", "--in-days", "3", "--db", db)
    _run(root, "memory", "supersede", "1", "a better agent note", "--source-type", "extracted", "--db", db)
    out = _run(root, "memory", "show", "1", "--db", db)
    history = out.split("history:\n", 1)[1].splitlines()
    who = f"(by cli:{getpass.getuser()})"
    events = [line.strip().split(" ", 2)[2] for line in history]  # "#seq time what (by who)"
    assert events == [
        "created (by extracted)",
        f"review state set to confirmed {who}",
        events[2],
        "superseded by 2 (by extracted)",
    ]
    assert events[2].startswith("expiry set to ") and events[2].endswith(who)
    data = json.loads(_run(root, "memory", "show", "1", "--db", db, "--json"))
    assert [e["event"] for e in data["history"]] == ["created", "review", "expiry", "superseded"]
    assert data["history"][1]["actor"] == f"cli:{getpass.getuser()}"


def test_memory_add_reports_each_consolidation_outcome(root: click.Group, tmp_path: Path) -> None:
    db = str(tmp_path / "consolidate.sqlite3")
    assert (
        _run(root, "memory", "add", "Deploy window is Tuesday", "--subject", "deploys", "--db", db)
        == "added 1\n"
    )
    assert _run(root, "memory", "add", "Deploy  window is Tuesday ", "--subject", "deploys", "--db", db) == (
        "not added: not stored: an exact duplicate of memory 1, which is returned\n"
    )
    assert _run(root, "memory", "add", "Deploy window is Thursday", "--subject", "deploys", "--db", db) == (
        "added 2: it supersedes memory 1 (same subject, scope and kind)\n"
    )
    near = json.loads(_run(root, "memory", "add", "deploy window is thursday!", "--db", db, "--json"))
    assert near["write"]["outcome"] == "near_duplicate"
    assert near["write"]["near_duplicates"] == [{"id": "2", "similarity": 1.0}]
    assert "similar to 2 (1.00): recorded for review" in _run(root, "memory", "show", "3", "--db", db)
