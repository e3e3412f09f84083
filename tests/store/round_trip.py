"""A store holding a memory of every shape, and the public reads two stores must answer alike:
shared by the export/import round trips of every backend (tests/store, tests/postgres)."""

from __future__ import annotations

import json
from typing import Any

from contextplane.memory.model import MemoryChunk
from contextplane.store.jsonl import export_lines

#: ``list_chunks`` / ``count_chunks`` filters the round trips compare (each a public read).
FILTERS: tuple[dict[str, Any], ...] = (
    {},
    {"deliverable": True},
    {"memory_kind": "fact"},
    {"review_state": "pending"},
    {"review_state": "rejected"},
    {"delivery_policy": "always"},
    {"delivery_policy": "retrieved"},
    {"namespace": "project:web"},
    {"namespaces": ["", "session:s1"]},
    {"occurred_after": "2023-05-01T00:00:00Z", "occurred_before": "2023-05-20T00:00:00Z"},
    {"limit": 3, "offset": 2},
)
#: Search questions whose answers are spread over the shapes (a superseded chain, an expired
#: row, an event, unicode).
QUERIES: tuple[str, ...] = (
    "who approves deploys",
    "promo code",
    "support group",
    "deploy window",
    "unicode text",
    "database fact",
)


def seed(store: Any) -> dict[str, str]:
    """Rows of every shape, by name: kinds, policies, review states (as written and as reviewed
    later, by someone), three scopes, expiry (past, future, set later), a supersession chain of
    three, an invalidation with a reason, event times, free-text attributes, unicode, and a
    purged row (a gap in the ids)."""
    add = store.add_chunk
    ids: dict[str, str] = {}
    ids["window"] = add(
        "Deploy window Tuesday", memory_kind="fact", delivery_policy="always", namespace="project:web",
        heading="Deploys", source="runbook.md", subject="deploy-window", epoch="2026Q4", source_type="operator",
    )
    ids["profile"] = add("Prefers short answers", memory_kind="profile", review_state="pending", source_type="extracted")
    ids["v1"] = add("Priya approves deploys", memory_kind="fact", subject="approver", source_type="operator")
    ids["v2"] = store.supersede(ids["v1"], "Sam approves deploys")
    ids["v3"] = store.supersede(ids["v2"], "Lee approves deploys")
    ids["rejected"] = add("A rejected note", memory_kind="note", source_type="agent", review_state="rejected")
    ids["expired"] = add("Expired promo code KIWI20", expires_at="2020-01-01T00:00:00Z", domain="hot")
    ids["later"] = add("Expires later: the staging freeze", expires_in_days=30, namespace="session:s1")
    ids["wrong"] = add("Wrong fact about the database", memory_kind="fact")
    store.invalidate_chunk(ids["wrong"], reason="it was wrong", by="alice")
    doomed = add("my address is 1 Main St")
    store.invalidate_chunk(doomed, reason="personal data")
    assert store.purge(ids=[doomed]) == 1
    ids["said"] = add(
        "Caroline went to the LGBTQ support group", memory_kind="episode", source_type="conversation",
        namespace="session:s1", occurred_at="2023-05-08T13:56:00Z",
    )
    ids["said2"] = add(
        "Melanie painted a sunrise after the support group", memory_kind="episode",
        source_type="conversation", namespace="session:s1", occurred_at="2023-05-25T09:00:00+02:00",
    )
    ids["confirmed"] = add("Uses PostgreSQL 16 in production", memory_kind="fact", source_type="extracted")
    store.set_review_state(ids["confirmed"], "confirmed", by="alice")
    ids["refused"] = add("The database is MySQL", memory_kind="fact", source_type="extracted")
    store.set_review_state(ids["refused"], "rejected", by="bob")
    store.set_expires_at(ids["profile"], "2031-01-01T00:00:00Z", by="alice")
    ids["unicode"] = add("Ünïcode ✓ text\nwith two lines and a NUL\x00", memory_kind="reference", source_type="ingest")
    return ids


def export_text(store: Any) -> str:
    return "".join(line + "\n" for line in export_lines(store))


def rows_of(text: str) -> list[dict[str, Any]]:
    """The rows of an export (the header left out)."""
    return [json.loads(line) for line in text.splitlines()[1:]]


def same_reads(a: Any, b: Any, *, search: str | None = "exact") -> None:
    """``b`` answers every compared public read as ``a`` does: the rows of each filter, with
    every attribute (``MemoryChunk`` equality), their counts, ``get`` of each id, and each
    question's hits: ``search="exact"``, in order and with their relevance (two stores of one
    backend holding the same rows rank alike); ``"top"``, the same first hit (another backend
    ranks its own way); None: searches not compared."""
    for filters in FILTERS:
        listed = a.list_chunks(**filters)
        assert b.list_chunks(**filters) == listed, filters
        if "limit" not in filters and hasattr(a, "count_chunks") and hasattr(b, "count_chunks"):
            assert b.count_chunks(**filters) == a.count_chunks(**filters) == len(listed), filters
    for chunk in a.list_chunks():
        assert b.get(chunk.id) == chunk
    if search is None:
        return
    for query in QUERIES:
        for options in ({}, {"include_superseded": True}, {"namespaces": ["session:s1"]}):
            left, right = a.search(query, 5, **options), b.search(query, 5, **options)
            if search == "exact":
                assert [(h.chunk, h.rank, h.relevance) for h in right] == [
                    (h.chunk, h.rank, h.relevance) for h in left
                ], (query, options)
            else:
                assert [h.chunk for h in right[:1]] == [h.chunk for h in left[:1]], (query, options)


def restored_history(store: Any, chunk: MemoryChunk) -> None:
    """A restored row's history: one ``created`` event saying so, with the row's state."""
    events = store.history(chunk.id)
    assert [e.event for e in events] == ["created"], events
    assert "restored from an export" in events[0].detail["note"]
    assert events[0].invalidated_at == chunk.invalidated_at
    assert events[0].review_state == chunk.review_state
    assert events[0].at == events[0].at.fromisoformat(events[0].detail["restored_at"])
