"""Plugin loading through real, built and installed distributions (no monkeypatched metadata).

The distributions in tests/dists are built by pip and installed with ``--target`` into a
temporary site directory; a subprocess with that directory on ``PYTHONPATH`` discovers them
through ``importlib.metadata`` exactly as a runtime would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contextplane.store import SQLiteKnowledgeStore

DISTS = Path(__file__).resolve().parent.parent / "dists"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    for dist in ("cp_good_plugin", "cp_broken_plugin"):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "--target",
                str(target),
                str(DISTS / dist),
            ],
            check=True,
            capture_output=True,
        )
    return target


def run(site: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTPLANE_")}
    environ["PYTHONPATH"] = str(site)
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=environ, cwd=site
    )


LIST = """
import json
from contextplane import PluginHost
host = PluginHost.from_entry_points()
print(json.dumps({i.name: {"dist": i.distribution, "version": i.version, "errors": list(i.errors),
                  "loaded": i.loaded, "prompt": list(i.prompt_sections), "context": list(i.context_sections),
                  "hooks": list(i.hooks), "builtin": i.builtin}
                  for i in host.plugin_infos()}))
"""


def test_discovery_and_isolation_of_broken_plugins(site: Path) -> None:
    out = run(site, LIST)
    assert out.returncode == 0, out.stderr
    infos = json.loads(out.stdout)
    good = infos["good"]
    assert good["dist"] == "cp-good-plugin" and good["version"] == "1.2.3"
    assert good["prompt"] == ["house_rules"] and good["context"] == ["open_tickets"]
    assert good["hooks"] == ["register_context_sections", "register_prompt_sections"]
    assert good["errors"] == []
    broken = infos["broken_import"]
    assert broken["loaded"] is False and broken["dist"] == "cp-broken-plugin"
    assert broken["errors"] == ["import: ModuleNotFoundError: No module named 'cp_no_such_dependency'"]
    sig = infos["bad_signature"]
    assert sig["loaded"] is False
    assert len(sig["errors"]) == 1 and sig["errors"][0].startswith("validation: PluginValidationError")
    assert "tenant_id" in sig["errors"][0]


def test_strict_mode_turns_the_first_failure_into_an_error(site: Path) -> None:
    out = run(site, "from contextplane import PluginHost\nPluginHost.from_entry_points(strict=True)")
    assert out.returncode != 0
    assert (
        "PluginLoadError: plugin 'bad_signature' (distribution cp-broken-plugin) failed during validation"
        in out.stderr
    )
    assert "strict mode: fix or disable the plugin" in out.stderr


def test_ordering_by_before_after_from_an_installed_plugin(site: Path) -> None:
    # The standard sections come from this repo's own entry points, the third-party section
    # from the installed cp-good-plugin; nothing is registered by hand.
    code = """
    from contextplane import PluginHost
    from contextplane.authority import resolve_order
    host = PluginHost.from_entry_points()
    print(",".join(r.section.name for r in resolve_order(host.prompt_sections())))
    """
    out = run(site, code)
    assert out.returncode == 0, out.stderr
    # house_rules says after=identity, before=tool_guidance; by the documented tie-break a
    # plugin section ranks below ready standard sections, so it lands as late as allowed.
    assert out.stdout.strip() == (
        "identity,operating_model,delegation_roster,house_rules,tool_guidance,operator_guidelines"
    )


def test_contextplane_plugins_env_selects_and_disables(site: Path) -> None:
    only_good = json.loads(run(site, LIST, CONTEXTPLANE_PLUGINS="good").stdout)
    # Loaded, but alone its section's after='identity' names nothing: `plugins` says so.
    assert only_good["good"]["loaded"]
    assert only_good["good"]["errors"] == [
        "prompt order: plugin 'good': prompt section 'house_rules' declares after='identity', but no "
        "section of that name is registered; plugin 'good': prompt section 'house_rules' declares "
        "before='tool_guidance', but no section of that name is registered (known sections: house_rules); "
        "its prompt sections are left out of the stable prefix; the plugin author must fix the "
        "constraint, or enable the plugin that provides the section"
    ]
    assert only_good["broken_import"] == {**only_good["broken_import"], "loaded": False, "errors": []}
    none = json.loads(run(site, LIST, CONTEXTPLANE_PLUGINS="").stdout)
    # Entry-point selection never turns off the record pipeline, which is core, not a plugin.
    builtin = {name for name, info in none.items() if info["builtin"]}
    assert builtin == {"contextplane.records"} and none["contextplane.records"]["loaded"]
    assert all(not info["loaded"] for name, info in none.items() if name not in builtin)
    assert all(info["hooks"] == [] for name, info in none.items() if name not in builtin)


def test_cli_plugins_prints_json(site: Path) -> None:
    out = run(site, "from contextplane.cli import main; main(['plugins'])")
    assert out.returncode == 0, out.stderr
    infos = {i["name"]: i for i in json.loads(out.stdout)}
    assert set(infos) >= {"good", "broken_import", "bad_signature"}
    assert set(infos["good"]) == {
        "name",
        "distribution",
        "version",
        "hooks",
        "prompt_sections",
        "context_sections",
        "errors",
        "loaded",
        "builtin",
    }
    assert infos["good"]["builtin"] is False and infos["contextplane.records"]["builtin"] is True


def test_cli_preview_reports_a_missing_constraint_target_without_a_traceback(site: Path) -> None:
    out = run(
        site,
        # preview reads a store (issue 23: it never composes against a path with none)
        "from contextplane.store import SQLiteKnowledgeStore; SQLiteKnowledgeStore('m.sqlite3').close()\n"
        "from contextplane.cli import main; main(['preview', 'hello', '--db', 'm.sqlite3'])",
        CONTEXTPLANE_PLUGINS="good",
    )
    # Outside strict mode the plugin's section is left out and preview says why, once.
    assert out.returncode == 0, out.stderr
    assert (
        "! plugin 'good' (distribution cp-good-plugin) failed during prompt order: plugin 'good': prompt "
        "section 'house_rules' declares after='identity', but no section of that name is registered; "
        "plugin 'good': prompt section 'house_rules' declares before='tool_guidance'"
    ) in out.stdout
    assert out.stdout.count("failed during prompt order") == 1
    strict = run(
        site,
        "from contextplane.cli import main; main(['preview', 'hello', '--db', 'm.sqlite3'])",
        CONTEXTPLANE_PLUGINS="good",
        CONTEXTPLANE_PLUGINS__STRICT="true",
    )
    assert strict.returncode == 2
    assert strict.stderr.startswith(
        "error: plugin 'good': prompt section 'house_rules' declares after='identity', but no section of that "
        "name is registered; plugin 'good': prompt section 'house_rules' declares before='tool_guidance'"
    )
    assert "Traceback" not in out.stderr + strict.stderr


def test_cli_preview_shows_the_installed_plugin_beside_the_standard_sections(
    site: Path, tmp_path: Path
) -> None:
    (tmp_path / "SOUL.md").write_text("I am the test agent.")
    (tmp_path / "contextplane.toml").write_text(
        'prompt = { soul_path = "SOUL.md" }\nstore = { path = "memory.sqlite3" }\n'
    )
    SQLiteKnowledgeStore(tmp_path / "memory.sqlite3").close()  # preview reads a store; it never makes one
    code = "from contextplane.cli import main; main(['preview', 'hello', '--budget-tokens', '0', '--tool', 'deploy'])"
    out = run(site, code, CONTEXTPLANE_CONFIG=str(tmp_path / "contextplane.toml"))
    assert out.returncode == 0, out.stderr
    table_lines = out.stdout.split("== projected context ==")[0].split("\n\n")[0]
    names = [line.split()[0] for line in table_lines.splitlines()[3:] if line.strip()]
    assert names == ["identity", "operating_model", "house_rules", "tool_guidance"]
    assert "\n-- identity\nI am the test agent.\n" in out.stdout  # the text of each section
    assert "<open_tickets>\n- T-1 printer on fire\n- T-2 coffee empty\n</open_tickets>" in out.stdout
    assert "open_tickets    good" in out.stdout
    assert "! plugin 'broken_import' (distribution cp-broken-plugin) failed during import" in out.stdout
