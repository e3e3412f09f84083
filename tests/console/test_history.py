"""A row's lifecycle history and its supersession chain both ways, in the API and the row view,
and who the history says made the console's changes (its reviewer, never an empty ``by``)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from contextplane import PluginHost
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.testing.memory import InMemoryBackend
from contextplane_console import ConsoleServer, create_app
from tests.console.conftest import Console, Deployment, start_console
from tests.console.test_api import find, refused
from tests.store.helpers import make_v1_store

HX = {"HX-Request": "true"}


def ids(rows: list[dict]) -> list[str]:
    return [r["id"] for r in rows]


def test_the_detail_has_the_history_and_the_chain_both_ways(console: Console, deployment: Deployment) -> None:
    old, new = find(deployment, "The database migration tool is Flyway"), find(deployment, "The database migration tool is Alembic")
    body = console.get(f"/api/memory/chunks/{new.id}").json()
    assert ids(body["supersedes"]) == [old.id] and body["supersedes"][0]["superseded_by"] == new.id
    assert ids(body["chain"]) == [new.id]
    assert body["history_kept"] is True
    created = body["history"][0]
    assert (created["event"], created["by"], created["detail"]) == ("created", "operator", {"supersedes": old.id})
    back = console.get(f"/api/memory/chunks/{old.id}").json()
    assert ids(back["chain"]) == [old.id, new.id] and back["supersedes"] == []
    assert [(e["event"], e["change"]) for e in back["history"]] == [
        ("created", "created"),
        ("superseded", f"superseded by {new.id}"),
    ]
    assert back["history"][1]["detail"] == {"by": new.id}


def test_a_chain_of_three_reads_the_same_from_either_end(console: Console, deployment: Deployment) -> None:
    first, second = find(deployment, "The database migration tool is Flyway"), find(deployment, "The database migration tool is Alembic")
    r = console.post(f"/api/memory/chunks/{second.id}/supersede", {"content": "The migration tool is Alembic 1.13."})
    assert r.status_code == 201, r.text
    third = r.json()["new"]["id"]
    newest = console.get(f"/api/memory/chunks/{third}").json()
    assert ids(newest["supersedes"]) == [second.id, first.id]  # nearest first
    assert [r["superseded_by"] for r in newest["supersedes"]] == [third, second.id]
    assert ids(console.get(f"/api/memory/chunks/{first.id}").json()["chain"]) == [first.id, second.id, third]
    middle = console.get(f"/api/memory/chunks/{second.id}").json()
    assert ids(middle["supersedes"]) == [first.id] and ids(middle["chain"]) == [second.id, third]


def test_a_same_subject_write_is_an_earlier_version_too(console: Console, deployment: Deployment) -> None:
    """Consolidation on write supersedes a row of the same subject, scope and kind; the new
    row's created event names it, so the reverse chain finds it."""
    head = find(deployment, "The database migration tool is Alembic")
    outcome = deployment.store.add_chunk(
        "The database migration tool is sqitch now.", "fact", "operator",
        namespace=head.namespace, memory_kind=head.memory_kind, subject=head.subject,
    )
    assert outcome.outcome == "superseded", outcome.message
    body = console.get(f"/api/memory/chunks/{outcome.id}").json()
    assert ids(body["supersedes"])[0] == head.id
    assert body["history"][0]["detail"]["superseded"] == [head.id]


def test_console_reviews_and_expiry_changes_record_the_reviewer(console: Console, deployment: Deployment) -> None:
    one, two, three = (find(deployment, s) for s in ("Runbook excerpt", "Vendor doc: the CDN purge", "Replica lag"))
    assert console.post(f"/api/memory/chunks/{one.id}/review", {"state": "confirmed"}).status_code == 200
    assert console.post(f"/api/memory/chunks/{one.id}/expiry", {"expires_at": "2030-01-01T00:00:00Z"}).status_code == 200
    assert console.post(f"/api/memory/chunks/{one.id}/expiry", {"expires_at": None}).status_code == 200
    assert console.post("/api/memory/review", {"ids": [two.id], "state": "rejected"}).status_code == 200
    assert console.post(f"/memory/{three.id}/review", data={"state": "rejected", "view": "row"}, headers=HX).status_code == 200
    events = deployment.store.history(one.id)
    assert [(e.event, e.actor) for e in events[1:]] == [("review", "console"), ("expiry", "console"), ("expiry", "console")]
    assert [e.describe().split(" ", 2)[2] for e in events[1:]] == [
        "review state set to confirmed (by console)",
        "expiry set to 2030-01-01T00:00:00.000000Z (by console)",
        "expiry cleared (by console)",
    ]
    assert deployment.store.history(two.id)[-1].actor == "console"
    assert deployment.store.history(three.id)[-1].actor == "console"
    shown = console.get(f"/api/memory/chunks/{one.id}/history").json()["events"]
    assert [(e["event"], e["by"], e["change"]) for e in shown[1:]] == [
        ("review", "console", "review state set to confirmed"),
        ("expiry", "console", "expiry set to 2030-01-01T00:00:00.000000Z"),
        ("expiry", "console", "expiry cleared"),
    ]


def test_a_configured_reviewer_is_recorded(deployment: Deployment) -> None:
    server, csrf = start_console(deployment, reviewer="  priya  ")
    try:
        row = find(deployment, "Runbook excerpt")
        r = httpx.post(
            f"{server.url}/api/memory/chunks/{row.id}/review",
            json={"state": "rejected"},
            headers={"X-CSRF-Token": csrf, "Origin": server.url},
        )
        assert r.status_code == 200, r.text
        assert r.json()["history"][-1]["by"] == "priya"
        assert deployment.store.history(row.id)[-1].actor == "priya"
    finally:
        server.stop()


