"""acompose: the sync composition's projection, composed without blocking the event loop.

Concurrency is shown without timing where it can be: two providers that each wait for the
other can only both finish if they run at the same time; which thread ran a provider is
recorded, not guessed from durations.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from contextplane import (
    ContextSection,
    Envelope,
    Row,
    SectionError,
    Shed,
    acompose,
    acompose_projected_context,
    compose_projected_context,
    hookimpl,
)
from contextplane.aio import run_to_completion, stragglers
from contextplane.aprojection import per_read
from contextplane.config import structure
from contextplane.notices import BudgetWarning
from contextplane.request import ProjectionRequest
from contextplane.testing.memory import InMemoryBackend
from contextplane_sections import always_on, retrieved
from contextplane_sections.envelopes import INJECTED_MEMORY

from .helpers import MEMORY, SectionPlugin, host_of

WS = Envelope("working_state")
NOTE = Envelope("note")


def rows(prefix: str, n: int) -> list[Row]:
    return [Row(f"{prefix}{i}", i, f"{prefix}{i} text", short=f"{prefix}{i}") for i in range(1, n + 1)]


def limit(ms: int) -> Any:
    return structure({"context": {"provider_timeout_ms": ms}})


def both(host: Any, **kw: Any) -> tuple[Any, Any]:
    kw.setdefault("budget_tokens", 0)
    return compose_projected_context("q", host=host, **kw), asyncio.run(
        acompose_projected_context("q", host=host, **kw)
    )


# --- the same projection ---------------------------------------------------------------------


@pytest.mark.parametrize("budget_tokens", [0, 60, 30, 12, 1])
def test_async_composition_is_the_sync_one_byte_for_byte(budget_tokens: int) -> None:
    async def fetched(_req: Any) -> list[Row]:
        await asyncio.sleep(0)
        return rows("a", 4)

    host = host_of(
        SectionPlugin(
            context=[
                ContextSection("ws", 10, Shed.NEVER, lambda _r: rows("w", 1), WS, cheap=True),
                ContextSection("fetched", 20, Shed.DEGRADE, fetched, MEMORY, floor=1),
                ContextSection("threaded", 30, Shed.DROP_ROWS, lambda _r: rows("t", 5), MEMORY),
                ContextSection("whole", 40, Shed.DROP_SECTION, lambda _r: rows("d", 2), NOTE),
            ]
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)  # the small budgets overflow; both say so
        sync, other = both(host, budget_tokens=budget_tokens, record=False)
    assert other.text == sync.text
    assert other.sections == sync.sections
    assert other.overflow == sync.overflow
    assert (other.used_chars, other.budget_chars, other.warnings) == (
        sync.used_chars,
        sync.budget_chars,
        sync.warnings,
    )


def test_the_d8_signature_builds_the_same_request() -> None:
    seen: list[ProjectionRequest] = []

    def spy(req: ProjectionRequest) -> list[Row]:
        seen.append(req)
        return []

    host = host_of(SectionPlugin(context=[ContextSection("spy", 10, Shed.DROP_ROWS, spy, NOTE)]))
    kw: dict[str, Any] = {
        "state": {"goal": "g"},
        "session_id": "s",
        "turn_index": 3,
        "project": "p",
        "surface": "external",
        "goal_turn": True,
        "budget_tokens": 100,
        "context_window": 1000,
        "extra": {"reason": "turn"},
        "record": False,
    }
    compose_projected_context("q", host=host, **kw)
    asyncio.run(acompose_projected_context("q", host=host, **kw))
    a, b = seen
    assert a.state == b.state and a.extra == b.extra
    assert (a.session_id, a.turn_index, a.project, a.surface, a.goal_turn, a.budget_tokens) == (
        b.session_id,
        b.turn_index,
        b.project,
        b.surface,
        b.goal_turn,
        b.budget_tokens,
    )


# --- how providers run -----------------------------------------------------------------------


def test_async_providers_of_one_turn_run_concurrently() -> None:
    """Each provider waits for the other to start: drafted one after the other, the first would
    wait for ever (and time out); drafted together, both deliver."""
    started: dict[str, asyncio.Event] = {}

    def waiter(me: str, other: str) -> Callable[[Any], Any]:
        async def draft(_req: Any) -> list[Row]:
            started[me].set()
            await started[other].wait()
            return [Row(me, 1, f"{me} saw {other} start")]

        return draft

    async def main() -> Any:
        started.update(a=asyncio.Event(), b=asyncio.Event())
        host = host_of(
            SectionPlugin(
                context=[
                    ContextSection("a", 10, Shed.DROP_ROWS, waiter("a", "b"), NOTE),
                    ContextSection("b", 20, Shed.DROP_ROWS, waiter("b", "a"), NOTE),
                ]
            ),
            config=limit(2_000),
        )
        return await acompose_projected_context("q", host=host, budget_tokens=0, record=False)

    p = asyncio.run(main())
    assert [s.error for s in p.sections] == [None, None]
    assert "a saw b start" in p.text and "b saw a start" in p.text


def test_sync_providers_run_in_a_worker_thread_unless_cheap() -> None:
    threads: dict[str, int] = {}

    def recorder(name: str) -> Callable[[Any], list[Row]]:
        def draft(_req: Any) -> list[Row]:
            threads[name] = threading.get_ident()
            return [Row(name, 1, name)]

        return draft

    async def in_loop(_req: Any) -> list[Row]:
        threads["async"] = threading.get_ident()
        return [Row("async", 1, "async")]

    host = host_of(
        SectionPlugin(
            context=[
                ContextSection("blocking", 10, Shed.DROP_ROWS, recorder("blocking"), NOTE),
                ContextSection("cheap", 20, Shed.DROP_ROWS, recorder("cheap"), NOTE, cheap=True),
                ContextSection("async", 30, Shed.DROP_ROWS, in_loop, NOTE),
            ]
        )
    )

    async def main() -> int:
        await acompose_projected_context("q", host=host, budget_tokens=0, record=False)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads["cheap"] == threads["async"] == loop_thread
    assert threads["blocking"] != loop_thread


def test_a_section_with_both_forms_uses_each_on_its_own_path() -> None:
    calls: list[str] = []

    def sync_form(_req: Any) -> list[Row]:
        calls.append("draft")
        return rows("r", 2)

    async def async_form(_req: Any) -> list[Row]:
        calls.append("adraft")
        return rows("r", 2)

    host = host_of(
        SectionPlugin(context=[ContextSection("twin", 10, Shed.DROP_ROWS, sync_form, NOTE, adraft=async_form)])
    )
    sync, other = both(host, record=False)
    assert calls == ["draft", "adraft"]
    assert other.text == sync.text


def test_async_and_cheap_declarations_that_contradict_the_draft_are_refused() -> None:
    async def draft(_req: Any) -> list[Row]:
        return []

    with pytest.raises(ValueError, match="section 'x': draft is already async, so there is nothing for adraft"):
        ContextSection("x", 10, Shed.DROP_ROWS, draft, NOTE, adraft=draft)
    with pytest.raises(ValueError, match="section 'x': cheap=True is for a synchronous draft"):
        ContextSection("x", 10, Shed.DROP_ROWS, draft, NOTE, cheap=True)
    with pytest.raises(ValueError, match="section 'x': adraft must be an async function of the request, got int"):
        ContextSection("x", 10, Shed.DROP_ROWS, lambda _r: [], NOTE, adraft=3)  # type: ignore[arg-type]
    assert ContextSection("x", 10, Shed.DROP_ROWS, draft, NOTE).asynchronous
    assert not ContextSection("x", 10, Shed.DROP_ROWS, lambda _r: [], NOTE, cheap=True).asynchronous


# --- the time limit --------------------------------------------------------------------------


def test_a_provider_that_never_returns_is_cancelled_at_the_limit_and_the_turn_completes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cancelled: list[bool] = []

    async def never(_req: Any) -> list[Row]:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return []

    host = host_of(
        SectionPlugin(
            context=[
                ContextSection("good", 10, Shed.NEVER, lambda _r: rows("g", 1), WS),
                ContextSection("never", 20, Shed.DROP_ROWS, never, MEMORY),
            ],
            name="hanging_plugin",
        ),
        config=limit(100),
    )
    backend = InMemoryBackend()

    async def main() -> tuple[Any, float]:
        started = time.perf_counter()
        p = await acompose_projected_context("q", backend, host=host, budget_tokens=0, session_id="s")
        return p, time.perf_counter() - started

    with caplog.at_level(logging.WARNING, logger="contextplane"):
        p, elapsed = asyncio.run(main())
    assert p.section("never").error == (
        "TimeoutError: no result within the 0.100s limit (context.provider_timeout_ms); cancelled"
    )
    assert cancelled == [True]
    assert p.section("good").item_ids == ("g1",) and "<injected_memory>" not in p.text
    assert elapsed < 1.0
    # The failure is recorded like any provider's: the injection log row and one log record.
    assert [dict(r.delivered) for r in backend.injections.rows("s")] == [{"good": ["g1"]}]
    records = [r for r in caplog.records if "'never' of plugin 'hanging_plugin' failed" in r.getMessage()]
    assert len(records) == 1 and "cancelled" in records[0].getMessage()


def test_a_provider_that_swallows_cancellation_does_not_hold_the_turn() -> None:
    release = asyncio.Event()

    async def stubborn(_req: Any) -> list[Row]:
        while not release.is_set():
            try:
                await asyncio.sleep(1)
            except asyncio.CancelledError:
                continue  # a buggy provider: it ignores the cancellation
        return []

    host = host_of(
        SectionPlugin(context=[ContextSection("stubborn", 10, Shed.DROP_ROWS, stubborn, NOTE)]),
        config=limit(50),
    )

    async def main() -> tuple[Any, int]:
        p = await acompose_projected_context("q", host=host, budget_tokens=0, record=False)
        running = stragglers()
        release.set()
        for _ in range(500):  # it notices on its next wake-up (within a second) and finishes
            if not stragglers():
                break
            await asyncio.sleep(0.01)
        return p, running

    p, running = asyncio.run(main())
    assert "no result within the 0.050s limit" in p.section("stubborn").error
    assert running >= 1  # kept referenced while it ran on, so it is never collected mid-flight
    assert stragglers() == 0


def test_a_synchronous_provider_stuck_in_its_thread_is_no_longer_awaited_at_the_limit() -> None:
    release = threading.Event()

    def stuck(_req: Any) -> list[Row]:
        release.wait(10)
        return [Row("late", 1, "late")]

    host = host_of(
        SectionPlugin(
            context=[
                ContextSection("stuck", 10, Shed.DROP_ROWS, stuck, NOTE),
                ContextSection("fine", 20, Shed.DROP_ROWS, lambda _r: rows("f", 1), NOTE),
            ]
        ),
        config=limit(100),
    )

    async def main() -> tuple[Any, float]:
        started = time.perf_counter()
        try:
            p = await acompose_projected_context("q", host=host, budget_tokens=0, record=False)
            return p, time.perf_counter() - started
        finally:
            release.set()  # else the loop's shutdown waits for the thread (as any executor's does)

    p, elapsed = asyncio.run(main())
    assert p.section("stuck").error == (
        "TimeoutError: no result within the 0.100s limit (context.provider_timeout_ms); no longer "
        "awaited (a synchronous provider cannot be cancelled, so its worker thread runs on)"
    )
    assert p.section("fine").item_ids == ("f1",) and "late" not in p.text
    assert elapsed < 5  # the limit is 0.1 s; the provider would hold the turn for 10 s


def test_a_cheap_provider_that_overruns_is_discarded_as_on_the_sync_path() -> None:
    def slow(_req: Any) -> list[Row]:
        time.sleep(0.05)
        return [Row("late", 1, "late")]

    host = host_of(
        SectionPlugin(context=[ContextSection("slow", 10, Shed.DROP_ROWS, slow, NOTE, cheap=True)]),
        config=limit(10),
    )
    sync, other = both(host, record=False)
    assert "over the 0.010s limit (context.provider_timeout_ms)" in other.section("slow").error
    assert "over the 0.010s limit (context.provider_timeout_ms)" in sync.section("slow").error


def test_the_sync_composition_runs_an_async_provider_and_cancels_it_at_the_limit() -> None:
    async def fetched(_req: Any) -> list[Row]:
        await asyncio.sleep(0)
        return rows("a", 2)

    async def never(_req: Any) -> list[Row]:
        await asyncio.Event().wait()
        return []

    host = host_of(
        SectionPlugin(
            context=[
                ContextSection("fetched", 10, Shed.DROP_ROWS, fetched, NOTE),
                ContextSection("never", 20, Shed.DROP_ROWS, never, MEMORY),
            ]
        ),
        config=limit(100),
    )
    p = compose_projected_context("q", host=host, budget_tokens=0, record=False)
    assert p.section("fetched").item_ids == ("a1", "a2")
    assert "no result within the 0.100s limit (context.provider_timeout_ms); cancelled" in p.section("never").error

    async def sync_call_inside_a_loop() -> Any:
        # A sync hook called from async code: the provider gets a loop of its own elsewhere.
        return compose_projected_context("q", host=host, budget_tokens=0, record=False)

    q = asyncio.run(sync_call_inside_a_loop())
    assert q.text == p.text


def test_run_to_completion_from_inside_a_loop_returns_the_result() -> None:
    async def value() -> int:
        await asyncio.sleep(0)
        return 7

    async def main() -> int:
        return run_to_completion(value())

    assert run_to_completion(value()) == 7
    assert asyncio.run(main()) == 7


# --- failures and strict mode ----------------------------------------------------------------


class Garbage:
    pass


async def _raises(_req: Any) -> list[Row]:
    raise ZeroDivisionError("division by zero")


@pytest.mark.parametrize(
    ("draft", "expected"),
    [
        (lambda _r: 42, "ValidationError: section 'bad' returned int; expected a Draft or an iterable of Row"),
        (lambda _r: [Garbage()], "section 'bad' returned Garbage at position 0; expected contextplane.Row"),
        (lambda _r: [Row("x", 1, "a"), Row("x", 2, "b")], "section 'bad' returned the row id 'x' twice"),
        (lambda _r: 1 / 0, "ZeroDivisionError: division by zero"),
        (_raises, "ZeroDivisionError: division by zero"),
        (lambda _r: (Row(str(i), i, "gen") for i in (1, 1)), "returned the row id '1' twice"),
    ],
)
def test_provider_failures_are_isolated_with_the_sync_paths_error_text(draft: Any, expected: str) -> None:
    host = host_of(
        SectionPlugin(context=[ContextSection("good", 10, Shed.NEVER, lambda _r: rows("g", 1), WS)], name="good"),
        SectionPlugin(context=[ContextSection("bad", 20, Shed.DROP_ROWS, draft, MEMORY)], name="bad_plugin"),
    )
    sync, other = both(host, record=False)
    assert expected in other.section("bad").error
    assert other.section("bad").error == sync.section("bad").error
    assert other.section("good").item_ids == ("g1",) and other.text == sync.text
    with pytest.raises(SectionError, match=r"context section 'bad' of plugin 'bad_plugin' failed: .*strict mode"):
        asyncio.run(acompose_projected_context("q", host=host, budget_tokens=0, strict=True))


def test_strict_mode_raises_for_the_first_failing_section_in_draft_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fails_late(_req: Any) -> list[Row]:
        await asyncio.sleep(0.05)
        raise RuntimeError("first in draft order, last to fail")

    async def fails_early(_req: Any) -> list[Row]:
        raise RuntimeError("second in draft order, first to fail")

    host = host_of(
        SectionPlugin(
            context=[
                ContextSection("early", 10, Shed.DROP_ROWS, fails_late, NOTE),
                ContextSection("late", 20, Shed.DROP_ROWS, fails_early, NOTE),
            ]
        )
    )
    with pytest.raises(SectionError, match=r"context section 'early' .*first in draft order") as sync_err:
        compose_projected_context("q", host=host, budget_tokens=0, strict=True)
    with caplog.at_level(logging.ERROR, logger="asyncio"), pytest.raises(SectionError) as async_err:
        asyncio.run(acompose_projected_context("q", host=host, budget_tokens=0, strict=True))
        gc.collect()
    assert str(async_err.value) == str(sync_err.value)
    # The other failure was taken too, not left for the collector to report as never retrieved.
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


# --- issue 10's semantics on the async path: sys.exit(), row bounds, layout ------------------


def _exits(_req: Any) -> list[Row]:
    sys.exit(3)


async def _aexits(_req: Any) -> list[Row]:
    await asyncio.sleep(0)
    sys.exit(3)


@pytest.mark.parametrize("how", ["thread", "cheap", "async def", "adraft"])
def test_a_provider_calling_sys_exit_fails_only_its_section_on_the_async_path(how: str) -> None:
    # SystemExit raised in a task escapes asyncio and would stop the event loop itself (and
    # every other session on it): it must fail the one section, as on the sync path.
    exits = {
        "thread": ContextSection("exits", 20, Shed.DROP_ROWS, _exits, MEMORY),
        "cheap": ContextSection("exits", 20, Shed.DROP_ROWS, _exits, MEMORY, cheap=True),
        "async def": ContextSection("exits", 20, Shed.DROP_ROWS, _aexits, MEMORY),
        "adraft": ContextSection("exits", 20, Shed.DROP_ROWS, lambda _r: rows("x", 1), MEMORY, adraft=_aexits),
    }[how]
    host = host_of(
        SectionPlugin(context=[ContextSection("good", 10, Shed.NEVER, lambda _r: rows("g", 1), WS)], name="good"),
        SectionPlugin(context=[exits], name="exits_plugin"),
    )
    sync, other = both(host, record=False)
    assert other.section("exits").error == "SystemExit: 3"
    assert other.section("good").item_ids == ("g1",) and "g1 text" in other.text
    if how == "adraft":  # the sync path calls draft, which returns
        assert sync.section("exits").item_ids == ("x1",)
    else:
        assert sync.section("exits").error == "SystemExit: 3" and other.text == sync.text
    with pytest.raises(
        SectionError, match=r"^context section 'exits' of plugin 'exits_plugin' failed: SystemExit: 3 \(strict"
    ):
        asyncio.run(acompose_projected_context("q", host=host, budget_tokens=0, strict=True))


def test_rows_over_the_row_bound_are_cut_and_warned_on_the_async_path() -> None:
    long = "a line of a long document\n" * 400  # 10,400 chars, over the default 4,000
    host = host_of(
        SectionPlugin(
            context=[
                ContextSection(
                    "docs",
                    20,
                    Shed.DROP_ROWS,
                    lambda _r: [Row("big", 1, long), Row("small", 2, "small")],
                    MEMORY,
                )
            ]
        )
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = asyncio.run(acompose_projected_context("q", host=host, budget_tokens=0, record=False))
    assert [str(w.message) for w in caught if "max_row_chars" in str(w.message)] == [
        "context section 'docs' of plugin 'sections' offered rows longer than context.max_row_chars (4000 "
        "chars), first 'big'; they are cut at a line boundary and end with a cut marker (raise "
        "context.max_row_chars, 0 = no bound, or store shorter rows)"
    ]
    sync = compose_projected_context("q", host=host, budget_tokens=0, record=False)
    assert other.section("docs").cut == sync.section("docs").cut == ("big",)
    assert other.section("docs").item_ids == ("big", "small")
    assert other.text == sync.text and other.text.count(" more chars]") == 1
    assert other.section("docs").chars < 4_300


def test_a_dropped_row_never_takes_smaller_ones_with_it_on_the_async_path() -> None:
    # Without a row bound, the oversized first row is shed alone; the restore pass gives the
    # smaller rows after it back, on both paths alike.
    big = Row("big", 1, "word " * 3_000)
    small = [Row("mid", 2, "the deploy window is on Tuesday"), Row("low", 3, "deploy freeze on Fridays")]

    async def fetched(_req: Any) -> list[Row]:
        return [big, *small]

    host = host_of(
        SectionPlugin(context=[ContextSection("retrieved", 50, Shed.DROP_ROWS, fetched, MEMORY)]),
        config=structure({"context": {"max_row_chars": 0}}),
    )
    sync, other = both(host, budget_tokens=1_000, record=False)
    assert other.section("retrieved").item_ids == sync.section("retrieved").item_ids == ("mid", "low")
    assert other.overflow == sync.overflow and other.text == sync.text
    assert [(s.section, s.action, s.items) for s in other.overflow] == [("retrieved", "drop_row", 1)]


def test_rows_that_cannot_be_laid_out_fail_only_their_section_on_the_async_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import contextplane.fitting as fitting

    real = fitting.escape_measured

    def explode(text: str) -> Any:
        if "explode" in text:
            raise RuntimeError("cannot lay out this row")
        return real(text)

    monkeypatch.setattr(fitting, "escape_measured", explode)

    async def bad(_req: Any) -> list[Row]:
        return [Row("1", 1, "explode")]

    host = host_of(
        SectionPlugin(context=[ContextSection("good", 10, Shed.NEVER, lambda _r: rows("g", 1), WS)], name="good"),
        SectionPlugin(context=[ContextSection("bad", 20, Shed.DROP_ROWS, bad, MEMORY)], name="bad_plugin"),
    )
    sync, other = both(host, record=False)
    assert other.section("bad").error == sync.section("bad").error == "RuntimeError: cannot lay out this row"
    assert other.section("good").item_ids == ("g1",) and other.text == sync.text
    with pytest.raises(SectionError, match=r"^context section 'bad' of plugin 'bad_plugin' failed: RuntimeError"):
        asyncio.run(acompose_projected_context("q", host=host, budget_tokens=0, strict=True))


def test_acompose_takes_a_request_and_checks_it() -> None:
    host = host_of(SectionPlugin())
    with pytest.raises(Exception, match="compose takes a ProjectionRequest, got str"):
        asyncio.run(acompose("q", host=host))  # type: ignore[arg-type]
    with pytest.raises(Exception, match="query must be str, got int"):
        asyncio.run(acompose_projected_context(3, host=host))  # type: ignore[arg-type]


# --- recording -------------------------------------------------------------------------------


class ObserverThreads:
    plugin_name = "observer_threads"

    def __init__(self) -> None:
        self.threads: list[int] = []

    @hookimpl
    def observe_projection(self, projection: Any) -> None:
        self.threads.append(threading.get_ident())


def test_observers_are_told_off_the_loop_and_before_acompose_returns() -> None:
    observer = ObserverThreads()
    host = host_of(SectionPlugin(context=[ContextSection("n", 10, Shed.DROP_ROWS, lambda _r: rows("n", 1), NOTE)]), observer)
    backend = InMemoryBackend()

    async def main() -> tuple[int, int]:
        await acompose_projected_context("q", backend, host=host, budget_tokens=0, session_id="s")
        return threading.get_ident(), len(backend.injections.rows("s"))

    loop_thread, logged = asyncio.run(main())
    assert logged == 1  # written before acompose returned
    assert observer.threads and observer.threads[0] != loop_thread


# --- one consistent read ---------------------------------------------------------------------


class ThreadedStore:
    """The kit's in-memory store, recording the thread its view is opened and closed on."""

    def __init__(self) -> None:
        self.inner = InMemoryBackend().memories
        self.events: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def consistent_read(self) -> Any:
        store = self

        class Opener:
            def __enter__(self) -> Any:
                store.events.append(("open", threading.get_ident()))
                self.cm = store.inner.consistent_read()
                return self.cm.__enter__()

            def __exit__(self, *exc: Any) -> Any:
                store.events.append(("close", threading.get_ident()))
                return self.cm.__exit__(*exc)

        return Opener()


