"""The console's security promises: loopback by default, a token everywhere else (on every
request, static files included), same-origin and a CSRF token on every state change, memory
text escaped in the HTML itself, and no token in any log line."""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from contextplane_console import create_app
from tests.console.conftest import Console, Deployment, start_console
from tests.console.test_api import find

TOKEN = "a-configured-token-0123456789abcdef"


def refused(r: httpx.Response, status: int, field: str, *words: str) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.json()["field"] == field and r.json()["error"].startswith(f"{field}: "), r.text
    for word in words:
        assert word in r.json()["error"], (word, r.text)


# ---------------------------------------------------------------------------- cross-site requests


def test_a_cross_origin_post_is_refused_and_changes_nothing(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Deploys that skip the canary")
    url = f"/api/memory/chunks/{row.id}/review"
    evil = console.post(url, json={"state": "confirmed"}, headers={"Origin": "http://evil.example"})
    refused(evil, 403, "Origin", "cross-origin request refused", "'http://evil.example'", console.url)
    site = console.http.post(
        url, json={"state": "rejected"}, headers={"X-CSRF-Token": console.csrf, "Sec-Fetch-Site": "cross-site"}
    )
    refused(site, 403, "Sec-Fetch-Site", "'cross-site'")
    # a form a hostile page submits: no CSRF header can be set cross-site without a preflight
    form = console.http.post(
        f"/memory/{row.id}/review", data={"state": "confirmed"}, headers={"Origin": "http://evil.example"}
    )
    assert form.status_code == 403 and "cross-origin" in form.text
    assert deployment.store.get(row.id).review_state == "pending"


def test_a_state_change_without_the_csrf_token_is_refused(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Deploys that skip the canary")
    url = f"/api/memory/chunks/{row.id}/review"
    refused(console.http.post(url, json={"state": "confirmed"}), 403, "X-CSRF-Token", "missing or wrong")
    wrong = console.http.post(url, json={"state": "confirmed"}, headers={"X-CSRF-Token": "guess"})
    refused(wrong, 403, "X-CSRF-Token")
    for path in ("/api/preview", "/api/memory/review", "/memory/bulk", "/preview"):
        assert console.http.post(path, json={}).status_code == 403, path
    assert deployment.store.get(row.id).review_state == "pending"
    # same origin with the token: allowed (what the pages do)
    ok = console.post(url, json={"state": "confirmed"})
    assert ok.status_code == 200 and deployment.store.get(row.id).review_state == "confirmed"


def test_a_page_of_another_name_cannot_read_a_loopback_console(console: Console) -> None:
    """DNS rebinding: evil.example resolving to 127.0.0.1 still sends Host: evil.example."""
    r = console.get("/api/memory/chunks", headers={"Host": "evil.example"})
    refused(r, 403, "Host", "'evil.example' is not a loopback name")
    page = console.get("/memory", headers={"Host": "evil.example:80"})
    assert page.status_code == 403 and "loopback only" in page.text
    for host in ("localhost", "127.0.0.1", f"127.0.0.1:{console.server.port}"):
        assert console.get("/api/csrf", headers={"Host": host}).status_code == 200, host


def test_every_response_carries_the_security_headers(console: Console) -> None:
    for path in ("/memory", "/api/memory/chunks", "/static/htmx.min.js", "/api/nothing"):
        headers = console.get(path).headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"
        assert headers["referrer-policy"] == "no-referrer"
        assert re.fullmatch(r"app;dur=[0-9.]+", headers["server-timing"])


def test_memory_text_is_escaped_in_the_html(console: Console, deployment: Deployment) -> None:
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&"
    cid = deployment.store.add_chunk(hostile, "general", "conversation")
    for path in ("/memory", f"/memory/{cid}", "/memory?q=alert"):
        html = console.get(path).text
        assert "<script>alert(1)" not in html and "<img src=x" not in html, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in html, path


# ---------------------------------------------------------------------------- the token


@pytest.fixture
def guarded(deployment: Deployment) -> Iterator[Console]:
    server, csrf = start_console(deployment, token=TOKEN, loopback_only=False)
    c = Console(server, csrf)
    try:
        yield c
    finally:
        c.http.close()
        server.stop()


def test_without_the_token_every_request_is_refused(guarded: Console) -> None:
    for path in ("/memory", "/api/memory/chunks", "/static/htmx.min.js", "/api/csrf", "/nothing"):
        r = guarded.get(path)
        assert r.status_code == 401, path
        assert "needs its access token" in r.text, path
    refused(guarded.get("/api/csrf"), 401, "token", "Authorization: Bearer")
    refused(guarded.get("/api/csrf", headers={"Authorization": "Bearer wrong"}), 401, "token")
    assert guarded.get("/api/csrf", params={"token": TOKEN}).status_code == 401  # the API takes the header only
    r = guarded.post("/api/memory/review", json={"ids": ["1"], "state": "rejected"})
    assert r.status_code == 401


def test_the_token_opens_the_console_by_header_or_by_the_printed_link(guarded: Console, deployment: Deployment) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert guarded.get("/api/memory/chunks", headers=bearer).status_code == 200
    row = find(deployment, "Deploys that skip the canary")
    r = guarded.post(f"/api/memory/chunks/{row.id}/review", json={"state": "rejected"}, headers=bearer)
    assert r.status_code == 200 and deployment.store.get(row.id).review_state == "rejected"
    # the link: sets an HttpOnly, SameSite=Strict cookie and redirects to the URL without the token
    link = guarded.get("/memory", params={"token": TOKEN, "review_state": "pending"})
    assert link.status_code == 303 and link.headers["location"] == "/memory?review_state=pending"
    cookie = link.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert guarded.get("/memory?review_state=pending").status_code == 200  # the client kept the cookie
    with httpx.Client(base_url=guarded.url) as fresh:  # no cookie: a wrong link opens nothing
        assert fresh.get("/memory", params={"token": "wrong"}).status_code == 401


def test_a_console_beyond_loopback_cannot_be_built_without_a_token(deployment: Deployment) -> None:
    with pytest.raises(ValueError, match="token: a console that listens beyond loopback needs an access token"):
        create_app(deployment.backend, deployment.host, loopback_only=False)


def _console_process(db: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "contextplane", "console", "--db", str(db), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("press Ctrl+C"):
            return proc, "".join(lines)
    proc.kill()
    raise AssertionError("the console did not start:\n" + "".join(lines) + (proc.stdout.read() or ""))


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    return out


def test_a_non_loopback_bind_needs_the_token_it_prints(deployment: Deployment) -> None:
    """The command, bound to every interface, generates a token, prints it once in the link,
    and refuses every request without it. (Requests go to 127.0.0.1 only.)"""
    proc, printed = _console_process(deployment.root / "memory.sqlite3", "--host", "0.0.0.0")
    try:
        match = re.search(r"open http://0\.0\.0\.0:(\d+)/\?token=(\S+)", printed)
        assert match, printed
        port, token = match.group(1), match.group(2)
        assert len(token) >= 32 and "every request needs the token" in printed
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/api/memory/chunks").status_code == 401
        assert httpx.get(f"{base}/memory").status_code == 401
        ok = httpx.get(f"{base}/api/memory/chunks", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and ok.json()["items"]
    finally:
        out = printed + _stop(proc)
    assert out.count(token) == 1, "the token is printed once, in the link, and nowhere else"
    assert proc.returncode == 0, out


def test_a_configured_token_is_used_and_a_short_one_refused(deployment: Deployment) -> None:
    proc, printed = _console_process(
        deployment.root / "memory.sqlite3", "--host", "0.0.0.0", env={"CONTEXTPLANE_CONSOLE_TOKEN": TOKEN}
    )
    try:
        port = re.search(r":(\d+)/\?token=", printed).group(1)  # type: ignore[union-attr]
        assert f"?token={TOKEN}" in printed
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"http://127.0.0.1:{port}/api/csrf", headers=headers).status_code == 200
    finally:
        _stop(proc)
    short = subprocess.run(
        [sys.executable, "-m", "contextplane", "console", "--host", "0.0.0.0", "--port", "0",
         "--db", str(deployment.root / "memory.sqlite3")],
        capture_output=True, text=True, timeout=60, env={**os.environ, "CONTEXTPLANE_CONSOLE_TOKEN": "short"},
    )
    assert short.returncode == 2
    assert "CONTEXTPLANE_CONSOLE_TOKEN: at least 16 characters, got 5" in short.stderr


def test_no_token_in_any_log_line(guarded: Console, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        guarded.get("/memory", params={"token": TOKEN})
        guarded.get("/api/memory/chunks", headers={"Authorization": f"Bearer {TOKEN}"})
        guarded.get("/api/memory/chunks", params={"token": TOKEN})
    server_side = ("contextplane", "uvicorn", "starlette")  # not the test's own HTTP client
    lines = [r.getMessage() for r in caplog.records if r.name.split(".")[0] in server_side]
    assert any(line.startswith("GET /memory 303") for line in lines), lines  # requests are logged...
    assert not [line for line in lines if TOKEN in line or guarded.csrf in line]  # ...without secrets
