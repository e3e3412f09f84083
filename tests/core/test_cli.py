"""The command line: preview shows the prefix and the budget table; errors are one clean line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from contextplane.cli import main


def config_in(tmp_path: Path) -> Path:
    (tmp_path / "SOUL.md").write_text("I am the preview agent.")
    cfg = tmp_path / "contextplane.toml"
    cfg.write_text(
        '[prompt]\nsoul_path = "SOUL.md"\n[store]\npath = "m.sqlite3"\n[context]\ncontext_window = 100000\n'
    )
    return cfg


def test_preview_text(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        main, ["preview", "deploy", "--config", str(config_in(tmp_path)), "--tool", "deploy"]
    )
    assert res.exit_code == 0, res.output
    assert "== stable prefix ==" in res.output and "identity" in res.output and "tool_guidance" in res.output
    assert "== budget ==" in res.output
    assert "total" in res.output and "budget 32000" in res.output  # 8% of 100k tokens, in chars


def test_preview_json_and_modes(tmp_path: Path) -> None:
    cfg = str(config_in(tmp_path))
    res = CliRunner().invoke(
        main, ["preview", "deploy", "--config", cfg, "--json", "--incognito", "--budget-tokens", "0"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["stable_prefix"]["sections"][0]["name"] == "identity"
    proj = data["projected_context"]
    assert proj["budget_chars"] is None and proj["incognito"] is True and proj["injection"] is None
    suppressed = {s["name"]: s["suppressed"] for s in proj["sections"]}
    assert suppressed["always_on"] == suppressed["retrieved"] == suppressed["prior_sessions"] == "incognito"
    assert suppressed["working_state"] is None


def test_config_error_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "c.toml"
    bad.write_text("[context]\nbudget_pct = 'eight'\n")
    res = CliRunner().invoke(main, ["preview", "x", "--config", str(bad)])
    assert res.exit_code == 2
    assert (
        res.output.strip()
        == f'error: invalid value for context.budget_pct: expected a number from 0 to 100, got "eight" (in {bad})'
    )


def test_plugins_json_lists_the_standard_sections() -> None:
    res = CliRunner().invoke(main, ["plugins"])
    assert res.exit_code == 0
    names = {p["name"]: p for p in json.loads(res.output)}
    assert names["retrieved"]["context_sections"] == ["retrieved"]
    assert names["identity"]["prompt_sections"] == ["identity"]
    assert names["injection_log"]["hooks"] == ["observe_projection"]
