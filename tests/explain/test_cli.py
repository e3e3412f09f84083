"""``contextplane explain`` and ``contextplane replay``: JSON for tools, exit codes, usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from contextplane.cli import main
from contextplane_demo.session import run_demo


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("demo")
    run_demo(root, echo=lambda _line: None)
    return str(root / "memory.sqlite3")


def test_explain_json_is_one_verdict_with_its_evidence(demo_db: str) -> None:
    result = CliRunner().invoke(
        main, ["explain", "11", "--session", "demo-session-7", "--turn", "1", "--db", demo_db, "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["memory_id"], data["verdict"], data["reason"]) == ("11", "filtered", "rejected")
    assert data["turn"]["basis"] == "recorded" and data["turn"]["history_position"]["seq"] > 0
    assert data["evidence"]["event"] == "review"


def test_replay_json_and_exit_code(demo_db: str) -> None:
    same = CliRunner().invoke(
        main, ["replay", "--session", "demo-session-7", "--turn", "2", "--db", demo_db, "--json"]
    )
    assert same.exit_code == 0, same.output
    report = json.loads(same.stdout)
    assert report["identical"] and report["mode"] == "as_of"
    assert {s["status"] for s in report["sections"]} == {"same"}
    assert report["recorded_sha256"] == report["replayed_sha256"]
    now = CliRunner().invoke(
        main, ["replay", "--session", "demo-session-7", "--turn", "2", "--now", "--db", demo_db]
    )
    assert now.exit_code == 1 and "DIFFERS from what was delivered" in now.stdout
    assert "note: configuration: context.project 'website' then, None now" in now.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["explain", "1"], "give either --session S --turn N (a recorded turn) or --query Q"),
        (["explain", "1", "--turn", "1", "--query", "x"], "give either --session S --turn N"),
        (["explain", "1", "--turn", "1"], "--turn needs --session"),
    ],
)
def test_explain_usage_errors(args: list[str], message: str, demo_db: str) -> None:
    result = CliRunner().invoke(main, [*args, "--db", demo_db])
    assert result.exit_code == 2 and message in result.output


def test_a_turn_without_inputs_is_a_clean_error(demo_db: str) -> None:
    # Turn 3 is incognito: the demo's model call recorded its (reference-only) snapshot, which
    # says so; turn 9 was never composed.
    result = CliRunner().invoke(
        main, ["replay", "--session", "demo-session-7", "--turn", "3", "--db", demo_db]
    )
    assert result.exit_code == 2
    assert result.stderr == (
        "error: session 'demo-session-7' turn 3 was incognito: nothing of its inputs was recorded, "
        "and no memory section was composed for it\n"
    )
    result = CliRunner().invoke(
        main, ["replay", "--session", "demo-session-7", "--turn", "9", "--db", demo_db]
    )
    assert result.exit_code == 2
    assert (
        "error: session 'demo-session-7' turn 9 has no recorded inputs (incognito, which records nothing"
        in (result.stderr)
    )
    assert "recorded turns of this session: 1, 2, 4, 5, 6" in result.stderr


def test_explain_an_unknown_memory(demo_db: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["explain", "999", "--query", "deploy", "--db", demo_db])
    assert result.exit_code == 2 and "no memory with id '999'" in result.stderr