def test_the_view_is_opened_once_per_composition_in_a_worker_thread() -> None:
    store = ThreadedStore()
    store.inner.add_chunk("Deploy window: Tuesday.", "hot", "operator")
    store.inner.add_chunk("Canary before every deploy window.", "general", "operator")
    host = host_of(always_on, retrieved)

    async def main() -> tuple[Any, int]:
        p = await acompose_projected_context("deploy window", store, host=host, budget_tokens=0, record=False)
        return p, threading.get_ident()

    p, loop_thread = asyncio.run(main())
    assert [e for e, _ in store.events] == ["open", "close"]
    assert all(thread != loop_thread for _, thread in store.events)
    assert p.section("always_on").item_ids and p.section("retrieved").item_ids


class AsyncViewStore:
    """A store whose point-in-time view is opened by an async client: ``aconsistent_read``."""

    def __init__(self) -> None:
        self.inner = InMemoryBackend().memories
        self.events: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def consistent_read(self) -> Any:
        raise AssertionError("the async path opened the blocking view")

    @contextlib.asynccontextmanager
    async def aconsistent_read(self) -> Any:
        self.events.append("open")
        with self.inner.consistent_read() as view:
            yield view
        self.events.append("close")


def test_a_store_with_an_async_view_is_awaited_and_observers_follow_its_close() -> None:
    store = AsyncViewStore()
    store.inner.add_chunk("Deploy window: Tuesday.", "hot", "operator")
    observed: list[str] = []

    class Observer:
        plugin_name = "order_observer"

        @hookimpl
        def observe_projection(self, projection: Any) -> None:
            observed.append(f"observed after {store.events[-1]}")

    host = host_of(always_on, Observer())
    backend = InMemoryBackend(store)
    p = asyncio.run(acompose_projected_context("deploy", backend, host=host, budget_tokens=0, session_id="s"))
    assert store.events == ["open", "close"] and observed == ["observed after close"]
    assert p.section("always_on").item_ids


