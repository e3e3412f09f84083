"""What a new user hits on a first run (issue 23): one-line errors, stdin without echo's
newline, commands that refuse a path with no store, bounded listings, the missing commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from contextplane.cli import main


def run(*args: str, input: bytes | str | None = None, ok: bool = True, env: dict[str, str] | None = None):
    result = CliRunner().invoke(main, list(args), input=input, prog_name="contextplane", env=env)
    if ok:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


# --- 14: standard input ----------------------------------------------------------------


def test_memory_add_from_stdin_drops_one_trailing_newline(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    run("memory", "add", "-", "--db", db, input=b"Deploys need Priya\n")
    run("memory", "add", "-", "--db", db, input=b"two lines\n\n")
    run("memory", "add", "-", "--db", db, input=b"windows\r\n")
    rows = json.loads(run("memory", "list", "--db", db, "--json").stdout)
    assert [r["content"] for r in rows] == ["Deploys need Priya", "two lines\n", "windows"]


# --- 15: one-line errors ---------------------------------------------------------------


def test_a_usage_error_of_the_root_command_is_one_line() -> None:
    res = run("--verbose", ok=False)
    assert res.exit_code == 2
    assert res.stderr == "error: No such option '--verbose'. Did you mean '--version'? (see 'contextplane --help')\n"


def test_no_postgres_url_names_where_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXTPLANE_DATABASE_URL", raising=False)
    monkeypatch.delenv("CONTEXTPLANE_CONFIG", raising=False)
    res = run("memory", "list", ok=False, env={"CONTEXTPLANE_STORE__BACKEND": "postgres"})
    assert res.exit_code == 2
    (error,) = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert "needs a connection URL" in error and error.count("(in environment)") == 1, error


def test_a_server_that_is_not_there_is_asked_about_once() -> None:
    from contextplane_postgres.connection import explain

    libpq = (
        'connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused\n'
        "\tIs the server running on that host and accepting TCP/IP connections?"
    )
    text = str(explain(psycopg.OperationalError(libpq), "postgresql://u@127.0.0.1:1/x"))
    assert text.lower().count("server running") == 1, text
    quiet = str(explain(psycopg.OperationalError("connection failed: Connection refused"), "postgresql://u@h/x"))
    assert quiet.endswith("; is the server running and listening there?")


# --- 6: read-only commands: the same text rule, no side files ---------------------------


def test_a_query_that_is_not_utf8_is_refused_like_memory_add_refuses_it(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    run("memory", "add", "Deploys need Priya", "--db", db)
    bad = "\udcff deploy"  # what the shell's surrogateescape makes of the byte 0xff
    expected = "holds U+DCFF at character 0, a lone surrogate that is not text"
    assert expected in run("memory", "add", bad, "--db", db, ok=False).stderr
    for args in (("memory", "search", bad), ("preview", bad), ("explain", "1", "--query", bad)):
        res = run(*args, "--db", db, ok=False)
        assert res.exit_code == 2 and res.stderr.startswith("error: ") and expected in res.stderr, (args, res.stderr)


def test_read_only_commands_leave_the_directory_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    run("memory", "add", "Deploys need Priya", "--db", str(db))
    run("preview", "who deploys?", "--db", str(db), "--record")  # records a turn: injections, snapshots
    before = sorted(p.name for p in tmp_path.iterdir())
    assert not [name for name in before if name.endswith(("-wal", "-shm"))], before
    for args in (
        ("memory", "list"),
        ("memory", "search", "deploy"),
        ("memory", "show", "1"),
        ("preview", "who deploys?"),
        ("injections",),
        ("snapshots", "list"),
        ("explain", "1", "--session", "preview", "--turn", "1"),
        ("replay", "--session", "preview", "--turn", "1"),
    ):
        run(*args, "--db", str(db))
        assert sorted(p.name for p in tmp_path.iterdir()) == before, args


# --- 1: a path with no store -----------------------------------------------------------

NO_STORE = "no store here (no such file), and nothing was created"


@pytest.mark.parametrize(
    "args",
    [
        ("preview", "who approves a deploy?"),
        ("preview", "who approves a deploy?", "--json"),
        ("mcp", "serve"),
        ("mcp", "serve", "--incognito"),
        ("memory", "confirm", "1"),
        ("memory", "expire", "1"),
        ("memory", "reindex"),
        ("memory", "list"),
    ],
)
def test_a_command_on_a_path_with_no_store_refuses_it_and_creates_nothing(tmp_path: Path, args) -> None:
    typo = tmp_path / "tpyo.sqlite3"
    res = run(*args, "--db", str(typo), ok=False)
    assert res.exit_code == 2 and res.stderr.splitlines()[-1] == f"error: {typo}: {NO_STORE}; pass --db, or " + (
        "set store.path or $CONTEXTPLANE_DB, to name an existing one (`contextplane memory add` creates a store)"
    ), res.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_console_refuses_a_configured_store_path_with_no_store(tmp_path: Path) -> None:
    (tmp_path / "contextplane.toml").write_text('[store]\npath = "tpyo.sqlite3"\n')
    res = run("console", "--config", str(tmp_path / "contextplane.toml"), "--port", "0", ok=False)
    assert res.exit_code == 2 and NO_STORE in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["contextplane.toml"]


def test_the_commands_that_create_a_store_say_so_and_do(tmp_path: Path) -> None:
    from contextplane import PluginHost
    from contextplane.cli_common import command_backend

    assert "--create" in run("mcp", "serve", "--help").stdout
    made = tmp_path / "new.sqlite3"
    with command_backend(None, made, write=True, create=True, host=PluginHost()) as (_c, _h, backend):
        assert backend.memories.list_chunks() == []
    assert made.exists()
    run("memory", "add", "first", "--db", str(tmp_path / "added.sqlite3"))
    out = run("preview", "q", "--db", str(tmp_path / "turn.sqlite3"), "--record").stdout
    assert "recorded as session 'preview' turn 1" in out and (tmp_path / "turn.sqlite3").exists()


# --- 13: a listing says which rows of how many ------------------------------------------


def test_memory_list_says_which_rows_of_how_many_and_pages_on(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    from contextplane.store import SQLiteKnowledgeStore

    with SQLiteKnowledgeStore(db) as store:
        store.add_chunks([{"content": f"note {i}"} for i in range(120)])
    out = run("memory", "list", "--db", db).stdout
    assert out.endswith("rows 1-50 of 120; next page: --offset 50, all: --limit 0\n")
    out = run("memory", "list", "--db", db, "--offset", "100").stdout
    assert out.endswith("rows 101-120 of 120\n") and "note 99 " not in out and "note 100" in out
    rows = json.loads(run("memory", "list", "--db", db, "--offset", "110", "--json").stdout)
    assert [r["content"] for r in rows] == [f"note {i}" for i in range(110, 120)]
    out = run("memory", "list", "--db", db, "--limit", "0").stdout
    assert "rows " not in out and "note 119" in out  # the whole store: nothing to say


# --- 11: a command whose extra is missing ----------------------------------------------

WITHOUT_EXTRAS = (
    "import sys; sys.modules['jinja2'] = sys.modules['mcp'] = None\n"  # as if not installed
    "from contextplane.cli import main; main()"
)


def without_extras(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS, *args], capture_output=True, text=True, timeout=120
    )


def test_a_command_whose_extra_is_missing_is_listed_with_its_install_hint() -> None:
    res = without_extras("--help")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    lines = {line.split()[0]: line for line in res.stdout.splitlines() if line.startswith("  ")}
    assert "(not installed: pip install 'contextplane[console]')" in lines["console"]
    assert "(not installed: pip install 'contextplane[mcp]')" in lines["mcp"]
    assert "demo" in lines and "not installed" not in lines["demo"]
    res = without_extras("console", "--db", "x.sqlite3")
    assert res.returncode == 2 and res.stderr == (
        "error: `contextplane console` is not installed: pip install 'contextplane[console]' "
        "(no module named 'jinja2')\n"
    )
    res = without_extras("mcp", "serve")
    assert res.returncode == 2 and "pip install 'contextplane[mcp]'" in res.stderr and res.stdout == ""


# --- 16: record a turn from the command line --------------------------------------------


def test_preview_record_makes_a_turn_explain_replay_and_snapshots_can_read(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    run("memory", "add", "Priya approves production deploys", "--db", db)
    first = run("preview", "who approves deploys?", "--db", db, "--record", "--session", "mine").stdout
    assert "! recorded as session 'mine' turn 1" in first
    second = run("preview", "who approves deploys?", "--db", db, "--record", "--session", "mine").stdout
    assert "! recorded as session 'mine' turn 2" in second  # the session's next turn
    verdict = run("explain", "1", "--session", "mine", "--turn", "2", "--db", db).stdout
    assert verdict.startswith("memory 1: delivered")
    assert "byte-identical" in run("replay", "--session", "mine", "--turn", "1", "--db", db).stdout
    snapshots = run("snapshots", "list", "--db", db).stdout
    assert len([line for line in snapshots.splitlines() if line.startswith("mine ")]) == 2
    injections = json.loads(run("injections", "--session", "mine", "--json", "--db", db).stdout)
    assert [r["turn_index"] for r in injections] == [1, 2]
    # Without --record nothing is written.
    run("preview", "who approves deploys?", "--db", db, "--session", "mine")
    assert len(json.loads(run("injections", "--session", "mine", "--json", "--db", db).stdout)) == 2


def test_a_server_backend_that_cannot_be_opened_is_one_error_line(tmp_path: Path) -> None:
    """Issue 23 item 15: the backend plugin's failure was a `warning:` line and then the same
    reason again as the `error:` line; it is one line, naming the configuration."""
    import subprocess
    import sys

    config = tmp_path / "contextplane.toml"
    config.write_text('[store]\nbackend = "postgres"\nurl = "postgresql://nobody@127.0.0.1:1/none"\n')
    for args in (("memory", "list"), ("preview", "deploy window")):
        done = subprocess.run(
            [sys.executable, "-m", "contextplane", *args, "--config", str(config)],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )
        assert done.returncode != 0 and done.stdout == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("error: cannot connect to the PostgreSQL server at postgresql://nobody@127.0.0.1:1")
        assert f"(store.backend = 'postgres', in {config})" in lines[0]
