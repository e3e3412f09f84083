"""One consistent read per turn: a supersession committed during composition is either wholly
visible or wholly invisible to that projection (issue 9, ADR D2/D7).

A plugin ordered between the always-on (20) and retrieved (50) sections supersedes an
always-on row with a retrieved one while the projection is being composed. Read statement by
statement, always-on would deliver the old row and retrieval the new one: both in one
projection. Through the store's ``consistent_read`` view, exactly one of them is delivered,
every time, on the embedded SQLite store and on the kit's in-memory store.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextplane import (
    ContextSection,
    Envelope,
    Row,
    Shed,
    acompose_projected_context,
    compose_projected_context,
    hookimpl,
)
from contextplane.config import Config, structure
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


COMPOSE: dict[str, Callable[..., Any]] = {
    "sync": compose_projected_context,
    # The async path drafts the writer concurrently with the memory sections: only the view
    # keeps the projection to one state there, whatever order the drafts finish in.
    "async": lambda *a, **kw: asyncio.run(acompose_projected_context(*a, **kw)),
}


@pytest.mark.parametrize("path", sorted(COMPOSE))
@pytest.mark.parametrize("kind", sorted(STORES))
@pytest.mark.parametrize("attempt", range(5))
def test_a_supersession_during_composition_is_all_or_nothing(
    tmp_path: Path, kind: str, attempt: int, path: str
) -> None:
    compose = COMPOSE[path]
    store = STORES[kind](tmp_path)
    old = seed(store)
    writer = SupersedesMidTurn(store, old)
    host = host_of(always_on, writer, retrieved)
    p = compose("deploy window", store, budget_tokens=0, host=host, record=False)
    (new,) = writer.new_ids
    ids = delivered(p)
    assert len(ids & {old, new}) == 1, f"delivered {sorted(ids)}: the old row and its successor together"
    # The view opened before the write, so this projection is the old state, wholly.
    assert old in p.section("always_on").item_ids and new not in ids
    # The next projection sees the committed supersession, wholly.
    writer.new_ids.append("done")  # the writer writes once
    q = compose("deploy window", store, budget_tokens=0, host=host, record=False)
    assert new in q.section("retrieved").item_ids and old not in delivered(q)
    store.close()


def test_a_read_through_the_view_after_its_composition_ended_is_refused(tmp_path: Path) -> None:
    """A synchronous provider abandoned at the time limit reads on in its thread; by then the
    view's reader connection may be another composition's, so the embedded store refuses."""
    store = SQLiteKnowledgeStore(tmp_path / "m.sqlite3")
    seed(store)
    go, done = threading.Event(), threading.Event()
    late: list[BaseException] = []

    def stuck(request: Any) -> list[Row]:
        go.wait(10)
        try:
            request.knowledge_store.search("deploy", 3)
        except BaseException as exc:
            late.append(exc)
        done.set()
        return []

    class Stuck:
        plugin_name = "stuck"

        @hookimpl
        def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
            register(ContextSection("stuck", 60, Shed.DROP_ROWS, stuck, NOTE, carries_memory=True))

    host = host_of(always_on, Stuck(), config=structure({"context": {"provider_timeout_ms": 100}}))

    async def main() -> Any:
        p = await acompose_projected_context("deploy", store, budget_tokens=0, host=host, record=False)
        go.set()
        await asyncio.to_thread(done.wait, 10)
        return p

    p = asyncio.run(main())
    assert "no longer awaited" in p.section("stuck").error
    assert p.section("always_on").item_ids
    assert len(late) == 1 and str(late[0]) == (
        f"{store.path}: read through a consistent view after its composition ended (a provider "
        "abandoned at context.provider_timeout_ms reads on); read inside draft"
    )
    # The store itself is unharmed: the next composition reads normally.
    assert compose_projected_context("deploy", store, budget_tokens=0, host=host_of(always_on), record=False).text
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
