"""Hostile numbers, nesting and text against every console route: a 4xx naming the value, never
a 5xx or a logged traceback (issue 26, item 5).

Why a property test over the route table itself: the routes are listed once (``api.ROUTES`` and
``pages.ROUTES``), so a route added later is attacked here without anyone remembering to.
The app runs in-process (Starlette's TestClient): no server thread, so a few hundred requests
take seconds.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from contextplane_console import create_app
from contextplane_console.api import ROUTES as API_ROUTES
from contextplane_console.pages import ROUTES as PAGE_ROUTES
from contextplane_console.security import same_site_path
from tests.console.conftest import SESSION, Deployment

CSRF = "test-csrf-token-0123456789"
BASE = "http://127.0.0.1:8765"
ROUTES = [(method, path) for method, path, _fn, _doc in API_ROUTES + PAGE_ROUTES]

#: Every name a route reads from a query string, a form or a JSON body (and a few it does not).
FIELDS = [
    "turn", "call", "offset", "limit", "session", "memory", "id", "ids", "query", "project",
    "context_window", "budget_tokens", "state", "content", "expires_at", "q", "review_state",
    "memory_kind", "delivery_policy", "domain", "scope", "subject", "heading", "source",
    "source_type", "incognito", "goal_turn", "include_superseded", "trust_tier", "namespace",
]

#: Whole numbers no store can hold, and text that only looks like a number.
HUGE = st.one_of(
    st.integers(min_value=2**63, max_value=10**40),
    st.integers(min_value=-(10**40), max_value=-(2**63) - 1),
    st.integers(min_value=-(2**31), max_value=2**31),
    st.sampled_from([2**63 - 1, 2**62, 2**32]),
)
NUMBERISH = st.one_of(
    HUGE.map(str),
    st.sampled_from(["1e30", "0x10", "١٢", "+1", "--1", " ", "9" * 5000, "1.5", "-0", "NaN"]),
)
#: Text for a query string or a form (httpx cannot send a lone surrogate there: it encodes UTF-8).
PLAIN = st.one_of(NUMBERISH, st.text(st.characters(exclude_categories=["Cs"]), max_size=30))
#: JSON text: lone surrogates included (``json.dumps`` writes them as ``\\ud800`` escapes).
JSON_TEXT = st.one_of(st.text(max_size=20), st.sampled_from(["deploy \ud800 window", "\udfff", "a\ud83d"]))


def nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"content": value}
    return value


JSON_VALUE = st.one_of(
    HUGE,
    JSON_TEXT,
    st.booleans(),
    st.none(),
    st.builds(nested, st.integers(min_value=1, max_value=400), st.one_of(HUGE, JSON_TEXT)),
    st.lists(st.one_of(HUGE, JSON_TEXT), max_size=3),
)


def hostile_id() -> st.SearchStrategy[str]:
    return st.one_of(NUMBERISH.filter(lambda s: "/" not in s and s.strip() != ""), st.just("1"))


@pytest.fixture
def client(deployment: Deployment) -> Iterator[TestClient]:
    app = create_app(deployment.backend, deployment.host, csrf_token=CSRF)
    with TestClient(app, base_url=BASE, raise_server_exceptions=True) as c:
        yield c


def send(client: TestClient, method: str, path: str, **kw: Any) -> Any:
    headers = {"X-CSRF-Token": CSRF, "Origin": BASE, **kw.pop("headers", {})}
    return client.request(method, path, headers=headers, **kw)


def no_5xx(response: Any, caplog: pytest.LogCaptureFixture) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    tracebacks = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not tracebacks, [r.getMessage() for r in tracebacks]


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    route=st.sampled_from(ROUTES),
    chunk_id=hostile_id(),
    query=st.dictionaries(st.sampled_from(FIELDS), PLAIN, max_size=4),
    body=st.dictionaries(st.sampled_from(FIELDS), JSON_VALUE, max_size=3),
)
def test_every_route_answers_hostile_input_with_a_4xx(
    client: TestClient,
    caplog: pytest.LogCaptureFixture,
    route: tuple[str, str],
    chunk_id: str,
    query: dict[str, str],
    body: dict[str, Any],
) -> None:
    caplog.clear()
    method, template = route
    path = template.replace("{chunk_id}", chunk_id)
    with caplog.at_level(logging.WARNING, logger="contextplane"):
        if method == "GET":
            response = send(client, "GET", path, params=query)
        elif template.startswith("/api"):
            raw = json.dumps(body)  # ensure_ascii: a lone surrogate becomes a \ud800 escape
            response = send(client, "POST", path, content=raw, headers={"Content-Type": "application/json"})
        else:
            response = send(client, "POST", path, data=query)
    no_5xx(response, caplog)
    if response.status_code >= 400 and template.startswith("/api"):
        assert set(response.json()) == {"error", "field"}, response.text


DEEP = 200_000


@pytest.mark.parametrize(
    "path",
    [p for m, p, _f, _d in API_ROUTES if m == "POST"],
)
def test_a_body_nested_200000_levels_is_refused_by_name(
    client: TestClient, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    raw = '{"content": ' + "[" * DEEP + "]" * DEEP + "}"
    response = send(
        client, "POST", path.replace("{chunk_id}", "1"), content=raw, headers={"Content-Type": "application/json"}
    )
    no_5xx(response, caplog)
    assert response.status_code == 400
    assert response.json() == {
        "error": "body: nested too deeply; this console reads at most 32 levels",
        "field": "body",
    }


def test_a_lone_surrogate_in_the_preview_query_is_refused_by_name(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    raw = '{"query": "deploy \\ud800 window"}'
    response = send(client, "POST", "/api/preview", content=raw, headers={"Content-Type": "application/json"})
    no_5xx(response, caplog)
    assert response.status_code == 400
    assert response.json()["field"] == "query"
    assert "lone surrogate" in response.json()["error"]


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/explain", {"memory": "1", "session": SESSION, "turn": str(2**64)}, "turn"),
        ("/api/snapshots/call", {"session": SESSION, "turn": str(2**64)}, "turn"),
        ("/api/snapshots/call", {"session": SESSION, "turn": "0", "call": str(2**63)}, "call"),
        ("/api/memory/chunks", {"offset": "99999999999999999999999"}, "offset"),
        ("/memory", {"offset": "99999999999999999999999"}, "offset"),
        ("/call", {"session": SESSION, "turn": str(2**64)}, "turn"),
    ],
)
def test_numbers_past_64_bits_are_refused_by_name(
    client: TestClient, caplog: pytest.LogCaptureFixture, path: str, params: dict[str, str], field: str
) -> None:
    response = send(client, "GET", path, params=params)
    no_5xx(response, caplog)
    if path.startswith("/api"):
        assert response.status_code == 400, response.text
        assert response.json()["field"] == field
        assert response.json()["error"].startswith(f"{field}: ")
    else:  # a page shows the refusal where the value was entered
        assert f"{field}: expected a whole number" in response.text


@pytest.mark.parametrize("chunk_id", [str(2**63), "99999999999999999999999", str(-(2**63) - 1)])
def test_chunk_ids_past_64_bits_name_no_memory(
    client: TestClient, caplog: pytest.LogCaptureFixture, chunk_id: str
) -> None:
    for method, path, body in [
        ("GET", f"/api/memory/chunks/{chunk_id}", None),
        ("POST", f"/api/memory/chunks/{chunk_id}/review", {"state": "confirmed"}),
        ("POST", f"/api/memory/chunks/{chunk_id}/supersede", {"content": "new text"}),
        ("POST", f"/api/memory/chunks/{chunk_id}/expiry", {"expires_at": None}),
        ("POST", "/api/memory/review", {"ids": [chunk_id], "state": "confirmed"}),
    ]:
        response = send(client, method, path, json=body)
        no_5xx(response, caplog)
        assert response.status_code == 404, (path, response.text)  # names no memory
        assert "disk" not in response.text, response.text


@pytest.mark.parametrize(
    ("path", "location"),
    [
        ("//evil.example/x", "/evil.example/x"),
        ("/\\evil.example/x", "/evil.example/x"),
        ("/memory/a\r\nSet-Cookie: x=1", "/memory/a%0D%0ASet-Cookie:%20x=1"),
    ],
)
def test_the_token_link_redirects_only_to_this_console(path: str, location: str) -> None:
    assert same_site_path(path) == location
    assert not re.match(r"^(//|/\\|[a-z]+:)", same_site_path(path))


def raw_get(port: int, target: str) -> tuple[int, dict[str, str]]:
    """One GET with ``target`` as written (httpx would read ``//host/x`` as another host)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", target)
        response = conn.getresponse()
        response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


def test_the_served_token_link_stays_on_site_and_logs_no_traceback(
    deployment: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.console.conftest import start_console

    token = "a-token-of-enough-characters-0123"
    server, _csrf = start_console(deployment, token=token, loopback_only=True, cookie_name="cp_test")
    try:
        with caplog.at_level(logging.WARNING):
            status, headers = raw_get(server.port, f"//evil.example/x?token={token}")
            assert status == 303
            assert headers["location"] == "/evil.example/x"
            status, headers = raw_get(server.port, f"/memory%0D%0ASet-Cookie:%20x=1?token={token}")
            assert status == 303
            assert headers["location"] == "/memory%0D%0ASet-Cookie:%20x=1"
            assert "x=1" not in headers["set-cookie"]
    finally:
        server.stop()
    tracebacks = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not tracebacks, [r.getMessage() for r in tracebacks]