# --- the one-hop route -----------------------------------------------------------------------


class SyncOnlyStore:
    """A store with no async reads (so every read on the async path would be a thread hop),
    recording the thread its view is opened and closed on, and whether it is open."""

    def __init__(self) -> None:
        self.inner = InMemoryBackend().memories
        self.events: list[tuple[str, int]] = []
        self.open = False

    def list_chunks(self, **filters: Any) -> Any:
        return self.inner.list_chunks(**filters)

    def search(self, query: str, k: int = 10, **options: Any) -> Any:
        return self.inner.search(query, k, **options)

    @contextlib.contextmanager
    def consistent_read(self) -> Any:
        self.events.append(("open", threading.get_ident()))
        self.open = True
        try:
            yield self
        finally:
            self.open = False
            self.events.append(("close", threading.get_ident()))


class Forms:
    """A memory section with both forms, recording which form drafted and on which thread."""

    def __init__(self, name: str, priority: int, envelope: Envelope = MEMORY) -> None:
        self.calls: list[tuple[str, int]] = []
        self.section = ContextSection(
            name, priority, Shed.DROP_ROWS, self.draft, envelope, adraft=self.adraft, carries_memory=True
        )

    def draft(self, req: Any) -> list[Row]:
        self.calls.append(("draft", threading.get_ident()))
        return [Row(f"{self.section.name}-{c.id}", 1, c.content) for c in req.knowledge_store.list_chunks()]

    async def adraft(self, req: Any) -> list[Row]:
        self.calls.append(("adraft", threading.get_ident()))
        return self.draft(req)


