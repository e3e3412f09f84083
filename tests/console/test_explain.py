"""``GET /api/explain`` and the ``/explain`` page over the demo store: the verdict is the core's
``explain`` (compared whole, not re-derived), for a recorded turn and for a query, and every
refusal names its parameter."""

from __future__ import annotations

from typing import Any

import pytest

from contextplane.explain import explain
from contextplane_demo.fixtures import SESSION
from tests.console.conftest import Console, Deployment
from tests.console.test_api import find, refused

HX = {"HX-Request": "true", "HX-Target": "explain-result"}


def api_explain(console: Console, **params: Any) -> Any:
    return console.get("/api/explain", params={k: str(v) for k, v in params.items()})


@pytest.mark.parametrize(
    ("start", "turn", "verdict", "reason"),
    [
        ("The website deploy window is Tuesday", 1, "delivered", None),
        ("The database migration tool is Flyway", 1, "filtered", "superseded"),
        ("The deploy window is any time on Friday", 1, "filtered", "rejected"),
        ("Temporary: the deploy window moved", 2, "filtered", "expired"),
        ("Payments API keys rotate", 1, "filtered", "out_of_scope"),
        ("The website deploy window runbook archive", 1, "filtered", "policy_on_demand"),
        ("Priya Raman approves", 5, "shed", None),
        ("Vendor doc: the CDN purge", 2, "never_retrieved", None),
        # the relevance floor gates the question, not the row (issue 21): turn 1's question is
        # answered, so its weaker match is delivered too; the gate's verdict is judged below
        ("Runbook excerpt", 1, "delivered", None),
        ("The website deploy window is Tuesday", 3, "filtered", "incognito"),
    ],
)
def test_a_recorded_turn_gets_the_cores_verdict(
    console: Console, deployment: Deployment, start: str, turn: int, verdict: str, reason: str | None
) -> None:
    row = find(deployment, start)
    r = api_explain(console, memory=row.id, session=SESSION, turn=turn)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["verdict"], body["reason"]) == (verdict, reason), body
    core = explain(row.id, backend=deployment.backend, host=deployment.host, session_id=SESSION, turn_index=turn)
    assert body == core.to_dict()


def test_the_evidence_of_each_kind_of_verdict(console: Console, deployment: Deployment) -> None:
    old, new = find(deployment, "The database migration tool is Flyway"), find(deployment, "The database migration tool is Alembic")
    filtered = api_explain(console, memory=old.id, session=SESSION, turn=1).json()
    assert filtered["evidence"]["superseded_by"] == new.id and filtered["evidence"]["by"] == "operator"
    shed = api_explain(console, memory=find(deployment, "Priya Raman approves").id, session=SESSION, turn=5).json()
    assert shed["evidence"]["section"] == "retrieved" and shed["evidence"]["budget_chars"] == 16000
    assert shed["evidence"]["shed_steps"][0]["action"] == "drop_row"
    never = api_explain(console, memory=find(deployment, "Vendor doc: the CDN purge").id, session=SESSION, turn=2).json()
    assert never["evidence"]["k"] == 8 and never["evidence"]["final_rank"] is None
    assert [leg["leg"] for leg in never["evidence"]["legs"]] == ["fts"]
    assert never["turn"]["basis"] == "recorded" and never["turn"]["query"].startswith("Which database")
    # a question mostly about what the store never heard of: its one known word finds the
    # runbook, but the question's best match is under the gate, so nothing was retrieved
    floor = api_explain(
        console,
        memory=find(deployment, "Runbook excerpt").id,
        query="runbook volcano earthquake tsunami glacier",
        project="website",
    ).json()
    assert (floor["verdict"], floor["reason"]) == ("filtered", "below_min_relevance"), floor
    assert floor["evidence"]["min_relevance"] == 0.3 and floor["evidence"]["relevance"] < 0.3
    assert floor["evidence"]["best_relevance"] < 0.3


def test_a_query_is_judged_as_a_turn_composed_now(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "The website deploy window is Tuesday")
    scoped = api_explain(console, memory=row.id, query="deploy window", project="website").json()
    assert scoped["verdict"] == "delivered" and scoped["evidence"]["section"] == "always_on"
    assert scoped["turn"]["basis"] == "now"
    elsewhere = api_explain(console, memory=row.id, query="deploy window", project="payments").json()
    assert (elsewhere["verdict"], elsewhere["reason"]) == ("filtered", "out_of_scope")
    assert elsewhere["evidence"]["turn_scopes"][:2] == ["", "project:payments"]
    incognito = api_explain(console, memory=row.id, query="deploy window", project="website", incognito=1).json()
    assert (incognito["verdict"], incognito["reason"]) == ("filtered", "incognito")
    core = explain(row.id, backend=deployment.backend, host=deployment.host, query="deploy window", project="website")
    assert {k: v for k, v in scoped.items() if k != "turn"} == {k: v for k, v in core.to_dict().items() if k != "turn"}


