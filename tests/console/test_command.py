"""``contextplane console`` as an operator runs it: plugged in through ``contextplane.commands``,
on loopback without a token, refusing a store that is not there and a port that is taken."""

from __future__ import annotations

import socket
import subprocess
import sys

import httpx
from click.testing import CliRunner

from contextplane.cli import main
from tests.console.conftest import Deployment
from tests.console.test_security import _console_process, _stop


def test_the_command_is_plugged_in_with_its_options() -> None:
    res = CliRunner().invoke(main, ["console", "--help"])
    assert res.exit_code == 0, res.output
    for option in ("--db", "--host", "--port", "--config"):
        assert option in res.output
    assert "console" in CliRunner().invoke(main, ["--help"]).output


def test_a_missing_store_is_an_error_not_a_new_file(tmp_path) -> None:
    res = CliRunner().invoke(main, ["console", "--db", str(tmp_path / "nope.sqlite3")])
    assert res.exit_code == 2
    assert "--db" in res.output and "no store there" in res.output and "contextplane demo" in res.output
    assert not (tmp_path / "nope.sqlite3").exists()


def test_on_loopback_it_serves_without_a_token_and_stops_cleanly(deployment: Deployment) -> None:
    proc, printed = _console_process(deployment.root / "memory.sqlite3")
    try:
        assert "token" not in printed
        url = printed.split("open ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        r = httpx.get(url + "memory")
        assert r.status_code == 200 and "Memory review" in r.text
    finally:
        out = _stop(proc)
    assert proc.returncode == 0 and "console stopped" in out


def test_a_taken_port_is_an_error_naming_it(deployment: Deployment) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        res = subprocess.run(
            [sys.executable, "-m", "contextplane", "console", "--db", str(deployment.root / "memory.sqlite3"),
             "--port", str(port)],
            capture_output=True, text=True, timeout=60,
        )
    assert res.returncode == 2, res.stderr
    assert f"--host 127.0.0.1 --port {port}: cannot listen there" in res.stderr
    assert "0 picks a free one" in res.stderr


def test_the_readme_console_command_opens_the_demo_store(tmp_path) -> None:
    """The README's one command, run verbatim in a fresh directory (the install step aside,
    and on a free port instead of 8765, which may be taken where the tests run)."""
    import os
    import re
    import shlex
    import time
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- console:run -->\n```bash\n", 1)[1].split("```", 1)[0].strip()
    install, demo, console = (shlex.split(part) for part in block.split("&&"))
    assert install[:4] == ["python3", "-m", "pip", "install"] and "'.[console]'" in block
    assert demo[:2] == ["contextplane", "demo"] and console[:2] == ["contextplane", "console"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTPLANE_")}
    done = subprocess.run(
        [sys.executable, "-m", "contextplane", *demo[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextplane", *console[1:], "--port", "0"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None
        deadline, url = time.monotonic() + 30, None
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            found = re.match(r"open (http://127\.0\.0\.1:\d+/)$", line.strip())
            url = found.group(1) if found else url
        assert url, "the console printed no URL"
        page = httpx.get(url + "memory").text
        assert "The website deploy window is Tuesday" in page and "sqlite:demo-store/memory.sqlite3" in page
        assert httpx.get(url + "api/snapshots/sessions").json()["sessions"][0]["snapshots"] == 6
    finally:
        _stop(proc)


def test_the_reviewer_option_is_who_the_history_records(deployment: Deployment) -> None:
    db = deployment.root / "memory.sqlite3"
    row = next(c for c in deployment.store.list_chunks(review_state="pending"))
    proc, printed = _console_process(db, "--reviewer", "priya@ops")
    try:
        url = printed.split("open ", 1)[1].split()[0]
        csrf = httpx.get(url + "api/csrf").json()["csrf_token"]
        r = httpx.post(
            f"{url}api/memory/chunks/{row.id}/review",
            json={"state": "confirmed"},
            headers={"X-CSRF-Token": csrf, "Origin": url.rstrip("/")},
        )
        assert r.status_code == 200, r.text
        assert r.json()["history"][-1]["by"] == "priya@ops"
    finally:
        _stop(proc)
    assert deployment.store.history(row.id)[-1].actor == "priya@ops"
    res = CliRunner().invoke(main, ["console", "--db", str(db), "--reviewer", "  "])
    assert res.exit_code == 2 and "--reviewer: must not be empty" in res.output


def test_consoles_on_port_0_name_their_cookie_after_the_port_they_got(
    deployment: Deployment, monkeypatch
) -> None:
    """Two consoles started with --port 0 must not share one cookie name (the second would
    overwrite the first's token in the browser)."""
    from contextplane_console.server import ConsoleServer

    seen: list[tuple[str, int]] = []

    def record(self: ConsoleServer) -> None:  # instead of serving: what would have been served
        seen.append((self.server.config.app.cookie_name, self.port))

    monkeypatch.setattr(ConsoleServer, "serve", record)
    monkeypatch.setenv("CONTEXTPLANE_CONSOLE_TOKEN", "a-token-of-enough-characters-0123")
    for _ in range(2):
        res = CliRunner().invoke(
            main, ["console", "--db", str(deployment.root / "memory.sqlite3"), "--port", "0", "--host", "0.0.0.0"]
        )
        assert res.exit_code == 0, res.output
    assert [name for name, _port in seen] == [f"contextplane_console_{port}" for _name, port in seen]
    assert all(port != 0 for _name, port in seen)
