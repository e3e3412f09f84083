"""``contextplane demo``: the main job runs end to end and its checks are real."""

from __future__ import annotations

import warnings
from pathlib import Path

from click.testing import CliRunner

from contextplane.cli import main
from contextplane_demo import TURNS, run_demo


def test_demo_passes_its_checks(tmp_path: Path) -> None:
    lines: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_demo(tmp_path / "demo", echo=lines.append)
    assert [name for name, ok, _ in result.checks if not ok] == []
    assert len(result.checks) == 7
    assert len(result.projections) == len(TURNS)
    out = "\n".join(lines)
    assert out.count("== turn ") == len(TURNS)
    small = next(p for t, p in result.projections if t.context_window < 50_000)
    assert [s.section for s in small.overflow][:2] == ["retrieved", "prior_sessions"]
    inc = next(p for t, p in result.projections if t.incognito)
    assert inc.injection is None and "<injected_memory>" not in inc.text


def test_demo_checks_can_fail(tmp_path: Path, monkeypatch) -> None:
    # Break the deliverable filter of the store: the demo must notice the leak.
    from contextplane.store.sqlite import SQLiteKnowledgeStore

    original = SQLiteKnowledgeStore.search

    def leaky(self, query, k=10, **kw):
        kw["deliverable"] = False
        return original(self, query, k, **kw)

    monkeypatch.setattr(SQLiteKnowledgeStore, "search", leaky)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_demo(tmp_path / "demo", echo=lambda _line: None)
    failed = [name for name, ok, _ in result.checks if not ok]
    assert failed == ["non-deliverable rows never delivered"]
    assert not result.ok


def test_cli_demo_exit_code(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(main, ["demo", "--dir", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    assert "[ok] projected context within budget on every turn" in res.output
    inj = runner.invoke(
        main, ["injections", "--db", str(tmp_path / "d" / "memory.sqlite3"), "--session", "demo-session-7"]
    )
    assert inj.exit_code == 0
    assert len([line for line in inj.output.splitlines() if line.startswith("demo-session-7")]) == 5
    missing = runner.invoke(main, ["injections", "--db", str(tmp_path / "nope.sqlite3")])
    assert missing.exit_code == 2 and missing.output.startswith(f"error: {tmp_path / 'nope.sqlite3'}: no store here (no such file), and nothing was created")
    assert not (tmp_path / "nope.sqlite3").exists()
