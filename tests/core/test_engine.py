"""The one engine: every route of a composition drafts through one loop and opens its view
through one opener, and the sync driver needs no event loop.

Why these tests: the sync composition, the async one-hop route and the async per-read route
used to be three drafting loops with three view openers, kept equal only by the parity tests.
These pin that they are one: a rule changed in the loop (strict mode, the time limit) reaches
every route.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextplane import ContextSection, Envelope, Row, SectionError, Shed
from contextplane.aprojection import acompose_projected_context, per_read
from contextplane.config import structure
from contextplane.engine import async_driver, drafting, driver
from contextplane.projection import compose_projected_context
from contextplane.testing.memory import InMemoryBackend

from .helpers import MEMORY, SectionPlugin, host_of

NOTE = Envelope("note")
ENGINE = Path(drafting.__file__).parent


class ThreadedStore:
    """A store whose async reads would be thread hops (so ``acompose`` takes the one-hop route)."""

    threaded_async = True

    def __init__(self) -> None:
        self.inner = InMemoryBackend().memories
        self.opened = 0

    def list_chunks(self, **filters: Any) -> Any:
        return self.inner.list_chunks(**filters)

    def search(self, query: str, k: int = 10, **options: Any) -> Any:
        return self.inner.search(query, k, **options)

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[Any]:
        self.opened += 1
        yield self


def _row(name: str) -> list[Row]:
    return [Row(f"{name}1", 1, f"{name} text")]


def _host(*sections: ContextSection, **kw: Any) -> Any:
    return host_of(SectionPlugin(context=list(sections), name="p"), **kw)


@pytest.fixture
def loops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which owner each run of the one drafting loop drafted for, on any route."""
    runs: list[str] = []
    real = drafting.draft_in_order

    def counting(work: Any, start: Any, owner: str) -> Any:
        runs.append(owner)
        return real(work, start, owner)

    for module in (driver, async_driver):
        monkeypatch.setattr(module, "draft_in_order", counting)
    return runs


@pytest.fixture
def openings(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every store the one view opener opened a view of, on any route."""
    opened: list[object] = []
    real = drafting.open_view

    def counting(store: Any, locate: bool) -> Any:
        opened.append(store)
        return real(store, locate)

    monkeypatch.setattr(drafting, "open_view", counting)
    monkeypatch.setattr(driver, "open_view", counting)
    return opened


def test_every_route_drafts_through_the_one_loop_and_opens_through_the_one_opener(
    loops: list[str], openings: list[object]
) -> None:
    store = ThreadedStore()
    host = _host(ContextSection("mem", 10, Shed.DROP_ROWS, lambda _r: _row("m"), MEMORY, carries_memory=True))
    sync = compose_projected_context("q", store, host=host, budget_tokens=0, record=False)
    one_hop = asyncio.run(acompose_projected_context("q", store, host=host, budget_tokens=0, record=False))
    with per_read():
        each = asyncio.run(acompose_projected_context("q", store, host=host, budget_tokens=0, record=False))
    assert sync.text == one_hop.text == each.text and "m text" in sync.text
    assert loops == [drafting.HERE, drafting.HERE, drafting.LOOP]  # sync, one hop, per read
    assert openings == [store, store, store] and store.opened == 3


def test_a_turn_taken_back_at_the_limit_drafts_the_rest_through_the_same_loop(loops: list[str]) -> None:
    release = threading.Event()

    def stuck(_req: Any) -> list[Row]:
        release.wait(5)
        return _row("s")

    host = _host(
        ContextSection("stuck", 10, Shed.DROP_ROWS, stuck, MEMORY, carries_memory=True),
        # cheap: drafted on the loop once the turn is taken back, so load cannot make it late
        ContextSection("after", 20, Shed.DROP_ROWS, lambda _r: _row("a"), NOTE, cheap=True),
        config=structure({"context": {"provider_timeout_ms": 200}}),
    )
    try:
        projection = asyncio.run(
            acompose_projected_context("q", ThreadedStore(), host=host, budget_tokens=0, record=False)
        )
    finally:
        release.set()
    assert "no longer awaited" in (projection.section("stuck").error or "")
    assert projection.section("after").item_ids == ("a1",)
    assert loops == [drafting.HERE, drafting.LOOP]  # the worker thread's, then the loop's


def test_strict_mode_drafts_nothing_after_the_first_failure_on_the_one_hop_route() -> None:
    """The one-hop route used to draft every section and raise afterwards; it is the sync
    driver now, which stops at the first failing section in draft order."""
    drafted: list[str] = []

    def fails(_req: Any) -> list[Row]:
        drafted.append("fails")
        raise RuntimeError("boom")

    def after(_req: Any) -> list[Row]:
        drafted.append("after")
        return _row("a")

    host = _host(
        ContextSection("fails", 10, Shed.DROP_ROWS, fails, MEMORY, carries_memory=True),
        ContextSection("after", 20, Shed.DROP_ROWS, after, NOTE),
        strict=True,
    )
    with pytest.raises(
        SectionError, match="context section 'fails' of plugin 'p' failed: RuntimeError: boom"
    ):
        compose_projected_context("q", ThreadedStore(), host=host, budget_tokens=0, record=False)
    with pytest.raises(
        SectionError, match="context section 'fails' of plugin 'p' failed: RuntimeError: boom"
    ):
        asyncio.run(
            acompose_projected_context("q", ThreadedStore(), host=host, budget_tokens=0, record=False)
        )
    assert drafted == ["fails", "fails"]


def test_the_sync_driver_composes_an_all_sync_turn_without_an_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_loop(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the sync driver started an event loop")

    monkeypatch.setattr(asyncio, "run", no_loop)
    monkeypatch.setattr(asyncio, "new_event_loop", no_loop)
    host = _host(
        ContextSection("mem", 10, Shed.DROP_ROWS, lambda _r: _row("m"), MEMORY, carries_memory=True),
        ContextSection("note", 20, Shed.DROP_ROWS, lambda _r: _row("n"), NOTE),
    )
    projection = compose_projected_context("q", ThreadedStore(), host=host, budget_tokens=0, record=False)
    assert [s.item_ids for s in projection.sections] == [("m1",), ("n1",)]


def test_a_drafting_loop_that_would_await_is_refused_by_the_sync_runner() -> None:
    """``run_here`` runs a loop in one step; a loop that suspends (a driver that started a
    task) is a bug in the driver, said as such, never a turn silently half drafted."""

    async def suspends() -> None:
        await asyncio.sleep(0)

    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="awaited"):
        drafting.run_here(suspends())
    assert time.perf_counter() - started < 1


def test_no_engine_module_is_over_500_lines() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in ENGINE.glob("*.py")}
    assert {"drafting.py", "assembly.py", "driver.py", "async_driver.py"} <= set(sizes)
    assert not {name: n for name, n in sizes.items() if n > 500}
