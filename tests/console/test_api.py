"""The console's JSON API, endpoint by endpoint, against a running server over the demo store:
what each returns, what each changes in the store, and how each refuses bad input (the error
text names the field)."""

from __future__ import annotations

import pytest

from contextplane import MemoryChunk
from contextplane.memory.model import REVIEW_STATES
from contextplane_console.memories import REVIEW_ORDER, lifecycle_state
from contextplane_demo.fixtures import SESSION
from tests.console.conftest import Console, Deployment


def find(d: Deployment, start: str) -> MemoryChunk:
    """The demo row whose text starts with ``start``."""
    rows = [c for c in d.store.list_chunks() if c.content.startswith(start)]
    assert len(rows) == 1, start
    return rows[0]


def all_items(console: Console, **params: str) -> list[dict]:
    r = console.get("/api/memory/chunks", params={"limit": "500", **params})
    assert r.status_code == 200, r.text
    assert r.json()["next_offset"] is None
    return r.json()["items"]


def refused(r, status: int, field: str, *words: str) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert body["field"] == field, body
    assert body["error"].startswith(f"{field}: "), body
    for word in words:
        assert word in body["error"], (word, body)


# ---------------------------------------------------------------------------- the index


def test_the_index_lists_every_endpoint_and_the_csrf_token_is_served(console: Console) -> None:
    from contextplane_console import api

    r = console.get("/api")
    assert r.status_code == 200
    listed = {(e["method"], e["path"]) for e in r.json()["endpoints"]}
    assert listed == {(m, p) for m, p, _f, _d in api.ROUTES}
    assert console.get("/api/csrf").json() == {"csrf_token": console.csrf, "header": "X-CSRF-Token"}


def test_unknown_paths_and_methods_are_json_errors(console: Console) -> None:
    refused(console.get("/api/nothing-here"), 404, "path", "'/api/nothing-here'", "GET /api")
    refused(console.get("/api/memory/chunks/1/review"), 405, "method", "GET is not allowed")


# ---------------------------------------------------------------------------- GET /api/memory/chunks


def test_the_list_shows_pending_first_then_confirmed_then_rejected_oldest_first(
    console: Console, deployment: Deployment
) -> None:
    items = all_items(console)
    every = deployment.store.list_chunks()
    assert len(items) == len(every)
    expected = sorted(every, key=lambda c: (REVIEW_ORDER.index(c.review_state), int(c.id)))
    assert [i["id"] for i in items] == [c.id for c in expected]
    states = [i["review_state"] for i in items]
    assert states.index("confirmed") > states.index("pending") and states[-1] == "rejected"
    first = items[0]
    assert {"lifecycle", "trust_tier", "trust_label", "effective_delivery_policy", "superseded_by"} <= set(first)


@pytest.mark.parametrize(
    ("params", "check"),
    [
        ({"memory_kind": "note"}, lambda c: c.memory_kind == "note"),
        ({"delivery_policy": "always"}, lambda c: c.effective_delivery_policy == "always"),
        ({"delivery_policy": "retrieved"}, lambda c: c.effective_delivery_policy == "retrieved"),
        ({"review_state": "rejected"}, lambda c: c.review_state == "rejected"),
        ({"review_state": "pending"}, lambda c: c.review_state == "pending"),
        ({"scope": "global"}, lambda c: c.namespace == ""),
        ({"scope": "project:payments"}, lambda c: c.namespace == "project:payments"),
        ({"trust_tier": "3"}, lambda c: c.trust_tier == 3),
        ({"trust_tier": "1"}, lambda c: c.trust_tier == 1),
        ({"lifecycle": "superseded"}, lambda c: lifecycle_state(c) == "superseded"),
        ({"lifecycle": "expired"}, lambda c: lifecycle_state(c) == "expired"),
        ({"lifecycle": "active"}, lambda c: lifecycle_state(c) == "active"),
        (
            {"trust_tier": "3", "scope": "project:website", "lifecycle": "active"},
            lambda c: c.trust_tier == 3 and c.namespace == "project:website" and lifecycle_state(c) == "active",
        ),
        ({"memory_kind": "any", "review_state": ""}, lambda c: True),
    ],
    ids=lambda v: "&".join(f"{k}={x}" for k, x in v.items()) if isinstance(v, dict) else "",
)
def test_every_filter_keeps_exactly_the_matching_rows(console: Console, deployment: Deployment, params, check) -> None:
    items = all_items(console, **params)
    expected = {c.id for c in deployment.store.list_chunks() if check(c)}
    assert expected, f"the demo store has no row for {params}: the test would prove nothing"
    assert {i["id"] for i in items} == expected