def test_a_turn_on_a_store_that_reads_in_threads_is_composed_in_one_worker_thread() -> None:
    """Open the view, every draft (cheap ones too), close it, record: one thread, not the loop's,
    each section's synchronous form, and the sync path's projection."""
    store = SyncOnlyStore()
    store.inner.add_chunk("Deploy window: Tuesday.", "hot", "operator")
    forms = Forms("memory", 30, INJECTED_MEMORY)
    threads: dict[str, int] = {}

    def cheap(_req: Any) -> list[Row]:
        threads["cheap"] = threading.get_ident()
        return rows("w", 1)

    observer = ObserverThreads()
    host = host_of(
        SectionPlugin(context=[ContextSection("ws", 10, Shed.NEVER, cheap, WS, cheap=True), forms.section]),
        always_on,
        observer,
    )
    backend = InMemoryBackend(store)

    async def main() -> tuple[Any, int]:
        p = await acompose_projected_context("deploy", backend, host=host, budget_tokens=0, session_id="s")
        return p, threading.get_ident()

    p, loop_thread = asyncio.run(main())
    worker = store.events[0][1]
    assert worker != loop_thread
    assert store.events == [("open", worker), ("close", worker)]
    assert forms.calls == [("draft", worker)] and threads["cheap"] == worker
    assert observer.threads == [worker]
    assert len(backend.injections.rows("s")) == 1
    sync = compose_projected_context("deploy", backend, host=host, budget_tokens=0, session_id="s2")
    assert p.text == sync.text and p.sections == sync.sections
    assert p.section("always_on").item_ids and p.section("memory").item_ids


