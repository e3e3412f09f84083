"""``contextplane --help`` imports no subcommand (issue 25, item 4): the commands are listed with
the short help read from their source, and a command's module (the MCP server, Starlette,
psycopg, the store) is imported only when that command runs.

Why subprocesses for the imports: what a fresh interpreter holds in ``sys.modules`` after
``--help`` is the claim; this test process has imported everything long ago.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from contextplane.cli import main

#: What listing the commands must not import.
HEAVY = ("mcp", "starlette", "psycopg", "apsw", "cattrs", "numpy", "sqlite_vec", "jinja2", "uvicorn")

HELP_THEN_MODULES = (
    "import sys\n"
    "from contextplane.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "print('\\n'.join(sorted(sys.modules)), file=sys.stderr)\n"
)


def help_in_fresh_interpreter(
    *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    res = subprocess.run(
        [sys.executable, "-c", HELP_THEN_MODULES, *args], capture_output=True, text=True, timeout=120, env=env
    )
    return res, set(res.stderr.split())


def test_help_imports_no_subcommand_and_nothing_heavy() -> None:
    res, modules = help_in_fresh_interpreter("--help")
    assert res.returncode == 0 and "Commands:" in res.stdout
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not heavy, f"contextplane --help imported {heavy}"
    plugged = sorted(m for m in modules if m.startswith("contextplane_"))
    assert not plugged, f"contextplane --help imported the plugged commands' packages {plugged}"
    ours = {m for m in modules if m.startswith("contextplane.")}
    assert not ours & {"contextplane.store", "contextplane.plugins", "contextplane.projection", "contextplane.config"}


def listed_commands() -> list[str]:
    return main.list_commands(click.Context(main))


def test_every_command_is_listed_with_the_help_it_has_when_loaded() -> None:
    names = listed_commands()
    assert {"preview", "memory", "store", "explain", "demo", "console", "mcp"} <= set(names)
    ctx = click.Context(main)
    for name in names:
        shown = main.listed_command(ctx, name)
        loaded = main.get_command(ctx, name)
        assert shown is not None and loaded is not None, name
        for limit in (30, 45, 80, 200):
            assert shown.get_short_help_str(limit) == loaded.get_short_help_str(limit), (name, limit)
        assert shown.hidden == loaded.hidden, name


@pytest.mark.parametrize("name", listed_commands())
def test_every_listed_command_answers_its_own_help(name: str) -> None:
    res = CliRunner().invoke(main, [name, "--help"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"Usage: main {name}") or res.output.startswith(f"Usage: {name}"), res.output


def test_the_console_script_answers_help_for_every_command() -> None:
    script = Path(sys.executable).parent / "contextplane"
    if not script.exists():
        pytest.fail(f"no console script beside {sys.executable}: reinstall with pip install -e .")
    for name in ("memory", "mcp", "console"):
        res = subprocess.run([str(script), name, "--help"], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and f"Usage: contextplane {name}" in res.stdout, res.stderr


# --- a third party's commands -------------------------------------------------------------


def third_party(site: Path) -> dict[str, str]:
    """A distribution with three commands on ``site``: a good one whose module records that
    it was imported, one whose module raises, one that names something not a command."""
    (site / "acme_cmds").mkdir(parents=True)
    (site / "acme_cmds" / "__init__.py").write_text("")
    (site / "acme_cmds" / "good.py").write_text(
        textwrap.dedent(
            '''
            import click

            @click.command("ship")
            @click.option("--fast", is_flag=True)
            def ship(fast):
                """Ship the acme release to production. Longer text follows here."""
                click.echo(f"shipped fast={fast}")
            '''
        )
    )
    (site / "acme_cmds" / "broken.py").write_text("raise RuntimeError('acme broke on import')\n")
    (site / "acme_cmds" / "odd.py").write_text("oddity = 42\n")
    info = site / "acme_cmds-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-cmds\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[contextplane.commands]\n"
        "ship = acme_cmds.good:ship\n"
        "wreck = acme_cmds.broken:wreck\n"
        "odd = acme_cmds.odd:oddity\n"
    )
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_a_third_party_command_is_listed_unloaded_and_runs(tmp_path: Path) -> None:
    env = third_party(tmp_path / "site")
    res, modules = help_in_fresh_interpreter("--help", env=env)
    assert res.returncode == 0, res.stderr
    lines = {line.split()[0]: line for line in res.stdout.splitlines() if line.startswith("  ")}
    assert "Ship the acme release to production." in lines["ship"]
    assert {"wreck", "odd"} <= set(lines)
    assert not {m for m in modules if m.startswith("acme_cmds.")}, "--help imported a command module"
    run = subprocess.run(
        [sys.executable, "-m", "contextplane", "ship", "--fast"], capture_output=True, text=True, env=env, timeout=120
    )
    assert run.returncode == 0 and run.stdout == "shipped fast=True\n", run.stderr


def test_a_broken_third_party_command_is_one_error_line_when_run(tmp_path: Path) -> None:
    env = third_party(tmp_path / "site")
    for name, why in [
        ("wreck", "could not be loaded (entry point acme_cmds.broken:wreck of acme-cmds): RuntimeError: acme broke on import"),
        ("odd", "is not available: entry point acme_cmds.odd:oddity of acme-cmds is a int, not a click.Command"),
    ]:
        res = subprocess.run(
            [sys.executable, "-m", "contextplane", name, "--anything"], capture_output=True, text=True, env=env, timeout=120
        )
        assert res.returncode == 2 and res.stdout == "", res.stderr
        errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
        assert errors == [f"error: `contextplane {name}` {why}"], res.stderr
        assert "Traceback" not in res.stderr