def test_a_purged_memory_is_explained_from_its_history(console: Console, deployment: Deployment) -> None:
    expired = find(deployment, "Temporary: the deploy window moved")
    assert deployment.store.purge() >= 1 and deployment.store.get(expired.id) is None
    now = api_explain(console, memory=expired.id, query="deploy window", project="website").json()
    assert (now["verdict"], now["reason"]) == ("filtered", "purged")


@pytest.mark.parametrize(
    ("params", "status", "field", "words"),
    [
        ({}, 400, "memory", ("required: the id of the memory",)),
        ({"memory": "  ", "query": "x"}, 400, "memory", ("required",)),
        ({"memory": "99999", "query": "x"}, 404, "memory", ("no memory with id '99999'",)),
        ({"memory": "abc", "session": SESSION, "turn": "1"}, 404, "memory", ("no memory with id 'abc'",)),
        ({"memory": "1"}, 400, "query", ("required: a query", "or session and turn")),
        ({"memory": "1", "query": "  "}, 400, "query", ("required: a query",)),
        ({"memory": "1", "session": SESSION}, 400, "turn", (f"which recorded turn of session {SESSION!r}",)),
        ({"memory": "1", "turn": "1"}, 400, "session", ("the session of the recorded turn",)),
        ({"memory": "1", "session": SESSION, "turn": "1", "query": "x"}, 400, "query", ("not both",)),
        ({"memory": "1", "session": SESSION, "turn": "one"}, 400, "turn", ("whole number >= 0", "'one'")),
        ({"memory": "1", "session": SESSION, "turn": "-1"}, 400, "turn", ("whole number >= 0",)),
        ({"memory": "1", "session": "no-such-session", "turn": "1"}, 404, "session",
         ("no recorded turns for session 'no-such-session'",)),
        ({"memory": "1", "session": SESSION, "turn": "9"}, 404, "turn",
         ("turn 9 has no recorded inputs", "recorded turns of this session: 1, 2, 4, 5, 6")),
        ({"memory": "1", "session": SESSION, "turn": "1", "project": "website"}, 400, "project",
         ("only with a query",)),
        ({"memory": "1", "session": SESSION, "turn": "1", "incognito": "1"}, 400, "incognito",
         ("only with a query",)),
        ({"memory": "1", "query": "x", "project": " website"}, 400, "project", ("is not a project id",)),
        ({"memory": "1", "query": "x", "k": "3"}, 400, "k", ("unknown parameter", "memory, session, turn")),
    ],
)
def test_explain_refusals_name_the_parameter(
    console: Console, params: dict[str, str], status: int, field: str, words: tuple[str, ...]
) -> None:
    refused(console.get("/api/explain", params=params), status, field, *words)


def test_the_page_renders_the_verdict_and_links_the_superseding_row(console: Console, deployment: Deployment) -> None:
    old, new = find(deployment, "The database migration tool is Flyway"), find(deployment, "The database migration tool is Alembic")
    r = console.get("/explain", params={"memory": old.id, "session": SESSION, "turn": "1"})
    assert r.status_code == 200
    assert 'data-verdict="filtered" data-reason="superseded"' in r.text
    assert f'<a class="memory-id" href="/memory/{new.id}">{new.id}</a>' in r.text
    assert f"/explain?memory={new.id}&amp;session={SESSION}&amp;turn=1" in r.text  # explain the successor too
    fragment = console.get("/explain", params={"memory": old.id, "session": SESSION, "turn": "1"}, headers=HX)
    assert fragment.text.lstrip().startswith('<section id="explain-result"') and "<html" not in fragment.text


def test_the_page_shows_refusals_in_place(console: Console) -> None:
    bare = console.get("/explain", params={"memory": "1"})  # the form, prefilled, no verdict yet
    assert bare.status_code == 200 and "Explain it in a recorded turn" in bare.text and "data-verdict" not in bare.text
    r = console.get("/explain", params={"memory": "1", "session": "no-such-session", "turn": "1"}, headers=HX)
    assert r.status_code == 404
    assert "session: no recorded turns for session &#39;no-such-session&#39;" in r.text
    full = console.get("/explain", params={"memory": "1", "session": SESSION, "turn": "x"})
    assert full.status_code == 400 and "turn: expected a whole number" in full.text and "explain-turn-form" in full.text


def test_the_row_and_the_inspector_link_to_explain(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "The website deploy window is Tuesday")
    assert f'href="/explain?memory={row.id}"' in console.get(f"/memory/{row.id}").text
    assert f'href="/explain?memory={row.id}"' in console.get("/memory").text
    inspector = console.get("/call", params={"session": SESSION, "turn": "1"}).text
    assert f'href="/explain?memory={row.id}&amp;session={SESSION}&amp;turn=1"' in inspector