def test_a_store_with_async_reads_or_per_read_takes_the_per_read_route() -> None:
    """The kit's in-memory store has async reads: each section's adraft is awaited on the loop.
    ``per_read()`` takes that route on a store that reads in threads too."""
    forms = Forms("memory", 20)
    host = host_of(SectionPlugin(context=[forms.section]))
    native = InMemoryBackend()
    native.memories.add_chunk("Deploy window: Tuesday.", "hot", "operator")
    threaded = SyncOnlyStore()
    threaded.inner.add_chunk("Deploy window: Tuesday.", "hot", "operator")

    async def main() -> int:
        await acompose_projected_context("q", native, host=host, budget_tokens=0, record=False)
        with per_read():
            await acompose_projected_context("q", threaded, host=host, budget_tokens=0, record=False)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert forms.calls == [("adraft", loop_thread), ("draft", loop_thread)] * 2
    assert [e for e, _ in threaded.events] == ["open", "close"]
    assert all(t != loop_thread for _, t in threaded.events)


def test_the_embedded_store_reads_in_threads_unless_its_embedder_embeds_on_the_loop(tmp_path: Any) -> None:
    from contextplane.aprojection import reads_in_threads
    from contextplane.store.sqlite import SQLiteKnowledgeStore

    class Remote:
        name, dimensions = "remote", 3

        def embed(self, texts: Any) -> list[list[float]]:
            return [[1.0, 0.0, 0.0] for _ in texts]

        async def aembed(self, texts: Any) -> list[list[float]]:
            return self.embed(texts)

    local = SQLiteKnowledgeStore(tmp_path / "a.sqlite3")
    remote = SQLiteKnowledgeStore(tmp_path / "b.sqlite3", embedder=Remote())
    try:
        assert local.threaded_async and reads_in_threads(local)
        assert not remote.threaded_async and not reads_in_threads(remote)
        assert reads_in_threads(SyncOnlyStore()) and not reads_in_threads(InMemoryBackend().memories)
        assert not reads_in_threads(AsyncViewStore())
    finally:
        local.close()
        remote.close()


