"""What a new user hits on a first run (issue 23): one-line errors, stdin without echo's
newline, commands that refuse a path with no store, bounded listings, the missing commands."""

from __future__ import annotations

import json
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