def test_search_finds_rows_of_every_state_and_lists_pending_first(console: Console, deployment: Deployment) -> None:
    items = all_items(console, q="deploy window")
    texts = [i["content"] for i in items]
    assert texts and all("deploy" in t.lower() or "window" in t.lower() for t in texts)
    # the search reads every row, deliverable or not: the rejected and the expired rows are found
    assert {"rejected"} <= {i["review_state"] for i in items}
    assert "expired" in {i["lifecycle"] for i in items}
    states = [REVIEW_ORDER.index(i["review_state"]) for i in items]
    assert states == sorted(states)
    scoped = all_items(console, q="deploy window", scope="project:payments")
    assert scoped and {i["namespace"] for i in scoped} == {"project:payments"}
    assert all_items(console, q="zzzz-no-such-word") == []


def test_pages_walk_the_whole_list_without_gaps_or_repeats(console: Console) -> None:
    whole = [i["id"] for i in all_items(console)]
    seen, offset = [], 0
    while offset is not None:
        r = console.get("/api/memory/chunks", params={"limit": "3", "offset": str(offset)})
        body = r.json()
        assert body["limit"] == 3 and body["offset"] == offset
        assert len(body["items"]) <= 3
        seen += [i["id"] for i in body["items"]]
        offset = body["next_offset"]
    assert seen == whole
    past = console.get("/api/memory/chunks", params={"offset": "1000"}).json()
    assert past["items"] == [] and past["next_offset"] is None


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({"limit": "0"}, "limit", ["from 1 to 500", "got 0"]),
        ({"limit": "501"}, "limit", ["from 1 to 500", "got 501"]),
        ({"limit": "ten"}, "limit", ["whole number", "'ten'"]),
        ({"offset": "-1"}, "offset", [">= 0", "got -1"]),
        ({"offset": "1.5"}, "offset", ["whole number", "'1.5'"]),
        ({"memory_kind": "memo"}, "memory_kind", ["'memo' is not one of", "fact", "note"]),
        ({"delivery_policy": "sometimes"}, "delivery_policy", ["'sometimes'", "always"]),
        ({"review_state": "maybe"}, "review_state", ["'maybe'", "confirmed, pending, rejected"]),
        ({"trust_tier": "4"}, "trust_tier", ["'4' is not one of 1, 2, 3"]),
        ({"lifecycle": "zombie"}, "lifecycle", ["'zombie'", "superseded"]),
        ({"scope": "team:x"}, "scope", ["'team:x' is not a scope", "'global' or 'any'"]),
    ],
)
def test_bad_filters_and_pagination_are_refused_by_name(console: Console, params, field, words) -> None:
    refused(console.get("/api/memory/chunks", params=params), 400, field, *words)


# ---------------------------------------------------------------------------- GET /api/memory/chunks/{id}


def test_one_memory_with_its_supersession_chain(console: Console, deployment: Deployment) -> None:
    old = find(deployment, "The database migration tool is Flyway")
    body = console.get(f"/api/memory/chunks/{old.id}").json()
    assert body["memory"]["id"] == old.id and body["memory"]["lifecycle"] == "superseded"
    assert [c["id"] for c in body["chain"]] == [old.id, old.superseded_by]
    assert body["chain"][-1]["content"].startswith("The database migration tool is Alembic")
    current = console.get(f"/api/memory/chunks/{old.superseded_by}").json()
    assert [c["id"] for c in current["chain"]] == [old.superseded_by]


@pytest.mark.parametrize("bad", ["99999", "abc", "0"])
def test_an_unknown_memory_id_is_a_404_naming_it(console: Console, bad: str) -> None:
    refused(console.get(f"/api/memory/chunks/{bad}"), 404, "id", f"no memory with id {bad!r}")


# ---------------------------------------------------------------------------- POST .../review