def test_a_draft_stuck_in_the_turns_worker_thread_is_no_longer_awaited_and_the_turn_completes() -> None:
    """At the limit the loop takes the turn back: the stuck draft is reported, the sections after
    it draft on the same view, the view is closed and the turn recorded."""
    release = threading.Event()
    store = SyncOnlyStore()
    store.inner.add_chunk("Deploy window: Tuesday.", "hot", "operator")
    after = Forms("after", 30)

    def stuck(_req: Any) -> list[Row]:
        release.wait(10)
        return [Row("late", 1, "late")]

    host = host_of(
        SectionPlugin(
            context=[ContextSection("stuck", 10, Shed.DROP_ROWS, stuck, MEMORY, carries_memory=True), after.section]
        ),
        config=limit(100),
    )
    backend = InMemoryBackend(store)

    async def main() -> tuple[Any, float, bool]:
        started = time.perf_counter()
        try:
            p = await acompose_projected_context("q", backend, host=host, budget_tokens=0, session_id="s")
            return p, time.perf_counter() - started, store.open
        finally:
            release.set()

    p, elapsed, still_open = asyncio.run(main())
    assert p.section("stuck").error == (
        "TimeoutError: no result within the 0.100s limit (context.provider_timeout_ms); no longer "
        "awaited (a synchronous provider cannot be cancelled, so its worker thread runs on)"
    )
    assert p.section("after").item_ids and "late" not in p.text
    assert [c for c, _ in after.calls] == ["adraft", "draft"]  # the ordinary way, once taken back
    assert not still_open and [e for e, _ in store.events] == ["open", "close"]
    assert [dict(r.delivered) for r in backend.injections.rows("s")] == [{"after": list(p.section("after").item_ids)}]
    assert elapsed < 5


