"""The HTML pages and their form endpoints, as htmx calls them (the browser tests drive the
same pages with clicks; these check every refusal and every page a click may not reach)."""

from __future__ import annotations

from typing import Any

import pytest

from contextplane_console import api, pages
from contextplane_demo.fixtures import SESSION
from tests.console.conftest import Console, Deployment
from tests.console.test_api import find

HX = {"HX-Request": "true"}


def form(console: Console, path: str, data: Any) -> Any:
    return console.post(path, data=data, headers=HX)


def test_every_page_renders(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "The database migration tool is Flyway")
    for path, text in [
        ("/memory", "Memory review"),
        (f"/memory/{row.id}", "Supersession chain"),
        ("/sessions", SESSION),
        (f"/session?id={SESSION}", "Injection log"),
        (f"/call?session={SESSION}&turn=1&call=0", "Stable prefix"),
        ("/preview", "Preview a projection"),
    ]:
        r = console.get(path)
        assert r.status_code == 200, (path, r.text[:300])
        assert text in r.text, path
        assert r.headers["content-type"].startswith("text/html")
    home = console.get("/", follow_redirects=False)
    assert home.status_code == 303 and home.headers["location"] == "/memory"


def test_every_route_is_documented(console: Console) -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "console.md").read_text(encoding="utf-8")
    for method, path, _fn, _doc in api.ROUTES + pages.ROUTES:
        assert f"`{method} {path}`" in doc, f"docs/console.md does not document {method} {path}"


def test_the_results_partial_and_the_pager(console: Console) -> None:
    r = console.get("/memory", params={"limit": "2"}, headers={**HX, "HX-Target": "results"})
    assert r.text.startswith('<div id="results">') and "<html" not in r.text
    assert r.text.count('<tr id="row-') == 2
    assert 'href="/memory?limit=2&amp;offset=2"' in r.text
    second = console.get("/memory", params={"limit": "2", "offset": "2"}).text
    assert 'href="/memory?limit=2"' in second  # previous: back to the first page


def test_a_bad_filter_shows_the_form_with_the_error(console: Console) -> None:
    page = console.get("/memory", params={"memory_kind": "memo"})
    assert page.status_code == 200 and "memory_kind: &#39;memo&#39; is not one of" in page.text
    partial = console.get("/memory", params={"limit": "0"}, headers={**HX, "HX-Target": "results"})
    assert partial.status_code == 400 and "limit: expected a whole number from 1 to 500, got 0" in partial.text


def test_bulk_form_refusals_keep_the_list(console: Console, deployment: Deployment) -> None:
    pending = [c.id for c in deployment.store.list_chunks(review_state="pending")]
    none = form(console, "/memory/bulk", {"state": "confirmed"})
    assert none.status_code == 400 and "ids: select at least one memory" in none.text and 'id="results"' in none.text
    bad = form(console, "/memory/bulk", {"ids": pending[:1], "state": "maybe"})
    assert bad.status_code == 400 and "state: &#39;maybe&#39; is not one of confirmed, rejected" in bad.text
    ok = form(console, "/memory/bulk", {"ids": pending[:2], "state": "rejected", "review_state": "pending"})
    assert ok.status_code == 200 and f"Rejected 2: {pending[0]}, {pending[1]}" in ok.text
    assert [deployment.store.get(i).review_state for i in pending[:2]] == ["rejected", "rejected"]
    assert f'id="row-{pending[0]}"' not in ok.text  # the list kept its filter: pending only


def test_row_actions_return_the_row_or_the_panel(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Replica lag spikes")
    tr = form(console, f"/memory/{row.id}/review", {"state": "confirmed", "view": "row"})
    assert tr.text.startswith(f'<tr id="row-{row.id}"') and 'data-review="confirmed"' in tr.text
    panel = form(console, f"/memory/{row.id}/review", {"state": "maybe"})
    assert panel.status_code == 400 and panel.text.startswith('<section id="memory-panel"')
    assert "state: &#39;maybe&#39; is not one of confirmed, pending, rejected" in panel.text
    assert deployment.store.get(row.id).review_state == "confirmed"
    missing = form(console, "/memory/99999/review", {"state": "confirmed"})
    assert missing.status_code == 404 and "id: no memory with id &#39;99999&#39;" in missing.text


def test_expiry_and_supersede_forms(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Priya Raman approves")
    empty = form(console, f"/memory/{row.id}/expiry", {"expires_at": " "})
    assert empty.status_code == 400 and "expires_at: required" in empty.text
    naive = form(console, f"/memory/{row.id}/expiry", {"expires_at": "2030-01-01T00:00:00"})
    assert naive.status_code == 400 and "no timezone" in naive.text
    assert form(console, f"/memory/{row.id}/expiry", {"expires_at": "2030-01-01T00:00:00Z"}).status_code == 200
    assert deployment.store.get(row.id).expires_at is not None
    cleared = form(console, f"/memory/{row.id}/expiry", {"expires_at": "", "clear": "1"})
    assert "expiry cleared" in cleared.text and deployment.store.get(row.id).expires_at is None
    blank = form(console, f"/memory/{row.id}/supersede", {"content": ""})
    assert blank.status_code == 400 and "content: required" in blank.text
    done = form(console, f"/memory/{row.id}/supersede", {"content": "Priya and Sam approve deploys."})
    assert done.status_code == 200 and 'data-lifecycle="superseded"' in done.text and '<ol class="chain"' in done.text
    again = form(console, f"/memory/{row.id}/supersede", {"content": "x"})
    assert again.status_code == 409 and "already superseded" in again.text


def test_form_endpoints_want_a_form(console: Console, deployment: Deployment) -> None:
    r = console.post("/memory/bulk", json={"ids": ["1"], "state": "confirmed"}, headers=HX)
    assert r.status_code == 415 and "Content-Type: expected a form" in r.text


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"query": ""}, "query: required"),
        ({"query": "q", "context_window": "0"}, "context_window: expected a whole number &gt;= 1, got 0"),
        ({"query": "q", "budget_tokens": "lots"}, "budget_tokens: expected a whole number &gt;= 0, got &#39;lots&#39;"),
    ],
)
def test_preview_form_refusals(console: Console, data: dict[str, str], words: str) -> None:
    r = form(console, "/preview", data)
    assert r.status_code == 400 and words in r.text, r.text
    assert r.text.startswith('<div id="preview-result">')


def test_preview_form_runs(console: Console) -> None:
    r = form(console, "/preview", {"query": "deploy window", "goal_turn": "1", "context_window": "16000"})
    assert r.status_code == 200 and 'id="budget-summary"' in r.text and "mode goal_turn" in r.text
    assert "suppressed (goal_turn)" in r.text


def test_unknown_pages(console: Console) -> None:
    for path, words in [
        ("/memory/99999", "no memory with id"),
        ("/session?id=nobody", "no prompt snapshots for session &#39;nobody&#39;"),
        ("/session", "id: required"),
        ("/call?session=nobody&turn=1", "no snapshot for session"),
        ("/nowhere", "no such page"),
    ]:
        r = console.get(path)
        assert r.status_code in (400, 404) and words in r.text, (path, r.text[:400])
        assert "<html" in r.text  # a page, with the navigation, not a bare error
