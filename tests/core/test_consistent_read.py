"""One consistent read per turn: a supersession committed during composition is either wholly
visible or wholly invisible to that projection (issue 9, ADR D2/D7).

A plugin ordered between the always-on (20) and retrieved (50) sections supersedes an
always-on row with a retrieved one while the projection is being composed. Read statement by
statement, always-on would deliver the old row and retrieval the new one: both in one
projection. Through the store's ``consistent_read`` view, exactly one of them is delivered,
every time, on the embedded SQLite store and on the kit's in-memory store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextplane import ContextSection, Envelope, Row, Shed, compose_projected_context, hookimpl
from contextplane.config import Config
from contextplane.notices import reset_notices
from contextplane.store.sqlite import SQLiteKnowledgeStore
from contextplane.testing.memory import InMemoryBackend, InMemoryKnowledgeStore
from contextplane_sections import always_on, retrieved

from .helpers import host_of

NOTE = Envelope("writer_note")


class SupersedesMidTurn:
    """Commits a supersession from inside composition, between the two memory sections."""

    plugin_name = "mid_turn_writer"

    def __init__(self, store: Any, old_id: str) -> None:
        self.store = store
        self.old_id = old_id
        self.new_ids: list[str] = []

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        def draft(request: Any) -> list[Row]:
            if not self.new_ids:
                new = self.store.supersede(
                    self.old_id,
                    "Deploy window moved to Thursday 10:00 UTC.",
                    delivery_policy="retrieved",
                    source_type="operator",
                )
                self.new_ids.append(new)
            return [Row("n", 1, "noted")]

        register(ContextSection("writer_note", 35, Shed.DROP_SECTION, draft, NOTE))


def seed(store: Any) -> str:
    old = store.add_chunk(
        "Deploy window: Tuesday 14:00 UTC.",
        "hot",
        "operator",
        delivery_policy="always",
    )
    store.add_chunk("Canary runs 30 minutes before a deploy window opens.", "general", "operator")
    return str(old)


def delivered(projection: Any) -> set[str]:
    return {i for ids in projection.delivered_ids.values() for i in ids}


STORES: dict[str, Callable[[Path], Any]] = {
    "sqlite-file": lambda tmp: SQLiteKnowledgeStore(tmp / "m.sqlite3"),
    "sqlite-memory": lambda tmp: SQLiteKnowledgeStore(":memory:"),
    "in-memory-kit": lambda tmp: InMemoryBackend(InMemoryKnowledgeStore()).memories,
}


@pytest.mark.parametrize("kind", sorted(STORES))
@pytest.mark.parametrize("attempt", range(5))
def test_a_supersession_during_composition_is_all_or_nothing(tmp_path: Path, kind: str, attempt: int) -> None:
    store = STORES[kind](tmp_path)
    old = seed(store)
    writer = SupersedesMidTurn(store, old)
    host = host_of(always_on, writer, retrieved)
    p = compose_projected_context("deploy window", store, budget_tokens=0, host=host, record=False)
    (new,) = writer.new_ids
    ids = delivered(p)
    assert len(ids & {old, new}) == 1, f"delivered {sorted(ids)}: the old row and its successor together"
    # The view opened before the write, so this projection is the old state, wholly.
    assert old in p.section("always_on").item_ids and new not in ids
    # The next projection sees the committed supersession, wholly.
    writer.new_ids.append("done")  # the writer writes once
    q = compose_projected_context("deploy window", store, budget_tokens=0, host=host, record=False)
    assert new in q.section("retrieved").item_ids and old not in delivered(q)
    store.close()


def test_without_a_consistent_view_the_same_write_mixes_states_and_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The control: a store that offers no ``consistent_read`` shows the fault the view fixes,
    and composition says once that it cannot promise one state."""

    class NoView:
        def __init__(self, inner: InMemoryKnowledgeStore) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            if name == "consistent_read":
                raise AttributeError(name)
            return getattr(self.inner, name)

    reset_notices()
    inner = InMemoryKnowledgeStore()
    old = seed(inner)
    store = NoView(inner)
    writer = SupersedesMidTurn(inner, old)
    host = host_of(always_on, writer, retrieved, config=Config())
    with caplog.at_level(logging.WARNING, logger="contextplane"):
        p = compose_projected_context("deploy window", store, budget_tokens=0, host=host, record=False)
        compose_projected_context("deploy window", store, budget_tokens=0, host=host, record=False)
    (new,) = writer.new_ids
    assert {old, new} <= delivered(p)  # exactly the fault: both rows in one projection
    notes = [r for r in caplog.records if "has no consistent_read()" in r.getMessage()]
    assert len(notes) == 1 and "store NoView has no consistent_read()" in notes[0].getMessage()