def test_a_turn_cancelled_while_its_worker_thread_drafts_closes_its_view_and_records_nothing() -> None:
    entered, release = threading.Event(), threading.Event()
    store = SyncOnlyStore()

    def slow(_req: Any) -> list[Row]:
        entered.set()
        release.wait(10)
        return rows("s", 1)

    host = host_of(SectionPlugin(context=[ContextSection("slow", 10, Shed.DROP_ROWS, slow, MEMORY, carries_memory=True)]))
    backend = InMemoryBackend(store)

    async def main() -> bool:
        turn = asyncio.ensure_future(
            acompose_projected_context("q", backend, host=host, budget_tokens=0, session_id="s")
        )
        while not entered.is_set():
            await asyncio.sleep(0.001)
        turn.cancel()
        try:
            with pytest.raises(asyncio.CancelledError):
                await turn
            return store.open
        finally:
            release.set()

    assert asyncio.run(main()) is False
    assert [e for e, _ in store.events] == ["open", "close"]
    assert backend.injections.rows("s") == []


def test_failures_and_strict_mode_on_the_one_hop_route() -> None:
    store = SyncOnlyStore()

    def fails(_req: Any) -> list[Row]:
        raise RuntimeError("boom")

    def slow(_req: Any) -> list[Row]:
        time.sleep(0.05)
        return rows("s", 1)

    sections = [
        ContextSection("slow", 10, Shed.DROP_ROWS, slow, MEMORY, carries_memory=True),
        ContextSection("fails", 20, Shed.DROP_ROWS, fails, NOTE),
    ]
    host = host_of(SectionPlugin(context=sections, name="p"), config=limit(10))
    sync, other = both(host, knowledge_store=store, record=False)
    assert "took 0.0" in sync.section("slow").error  # the sync path can only measure it afterwards
    assert other.section("slow").error.startswith(
        "TimeoutError: no result within the 0.010s limit (context.provider_timeout_ms); no longer awaited"
    )
    assert other.section("fails").error == sync.section("fails").error == "RuntimeError: boom"
    strict = host_of(SectionPlugin(context=sections, name="p"), config=limit(0), strict=True)
    with pytest.raises(SectionError, match="context section 'fails' of plugin 'p' failed: RuntimeError: boom"):
        asyncio.run(acompose_projected_context("q", store, host=strict, budget_tokens=0, record=False))
    assert not store.open and [e for e, _ in store.events][-2:] == ["open", "close"]


