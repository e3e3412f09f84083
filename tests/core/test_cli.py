"""The command line: preview shows the prefix and the budget table; errors are one clean line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from contextplane.cli import main
from contextplane.store import SQLiteKnowledgeStore


def config_in(tmp_path: Path) -> Path:
    (tmp_path / "SOUL.md").write_text("I am the preview agent.")
    cfg = tmp_path / "contextplane.toml"
    cfg.write_text(
        '[prompt]\nsoul_path = "SOUL.md"\n[store]\npath = "m.sqlite3"\n[context]\ncontext_window = 100000\n'
    )
    SQLiteKnowledgeStore(tmp_path / "m.sqlite3").close()  # preview reads a store; it never makes one
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
    # The injection log is written by the built-in records observer, not by a section plugin.
    assert "injection_log" not in names
    assert names["contextplane.records"]["builtin"] is True
    assert "observe_projection" in names["contextplane.records"]["hooks"]


def test_preview_json_leaves_out_the_request(tmp_path: Path) -> None:
    # ProjectedContext.request holds the store and the config: it is not output.
    res = CliRunner().invoke(main, ["preview", "deploy", "--config", str(config_in(tmp_path)), "--json"])
    assert res.exit_code == 0, res.output
    proj = json.loads(res.stdout)["projected_context"]
    assert "request" not in proj and proj["surface"] == "native"


def test_a_malformed_skill_is_one_warning_line_on_stderr(tmp_path: Path) -> None:
    cfg = config_in(tmp_path)
    cfg.write_text(cfg.read_text() + '[skills]\ndir = "skills"\n')
    (tmp_path / "skills" / "broken").mkdir(parents=True)
    (tmp_path / "skills" / "broken" / "SKILL.md").write_text("# no front matter\n")
    res = CliRunner().invoke(main, ["preview", "deploy", "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines == [
        f"warning: skipping skill {tmp_path / 'skills' / 'broken' / 'SKILL.md'}: it has no YAML front "
        "matter between '---' lines"
    ], res.stderr
    assert "warnings.warn" not in res.stderr and "UserWarning" not in res.stderr and ".py:" not in res.stderr


def test_a_failing_plugin_is_one_warning_line_without_traceback(tmp_path: Path, monkeypatch) -> None:
    import attrs

    import contextplane_sections.working_state as working_state

    def broken(_request):
        raise RuntimeError("the state service is down")

    monkeypatch.setattr(working_state, "SECTION", attrs.evolve(working_state.SECTION, draft=broken))
    res = CliRunner().invoke(main, ["preview", "deploy", "--config", str(config_in(tmp_path))])
    assert res.exit_code == 0, res.output
    warned = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    assert warned == [
        "warning: context section 'working_state' of plugin 'working_state' failed, so it is left out of "
        "this projection: RuntimeError: the state service is down"
    ], res.stderr
    assert "Traceback" not in res.stderr and 'File "' not in res.stderr
    assert len(res.stderr.splitlines()) == 1


def test_notice_handlers_are_put_back_after_the_command(tmp_path: Path) -> None:
    import logging
    import warnings

    before = (warnings.showwarning, list(logging.getLogger("contextplane").handlers))
    CliRunner().invoke(main, ["preview", "deploy", "--config", str(config_in(tmp_path))])
    assert (warnings.showwarning, list(logging.getLogger("contextplane").handlers)) == before


def test_commands_plug_in_through_an_entry_point() -> None:
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0 and "demo" in res.output
    from contextplane.cli import _plugged_commands

    assert "demo" in _plugged_commands() and "demo" not in main.commands  # the core does not name it
