"""The memory browser's reads over the ``KnowledgeStore`` protocol alone: on the embedded store
and on the conformance kit's in-memory store, every filter and every page agrees with the
brute-force answer, including filters the protocol cannot push down (trust tier, lifecycle)
whose matches sit past many batches."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextplane import compose_projected_context, deliver, plugin_host_with
from contextplane.delivery import plain_projection_message
from contextplane.memory.model import utc_now
from contextplane.store.sqlite import SQLiteKnowledgeStore
from contextplane.testing.memory import InMemoryBackend, InMemoryKnowledgeStore
from contextplane_console import ConsoleServer, create_app
from contextplane_console.inspector import call_view
from contextplane_console.memories import REVIEW_ORDER, MemoryFilter, lifecycle_state, list_page
from contextplane_sections import always_on, working_state


def populate(store: Any) -> None:
    """400 rows: agent and ingested rows first, the operator rows (tier 3) only at the end,
    so a trust-tier filter must read past several doubling batches to find them."""
    rows = []
    for i in range(360):
        rows.append(
            {
                "content": f"row {i} about deploys" if i % 3 else f"row {i} about billing",
                "source_type": "extracted" if i % 2 else "ingest",
                "memory_kind": ("fact", "note", "reference")[i % 3],
                "namespace": ("", "project:a", "project:b")[i % 3],
            }
        )
    for i in range(360, 400):
        rows.append({"content": f"row {i} operator fact", "source_type": "operator", "memory_kind": "fact"})
    ids = store.add_chunks(rows)
    for i in ids[:30]:
        store.set_review_state(i, "rejected")
    for i in ids[30:60]:
        store.set_review_state(i, "confirmed")
    store.set_expires_at(ids[100], "2020-01-01T00:00:00Z")
    store.set_expires_at(ids[395], "2020-01-01T00:00:00Z")
    store.supersede(ids[200], "row 200, corrected")
    store.invalidate_chunk(ids[201], reason="wrong")


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    made = SQLiteKnowledgeStore(tmp_path / "m.sqlite3") if request.param == "sqlite" else InMemoryKnowledgeStore()
    populate(made)
    yield made
    made.close()


def brute(store: Any, flt: MemoryFilter) -> list[str]:
    now = utc_now()
    rows = [c for c in store.list_chunks() if flt.keeps(c, now)]
    rows.sort(key=lambda c: (REVIEW_ORDER.index(c.review_state), int(c.id)))
    return [c.id for c in rows]


def walk(store: Any, flt: MemoryFilter, limit: int) -> list[str]:
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = list_page(store, flt, offset, limit)
        assert len(page.items) <= limit
        seen += [c.id for c in page.items]
        offset = page.next_offset
    return seen


FILTERS = [
    MemoryFilter(),
    MemoryFilter(trust_tier=3),
    MemoryFilter(trust_tier=3, lifecycle="expired"),
    MemoryFilter(lifecycle="superseded"),
    MemoryFilter(lifecycle="invalidated"),
    MemoryFilter(lifecycle="active", review_state="rejected"),
    MemoryFilter(lifecycle="active", trust_tier=2),
    MemoryFilter(memory_kind="note", scope="project:a"),
    MemoryFilter(scope="", review_state="confirmed"),
    MemoryFilter(delivery_policy="retrieved", memory_kind="reference", trust_tier=1),
]


@pytest.mark.parametrize("flt", FILTERS, ids=lambda f: repr(f.as_params()))
def test_every_page_agrees_with_the_brute_force_answer(store: Any, flt: MemoryFilter) -> None:
    expected = brute(store, flt)
    assert expected, "a filter that matches nothing proves nothing"
    assert walk(store, flt, 7) == expected
    first = list_page(store, flt, 0, 5)
    assert [c.id for c in first.items] == expected[:5]
    assert first.next_offset == (5 if len(expected) > 5 else None)


def test_the_operator_rows_past_many_batches_are_found_on_the_first_page(store: Any) -> None:
    page = list_page(store, MemoryFilter(trust_tier=3), 0, 3)
    assert [c.content for c in page.items] == ["row 360 operator fact", "row 361 operator fact", "row 362 operator fact"]
    assert {c.review_state for c in page.items} == {"confirmed"}


def test_search_filters_its_matches_and_lists_pending_first(store: Any) -> None:
    page = list_page(store, MemoryFilter(query="billing"), 0, 500)
    assert page.items and all("billing" in c.content for c in page.items)
    order = [REVIEW_ORDER.index(c.review_state) for c in page.items]
    assert order == sorted(order) and len(set(order)) > 1
    scoped = list_page(store, MemoryFilter(query="billing", scope="", trust_tier=1), 0, 500)
    assert scoped.items and all(c.namespace == "" and c.trust_tier == 1 for c in scoped.items)
    assert {lifecycle_state(c) for c in list_page(store, MemoryFilter(query="row"), 0, 500).items} >= {"superseded"}


def test_the_inspector_says_what_a_backend_without_a_trajectory_cannot_show(tmp_path: Path) -> None:
    """The kit's in-memory backend keeps snapshots but no trajectory: the call still opens,
    with the sizes and ids, and a note in place of the text, budget table and shed steps."""
    backend = InMemoryBackend()
    backend.memories.add_chunk("Deploy window: Tuesday.", "hot", "operator")
    host = plugin_host_with([working_state, always_on])
    projection = compose_projected_context(
        "deploy?", backend.memories, None, {"goal": "ship"}, session_id="s", turn_index=1,
        budget_tokens=0, backend=backend, host=host,
    )
    deliver(projection, [], prefix="You are an agent.", call_index=0, wrap=plain_projection_message, host=host)
    view = call_view(backend, host, "s", 1, 0)
    assert view.projection is None and view.budget is None
    assert any("no trajectory entry" in n and "shed steps are not available" in n for n in view.notes)
    assert view.snapshot.delivered_ids["always_on"] == ("1",)
    with ConsoleServer(create_app(backend, host)) as server:
        import httpx

        page = httpx.get(f"{server.url}/call?session=s&turn=1&call=0").text
        assert "no trajectory entry for this call" in page and "Not recorded for this turn." in page
        assert 'href="/memory/1"' in page  # always_on ids are memory ids: linked
        listed = httpx.get(f"{server.url}/api/memory/chunks").json()["items"]
        assert [c["content"] for c in listed] == ["Deploy window: Tuesday."]


def test_filters_round_trip_through_their_parameters() -> None:
    for flt in [*FILTERS, MemoryFilter(query="a b", scope="session:x")]:
        assert MemoryFilter.from_params(flt.as_params()) == flt
    combos = itertools.product(["any", ""], ["global", "any"])
    for kind, scope in combos:
        parsed = MemoryFilter.from_params({"memory_kind": kind, "scope": scope})
        assert parsed.memory_kind is None and parsed.scope == ("" if scope == "global" else None)


@pytest.mark.parametrize("flt", FILTERS, ids=lambda f: repr(f.as_params()))
def test_a_deep_page_agrees_with_the_brute_force_answer(store: Any, flt: MemoryFilter) -> None:
    expected = brute(store, flt)
    for offset in (64, 300, len(expected) - 3):
        page = list_page(store, flt, max(0, offset), 50)
        assert [c.id for c in page.items] == expected[max(0, offset) : max(0, offset) + 50], offset


class CountingStore:
    """The store, counting its ``list_chunks`` reads (the only cost a deep page has)."""

    def __init__(self, store: Any) -> None:
        self.store, self.reads = store, []

    def list_chunks(self, **kw: Any) -> Any:
        self.reads.append((kw["review_state"], kw["limit"]))
        return self.store.list_chunks(**kw)


class OffsetStore(CountingStore):
    """A store that counts rows too (``count_chunks``), as the embedded and PostgreSQL ones do."""

    def list_chunks(self, **kw: Any) -> Any:
        self.reads.append((kw["review_state"], kw.get("offset", 0), kw["limit"]))
        return self.store.list_chunks(**kw)

    def count_chunks(self, **kw: Any) -> int:
        self.reads.append((kw["review_state"], "count"))
        return int(self.store.count_chunks(**kw))


def test_a_deep_page_is_read_at_its_place_when_the_store_counts(store: Any) -> None:
    """340 pending rows, then 30 confirmed (issue 23): offset 300 reads 40 pending rows from
    offset 300 and 11 confirmed ones, not the 300 rows before; offset 350 skips the pending
    rows by their count."""
    for flt in (MemoryFilter(), MemoryFilter(memory_kind="fact"), MemoryFilter(review_state="pending")):
        expected = brute(store, flt)
        for offset in (0, 300, 350, len(expected) - 3, len(expected) + 5):
            counting = OffsetStore(store)
            page = list_page(counting, flt, offset, 50)  # type: ignore[arg-type]
            assert [c.id for c in page.items] == expected[offset : offset + 50], (flt, offset)
            assert page.next_offset == (offset + 50 if len(expected) > offset + 50 else None)
            assert all(read[-1] == "count" or read[-1] <= 51 for read in counting.reads), counting.reads
    counting = OffsetStore(store)
    list_page(counting, MemoryFilter(), 350, 50)  # type: ignore[arg-type]
    pending = store.count_chunks(review_state="pending")
    assert pending < 350  # so the pending rows are skipped by their count, never read
    reads = [r for r in counting.reads if r[-1] != "count"]
    assert reads[0][0] == "confirmed" and reads[0][1] == 350 - pending, counting.reads


def test_a_deep_page_reads_each_review_state_once_when_the_store_applies_every_filter(store: Any) -> None:
    """340 pending rows, then 30 confirmed: offset 300 reads the pending rows once (not 64,
    then 256, then 1,024 re-reading the ones before) and the confirmed rows once."""
    counting = CountingStore(store)
    page = list_page(counting, MemoryFilter(), 300, 50)  # type: ignore[arg-type]
    assert [c.id for c in page.items] == brute(store, MemoryFilter())[300:350]
    assert counting.reads == [("pending", 351), ("confirmed", 64)]