# --- observers on the async path -------------------------------------------------------------


class Twin:
    """An observer with an async twin: the sync path calls the hook, the async path the twin."""

    def __init__(self, name: str, seen: list[tuple[str, str, int]], fail: bool = False) -> None:
        self.plugin_name = name
        self.seen = seen
        self.fail = fail

    @hookimpl
    def observe_projection(self, projection: Any) -> None:
        self.seen.append((self.plugin_name, "sync", threading.get_ident()))

    async def aobserve_projection(self, projection: Any) -> None:
        self.seen.append((self.plugin_name, "async", threading.get_ident()))
        if self.fail:
            raise OSError("disk full")


class Plain:
    def __init__(self, name: str, seen: list[tuple[str, str, int]]) -> None:
        self.plugin_name = name
        self.seen = seen

    @hookimpl
    def observe_projection(self, projection: Any) -> None:
        self.seen.append((self.plugin_name, "sync", threading.get_ident()))


def test_anotify_awaits_async_twins_on_the_loop_and_runs_the_rest_in_a_thread_in_order() -> None:
    seen: list[tuple[str, str, int]] = []
    notes = SectionPlugin(context=[ContextSection("n", 10, Shed.DROP_ROWS, lambda _r: rows("n", 1), NOTE)])
    host = host_of(notes, Plain("a_plain", seen), Twin("b_twin", seen, fail=True), Plain("c_plain", seen))

    async def main() -> int:
        await acompose_projected_context("q", InMemoryBackend(), host=host, budget_tokens=0, session_id="s")
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert [(name, form) for name, form, _ in seen] == [
        ("a_plain", "sync"),
        ("b_twin", "async"),
        ("c_plain", "sync"),
    ]
    threads = {name: thread for name, _, thread in seen}
    assert threads["b_twin"] == loop_thread and loop_thread not in (threads["a_plain"], threads["c_plain"])
    assert [f.describe() for f in host.failures] == [
        "plugin 'b_twin' failed during observe_projection: OSError: disk full"
    ]
    seen.clear()
    compose_projected_context("q", InMemoryBackend(), host=host, budget_tokens=0, session_id="s")
    assert [(name, form) for name, form, _ in seen] == [("a_plain", "sync"), ("b_twin", "sync"), ("c_plain", "sync")]
    strict = host_of(notes, Twin("b_twin", [], fail=True), strict=True)
    with pytest.raises(
        SectionError, match=r"plugin 'b_twin' failed during observe_projection: OSError: disk full \(strict mode\)"
    ):
        asyncio.run(acompose_projected_context("q", InMemoryBackend(), host=strict, budget_tokens=0))