@pytest.mark.parametrize("state", sorted(REVIEW_STATES))
def test_review_sets_the_state_in_the_store(console: Console, deployment: Deployment, state: str) -> None:
    row = find(deployment, "Deploys that skip the canary")
    r = console.post(f"/api/memory/chunks/{row.id}/review", json={"state": state})
    assert r.status_code == 200, r.text
    assert r.json()["memory"]["review_state"] == state
    assert deployment.store.get(row.id).review_state == state


def test_review_refusals_name_the_field_and_change_nothing(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Deploys that skip the canary")
    url = f"/api/memory/chunks/{row.id}/review"
    refused(console.post(url, json={"state": "maybe"}), 400, "state", "'maybe' is not one of confirmed, pending, rejected")
    refused(console.post(url, json={"state": 1}), 400, "state", "1 is not one of")
    refused(console.post(url, json={}), 400, "state", "required")
    refused(console.post(url, json={"state": "confirmed", "by": "me"}), 400, "by", "unknown field", "state")
    refused(console.post(url, json=["confirmed"]), 400, "body", "expected a JSON object, got list")
    refused(console.post(url, content=b"{state", headers={"Content-Type": "application/json"}), 400, "body", "not valid JSON")
    refused(console.post(url, content=b"", headers={"Content-Type": "application/json"}), 400, "body", "empty")
    refused(console.post(url, content=b"state=confirmed", headers={"Content-Type": "text/plain"}), 415, "Content-Type", "application/json")
    huge = b'{"state": "' + b"x" * (1 << 20) + b'"}'
    refused(console.post(url, content=huge, headers={"Content-Type": "application/json"}), 413, "body", "bytes")
    refused(console.post("/api/memory/chunks/99999/review", json={"state": "confirmed"}), 404, "id", "'99999'")
    assert deployment.store.get(row.id).review_state == "pending"


# ---------------------------------------------------------------------------- POST .../supersede


def test_supersede_writes_an_operator_row_and_chains_the_old_one(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Replica lag spikes")
    r = console.post(f"/api/memory/chunks/{row.id}/supersede", json={"content": "Replica lag spikes above 5 s; page the DBA."})
    assert r.status_code == 201, r.text
    body = r.json()
    new = body["new"]
    assert new["content"] == "Replica lag spikes above 5 s; page the DBA."
    assert new["source_type"] == "operator" and new["review_state"] == "confirmed" and new["source"] == "contextplane console"
    assert new["namespace"] == row.namespace and new["memory_kind"] == row.memory_kind  # inherited (D7)
    assert [c["id"] for c in body["chain"]] == [row.id, new["id"]]
    old = deployment.store.get(row.id)
    assert old.superseded_by == new["id"] and not old.is_deliverable()
    # the old row is no longer valid: superseding it again names the row to supersede instead
    again = console.post(f"/api/memory/chunks/{row.id}/supersede", json={"content": "again"})
    refused(again, 409, "id", "already superseded", f"supersede {new['id']} instead")


def test_supersede_keeps_given_provenance(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Vendor doc: the CDN purge")
    r = console.post(
        f"/api/memory/chunks/{row.id}/supersede",
        json={"content": "Vendor doc v2: 20 requests per minute.", "source_type": "ingest", "source": "cdn-v2.pdf"},
    )
    assert r.status_code == 201
    assert r.json()["new"]["source_type"] == "ingest" and r.json()["new"]["review_state"] == "pending"


def test_supersede_takes_an_event_time_and_refuses_a_naive_one(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Replica lag spikes")
    url = f"/api/memory/chunks/{row.id}/supersede"
    refused(console.post(url, json={"content": "x", "occurred_at": "2026-11-02"}), 400, "occurred_at", "no timezone")
    assert deployment.store.get(row.id).superseded_by is None
    r = console.post(url, json={"content": "Replica lag spiked on Monday.", "occurred_at": "2026-11-02T09:00:00+01:00"})
    assert r.status_code == 201, r.text
    assert r.json()["new"]["occurred_at"] == "2026-11-02T08:00:00.000000Z"
    assert deployment.store.get(r.json()["new"]["id"]).occurred_at.isoformat() == "2026-11-02T08:00:00+00:00"


def test_supersede_refusals(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Replica lag spikes")
    url = f"/api/memory/chunks/{row.id}/supersede"
    refused(console.post(url, json={}), 400, "content", "required")
    refused(console.post(url, json={"content": "   "}), 400, "content", "required")
    refused(console.post(url, json={"content": 3}), 400, "content", "required")
    refused(console.post(url, json={"content": "x", "memory_kind": "fact"}), 400, "memory_kind", "unknown field")
    refused(console.post(url, json={"content": "x", "source": 7}), 400, "source", "expected text, got int")
    refused(console.post("/api/memory/chunks/99999/supersede", json={"content": "x"}), 404, "id")
    assert deployment.store.get(row.id).superseded_by is None


# ---------------------------------------------------------------------------- POST .../expiry


def test_expiry_is_set_and_cleared(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Priya Raman approves")
    url = f"/api/memory/chunks/{row.id}/expiry"
    r = console.post(url, json={"expires_at": "2030-01-31T12:00:00+02:00"})
    assert r.status_code == 200, r.text
    assert r.json()["memory"]["expires_at"].startswith("2030-01-31T10:00:00")
    assert deployment.store.get(row.id).expires_at.isoformat().startswith("2030-01-31T10:00:00")
    past = console.post(url, json={"expires_at": "2020-01-01T00:00:00Z"}).json()["memory"]
    assert past["lifecycle"] == "expired"
    cleared = console.post(url, json={"expires_at": None}).json()["memory"]
    assert cleared["expires_at"] is None and cleared["lifecycle"] == "active"
    assert deployment.store.get(row.id).expires_at is None


def test_expiry_refusals(console: Console, deployment: Deployment) -> None:
    row = find(deployment, "Priya Raman approves")
    url = f"/api/memory/chunks/{row.id}/expiry"
    refused(console.post(url, json={"expires_at": "tomorrow"}), 400, "expires_at", "not an ISO-8601 timestamp")
    refused(console.post(url, json={"expires_at": "2030-01-01T00:00:00"}), 400, "expires_at", "no timezone")
    refused(console.post(url, json={"expires_at": 1893456000}), 400, "expires_at", "expected ISO-8601 text or null")
    refused(console.post(url, json={}), 400, "expires_at", "required")
    refused(console.post("/api/memory/chunks/99999/expiry", json={"expires_at": None}), 404, "id")
    assert deployment.store.get(row.id).expires_at is None


# ---------------------------------------------------------------------------- POST /api/memory/review


def test_bulk_confirm_and_reject(console: Console, deployment: Deployment) -> None:
    pending = [c.id for c in deployment.store.list_chunks(review_state="pending")]
    assert len(pending) >= 3
    r = console.post("/api/memory/review", json={"ids": pending[:2], "state": "confirmed"})
    assert r.status_code == 200, r.text
    assert [c["id"] for c in r.json()["updated"]] == pending[:2]
    assert [deployment.store.get(i).review_state for i in pending[:2]] == ["confirmed", "confirmed"]
    r = console.post("/api/memory/review", json={"ids": [pending[2], pending[2]], "state": "rejected"})
    assert [c["id"] for c in r.json()["updated"]] == [pending[2]]  # a repeated id is reviewed once
    assert deployment.store.get(pending[2]).review_state == "rejected"


def test_bulk_refusals_change_nothing(console: Console, deployment: Deployment) -> None:
    pending = [c.id for c in deployment.store.list_chunks(review_state="pending")]
    refused(console.post("/api/memory/review", json={"ids": [pending[0], "99999"], "state": "confirmed"}), 404, "ids", "'99999'", "nothing was changed")
    refused(console.post("/api/memory/review", json={"ids": pending, "state": "pending"}), 400, "state", "'pending' is not one of confirmed, rejected")
    refused(console.post("/api/memory/review", json={"ids": [], "state": "confirmed"}), 400, "ids", "at least one")
    refused(console.post("/api/memory/review", json={"ids": "1,2", "state": "confirmed"}), 400, "ids", "list of memory ids")
    refused(console.post("/api/memory/review", json={"ids": [1, 2], "state": "confirmed"}), 400, "ids", "list of memory ids")
    refused(console.post("/api/memory/review", json={"ids": pending}), 400, "state", "required")
    refused(console.post("/api/memory/review", json={"ids": ["1"] * 1001, "state": "confirmed"}), 400, "ids", "at most 1000")
    assert [deployment.store.get(i).review_state for i in pending] == ["pending"] * len(pending)


# ---------------------------------------------------------------------------- snapshots and the log


def test_sessions_and_their_calls(console: Console) -> None:
    sessions = console.get("/api/snapshots/sessions").json()["sessions"]
    assert [(s["session_id"], s["snapshots"]) for s in sessions] == [(SESSION, 6)]
    calls = console.get("/api/snapshots", params={"session": SESSION}).json()["snapshots"]
    assert [(c["turn_index"], c["call_index"]) for c in calls] == [(t, 0) for t in range(1, 7)]
    assert [c["incognito"] for c in calls] == [False, False, True, False, False, False]
    assert all(c["stripped"] == 1 for c in calls)
    assert len(console.get("/api/snapshots", params={"limit": "2"}).json()["snapshots"]) == 2
    assert console.get("/api/snapshots", params={"session": "nobody"}).json()["snapshots"] == []
    refused(console.get("/api/snapshots", params={"limit": "0"}), 400, "limit", "from 1 to 10000")


def test_a_recorded_call_with_sections_budget_and_shed_steps(console: Console, deployment: Deployment) -> None:
    body = console.get("/api/snapshots/call", params={"session": SESSION, "turn": "5", "call": "0"}).json()
    assert body["incognito"] is False and body["notes"] == []
    prefix = body["stable_prefix"]["sections"]
    assert [p["name"] for p in prefix][:2] == ["identity", "operating_model"]
    assert all(p["text"] is not None and len(p["text"]) == p["chars"] for p in prefix)
    assert "Ferris" in prefix[0]["text"]
    projected = body["projected_context"]
    assert projected["query"] == "When is the website deploy window?"
    assert "<injected_memory>" in projected["text"]
    # the 16k-token model sheds: retrieved rows first, then the digest (ADR D6 order)
    assert [s["section"] for s in projected["overflow"]][:2] == ["retrieved", "prior_sessions"]
    assert projected["budget_chars"] == 16_000 and projected["used_chars"] <= 16_000
    budget = {row["name"]: row for row in projected["budget"]}
    assert budget["retrieved"]["truncated"] is True and budget["working_state"]["kept"] == 1
    memory = {s["label"]: s for s in projected["sections"] if s["memory_ids"]}
    always = find(deployment, "The website deploy window is Tuesday")
    assert always.id in memory["always_on"]["ids"]
    assert body["stripped_frames"] == [
        {"message_id": "v1-frame-1", "chars": 68, "sha256": body["stripped_frames"][0]["sha256"]}
    ]
    assert body["injection"]["delivered"]["always_on"] == [always.id]


def test_an_incognito_call_shows_that_nothing_was_recorded(console: Console) -> None:
    body = console.get("/api/snapshots/call", params={"session": SESSION, "turn": "3"}).json()
    assert body["incognito"] is True and body["recorded"] == "incognito: nothing recorded"
    assert not {"projected_context", "stable_prefix", "stripped_frames"} & set(body)


def test_bad_call_keys_are_refused_by_name(console: Console) -> None:
    refused(console.get("/api/snapshots/call", params={"turn": "1"}), 400, "session", "required")
    refused(console.get("/api/snapshots/call", params={"session": SESSION}), 400, "turn", "required")
    refused(console.get("/api/snapshots/call", params={"session": SESSION, "turn": "one"}), 400, "turn", "'one'")
    refused(console.get("/api/snapshots/call", params={"session": SESSION, "turn": "1", "call": "-2"}), 400, "call", ">= 0")
    refused(console.get("/api/snapshots/call", params={"session": SESSION, "turn": "99"}), 404, "call", "turn 99 call 0")
    refused(
        console.get("/api/snapshots/call", params={"session": SESSION, "turn": "1", "call": "1"}),
        404, "call", "calls recorded for that turn: 0",
    )


def test_the_injection_log(console: Console, deployment: Deployment) -> None:
    rows = console.get("/api/injections", params={"session": SESSION}).json()["rows"]
    assert [r["turn_index"] for r in rows] == [1, 2, 4, 5, 6]  # the incognito turn wrote none
    stored = deployment.backend.injections.rows(SESSION)
    assert [r["delivered"] for r in rows] == [r.delivered for r in stored]
    assert rows[0]["delivered"]["working_state"][0] == "goal"
    assert len(console.get("/api/injections", params={"limit": "1"}).json()["rows"]) == 1
    refused(console.get("/api/injections", params={"limit": "x"}), 400, "limit", "'x'")


# ---------------------------------------------------------------------------- POST /api/preview


def _counts(d: Deployment) -> tuple[int, int]:
    return len(d.backend.injections.rows()), d.backend.snapshots.count()


def test_preview_composes_with_the_turns_options_and_records_nothing(console: Console, deployment: Deployment) -> None:
    before = _counts(deployment)
    body = console.post("/api/preview", json={"query": "When is the website deploy window?"}).json()
    summary = body["summary"]
    assert summary["within_budget"] is True and summary["used_chars"] == body["projected_context"]["used_chars"]
    names = [row["name"] for row in body["budget"]]
    assert names == ["working_state", "always_on", "skills", "prior_sessions", "retrieved"]
    assert body["projected_context"]["session_id"] == "console-preview"
    small = console.post("/api/preview", json={"query": "When is the website deploy window?", "context_window": 16_000}).json()
    assert small["projected_context"]["budget_chars"] == 16_000
    assert [s["section"] for s in small["overflow"]][:1] == ["retrieved"]
    incognito = console.post("/api/preview", json={"query": "deploy", "incognito": True}).json()
    suppressed = {row["name"]: row["suppressed"] for row in incognito["budget"]}
    assert suppressed["always_on"] == "incognito" and suppressed["retrieved"] == "incognito"
    goal = console.post("/api/preview", json={"query": "deploy", "goal_turn": True}).json()
    assert {row["name"]: row["suppressed"] for row in goal["budget"]}["prior_sessions"] == "goal_turn"
    unbounded = console.post("/api/preview", json={"query": "deploy", "budget_tokens": 0}).json()
    assert unbounded["projected_context"]["budget_chars"] is None and unbounded["overflow"] == []
    payments = console.post("/api/preview", json={"query": "deploy window", "project": "payments"}).json()
    assert "Monday" in payments["projected_context"]["text"]
    assert _counts(deployment) == before


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({}, "query", ["required"]),
        ({"query": "  "}, "query", ["required"]),
        ({"query": 5}, "query", ["expected text, got int"]),
        ({"query": "q", "incognito": "yes"}, "incognito", ["true or false", "'yes'"]),
        ({"query": "q", "context_window": 0}, "context_window", [">= 1", "0"]),
        ({"query": "q", "budget_tokens": -1}, "budget_tokens", [">= 0"]),
        ({"query": "q", "budget_tokens": 1.5}, "budget_tokens", ["whole number"]),
        ({"query": "q", "project": " web"}, "project", ["not a project id"]),
        ({"query": "q", "tools": ["x"]}, "tools", ["unknown field", "query"]),
    ],
)
def test_preview_refusals(console: Console, body, field, words) -> None:
    refused(console.post("/api/preview", json=body), 400, field, *words)


def test_each_call_shows_its_cacheable_prefix(console: Console) -> None:
    """Issue 24: the inspector says what a provider's prompt cache could reuse of each call
    (stable prefix + history), and what broke it, as ``contextplane snapshots`` does."""
    calls = console.get("/api/snapshots", params={"session": SESSION}).json()["snapshots"]
    lines = [c["cacheable_prefix"] for c in calls]
    assert lines[0].endswith(" chars, the session's first call")
    assert all(line.endswith(" chars, unchanged since the previous call") for line in lines[1:]), lines
    body = console.get("/api/snapshots/call", params={"session": SESSION, "turn": "5", "call": "0"}).json()
    before = console.get("/api/snapshots/call", params={"session": SESSION, "turn": "4", "call": "0"}).json()
    cache = body["cacheable_prefix"]
    assert cache["unchanged"] and cache["shared_chars"] == before["cacheable_prefix"]["chars"] < cache["chars"]
    assert cache["line"] == lines[4] and cache["broken_by_sections"] == [] and len(cache["sha256"]) == 64
    page = console.get("/call", params={"session": SESSION, "turn": "5", "call": "0"})
    assert page.status_code == 200 and '<p id="cacheable-prefix"' in page.text and lines[4] in page.text