@pytest.mark.parametrize("bad", ["", "   ", None])
def test_an_empty_reviewer_is_refused(deployment: Deployment, bad: object) -> None:
    with pytest.raises(ValueError, match="reviewer: who the history records"):
        create_app(deployment.backend, deployment.host, reviewer=bad)  # type: ignore[arg-type]


def test_a_purged_rows_history_is_still_served(console: Console, deployment: Deployment) -> None:
    expired = find(deployment, "Temporary: the deploy window moved")
    assert deployment.store.purge() >= 1
    refused(
        console.get(f"/api/memory/chunks/{expired.id}"), 404, "id",
        f"no memory with id '{expired.id}': it was purged at ", f"GET /api/memory/chunks/{expired.id}/history",
    )
    assert "it was purged at" in console.get(f"/memory/{expired.id}").text
    body = console.get(f"/api/memory/chunks/{expired.id}/history").json()
    assert body["lifecycle"] == "purged" and body["memory_id"] == expired.id
    assert [e["event"] for e in body["events"]] == ["created", "expiry", "purged"]
    assert body["events"][-1]["change"] == "purged (row deleted)"


@pytest.mark.parametrize("bad", ["99999", "abc", "0"])
def test_the_history_of_an_unknown_id_is_a_404(console: Console, bad: str) -> None:
    refused(console.get(f"/api/memory/chunks/{bad}/history"), 404, "id", f"no memory with id '{bad}'")


def test_the_row_view_shows_the_history_and_both_directions(console: Console, deployment: Deployment) -> None:
    old, new = find(deployment, "The database migration tool is Flyway"), find(deployment, "The database migration tool is Alembic")
    page = console.get(f"/memory/{new.id}").text
    assert '<ol class="chain" id="supersedes">' in page and f'<li data-id="{old.id}">' in page
    assert f'supersedes <a class="memory-id" href="/memory/{old.id}">{old.id}</a>' in page
    assert 'Not superseded: this is the current version.' in page
    back = console.get(f"/memory/{old.id}").text
    assert 'None: this row replaced no other' in back
    assert '<tr data-event="superseded"' in back and f"superseded by {new.id}" in back
    assert '<td class="by">operator</td>' in back


def test_a_store_whose_history_names_no_predecessor_shows_none() -> None:
    """The kit's in-memory backend keeps history but writes no "supersedes" detail: the
    forward chain still works (it is on the rows), the reverse one is empty, not guessed."""
    backend = InMemoryBackend()
    old = backend.memories.add_chunk("the tool is Flyway", "fact", "operator")
    new = backend.memories.supersede(old, "the tool is Alembic", source_type="operator")
    server = ConsoleServer(create_app(backend, PluginHost()), "127.0.0.1", 0).start()
    try:
        body = httpx.get(f"{server.url}/api/memory/chunks/{new}").json()
        assert body["history_kept"] is True and body["supersedes"] == []
        assert ids(httpx.get(f"{server.url}/api/memory/chunks/{old}").json()["chain"]) == [old, new]
    finally:
        server.stop()


def test_every_event_is_described_and_a_duplicate_write_shows_as_consolidated(
    console: Console, deployment: Deployment
) -> None:
    import attrs

    from contextplane.memory.history import EVENT_NAMES, HistoryEvent
    from contextplane.memory.model import utc_now
    from contextplane_console.lineage import change

    row = find(deployment, "Priya Raman approves")
    again = deployment.store.add_chunk(row.content, row.domain, row.source_type, namespace=row.namespace)
    assert again.outcome == "duplicate" and again.id == row.id
    last = console.get(f"/api/memory/chunks/{row.id}/history").json()["events"][-1]
    assert (last["event"], last["change"]) == ("consolidated", "an exact duplicate write returned this row")
    base = HistoryEvent(seq=1, chunk_id="1", at=utc_now(), event="created")
    described = {name: change(attrs.evolve(base, event=name)) for name in EVENT_NAMES}
    assert described["migrated"] == "present at the migration (its history starts here)"
    assert described["purged"] == "purged (row deleted)"
    assert described["expiry"] == "expiry cleared"
    assert len(set(described.values())) == len(EVENT_NAMES)  # no event borrows another's words


def test_a_migrated_stores_history_starts_at_the_migration(tmp_path: Path) -> None:
    """A version-1 store's rows have no event until they change (the migration writes none):
    the panel still shows where their history starts, and a change after it."""
    path = tmp_path / "v1.sqlite3"
    make_v1_store(path, [("Standup is at 09:30", "general", "operator"), ("Lunch is at noon", "general", "chat")])
    backend = SQLiteBackend(path)
    backend.memories.set_review_state("2", "rejected", by="sam")
    server = ConsoleServer(create_app(backend, PluginHost()), "127.0.0.1", 0).start()
    try:
        untouched = httpx.get(f"{server.url}/api/memory/chunks/1/history").json()["events"]
        assert [(e["seq"], e["event"], e["change"]) for e in untouched] == [
            (0, "migrated", "present at the migration (its history starts here)")
        ]
        changed = httpx.get(f"{server.url}/api/memory/chunks/2/history").json()["events"]
        assert [(e["event"], e["review_state"], e["by"]) for e in changed] == [
            ("migrated", "pending", ""),
            ("review", "rejected", "sam"),
        ]
        page = httpx.get(f"{server.url}/memory/1").text
        assert '<tr data-event="migrated"' in page and "present at the migration" in page
    finally:
        server.stop()
        backend.close()
