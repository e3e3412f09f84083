"""``acompose_projected_context``: the same composition as ``projection``, for an event loop.

Agent runtimes are async (LangGraph's ``ainvoke``, MCP servers, web servers). The sync
composition run inside a loop blocks every concurrent session of the process for as long as
its store queries and query embeddings take. ``acompose`` composes the same projection, byte
for byte, without blocking the loop:

- **Same output by construction.** The request is checked and resolved by
  ``projection.prepare``, and everything after drafting (the budget, shedding, rendering, the
  reports and the injection record) is ``projection.assemble``: only drafting differs.
- **Two routes, one result.** When the turn's memory is read in worker threads anyway (the
  embedded SQLite store without an async embedder, or any store with no async reads: see
  ``reads_in_threads``) and every section has a synchronous form, the whole turn is composed
  in **one worker thread** (``_OneHop``): the view opened, every section's ``draft`` in draft
  order (``cheap`` ones too), the view closed, the projection assembled and the observers
  told, as ``projection.compose`` does it, for one hand-off instead of one per read (a hop per
  read cost more than a one-turn composition's reads: bench/async_bench.py). Otherwise the
  turn takes the **per-read route**: every section starts at once, async providers (``adraft``,
  or an ``async def draft``) awaited on the loop, synchronous ones in worker threads (on the
  loop when ``cheap=True``), collected in draft order, so which finishes first changes
  nothing. ``per_read()`` forces the per-read route (the conformance kit checks ``adraft`` so).
- **The time limit is enforced.** On the per-read route ``context.provider_timeout_ms``
  counts from the moment the turn asks for the drafts (time a provider waits for a worker
  thread counts): at the limit an async provider is cancelled; a synchronous one in a worker
  thread cannot be, so the turn stops waiting for it and its thread runs on. On the one-hop
  route the loop watches the draft in progress: once it has run for the limit the loop takes
  the turn back, reports that draft late, drafts the sections not yet drafted on the per-read
  route against the same view, and closes the view and records itself. Either way the section
  reports the ``TimeoutError`` and the turn goes on. A cheap provider on the loop is checked
  after it returns, as the sync path checks every provider.
- **One consistent read.** The store's ``consistent_read()`` view is opened once per
  composition, in a worker thread (opening it is I/O; the history position a recorded turn
  keeps is asked in the same hop), every section drafts against it, and it is closed in a
  worker thread; a store may offer ``aconsistent_read()`` (an async context manager) instead.
  Reads through the view are made off the loop (``contextplane.store.aio``). A late read by an
  abandoned provider after the view closed is refused by the embedded store.
- **Failures and strict mode** are those of the sync path, reported in draft order: the same
  error text per section (a row the core cannot lay out, or a provider's ``sys.exit()``,
  fails that section only), and in strict mode the same ``SectionError`` for the first
  failing section in draft order.
- **Recording stays off the loop.** On the one-hop route the observers are told in the turn's
  worker thread, after the view closed. On the per-read route ``PluginHost.anotify_projection``
  awaits an observer's async twin (the records observer's, which awaits a backend's async
  record methods, ``contextplane.records.aio``, or writes a thread-backed backend's rows in one
  worker thread) and calls the others in a worker thread. Either way the composition awaits
  it, so the injection-log row is written before the turn's first model call records its
  snapshot.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import inspect
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from contextplane.aio import abandon, over_limit, overran, run_to_completion
from contextplane.config import Config
from contextplane.fitting import SectionPlan
from contextplane.handoff import hand_off, settled_within
from contextplane.observability.turn import TurnState
from contextplane.plugins import PluginHost, Registered
from contextplane.projection import (
    Drafting,
    ProjectedContext,
    Skipped,
    _as_rows,
    assemble,
    d8_request,
    draft_failed,
    needs_memory,
    position_of,
    prepare,
    row_limit,
    warn_no_view,
)
from contextplane.request import ProjectionRequest, Surface
from contextplane.sections import ContextSection, Row

#: One section's draft: its rows and meta, or what went wrong.
Outcome = tuple[tuple[Row, ...], Mapping[str, Any]] | BaseException


@attrs.frozen
class _Validated:
    """A synchronous draft already checked in its worker thread (so a generator it returned was
    consumed there, off the loop)."""

    rows: tuple[Row, ...]
    meta: Mapping[str, Any]


def _in_thread(section: ContextSection, request: ProjectionRequest) -> Any:
    result = section.draft(request)
    if inspect.isawaitable(result):
        return result
    return _Validated(*_as_rows(result, section.name))


async def _draft(
    section: ContextSection, request: ProjectionRequest, timeout_s: float | None
) -> tuple[tuple[Row, ...], Mapping[str, Any]]:
    """One section's draft, run the way the section says it runs."""
    result: Any
    if section.adraft is not None:
        result = await section.adraft(request)
    elif inspect.iscoroutinefunction(section.draft):
        result = await section.draft(request)
    elif section.cheap:  # on the loop: it cannot be cancelled, so it is measured, as on the sync path
        started = time.perf_counter()
        result = section.draft(request)
        elapsed = time.perf_counter() - started
        if timeout_s is not None and elapsed > timeout_s:
            raise overran(elapsed, timeout_s)
    else:
        result = await hand_off(_in_thread, section, request)
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, _Validated):
        return result.rows, result.meta
    return _as_rows(result, section.name)


async def _guarded(
    section: ContextSection, request: ProjectionRequest, timeout_s: float | None
) -> Outcome:
    """``_draft``, with a provider's ``sys.exit()`` handed back as its outcome: SystemExit
    raised in a task escapes asyncio and stops the whole event loop, so it is caught inside
    the task and fails that section only, as on the sync path."""
    try:
        return await _draft(section, request, timeout_s)
    except SystemExit as exc:
        return exc


def _late(section: ContextSection, timeout_s: float) -> TimeoutError:
    if section.asynchronous or section.cheap:
        return over_limit(timeout_s)
    return _stuck(timeout_s)


@contextlib.asynccontextmanager
async def aconsistent_view(store: Any, locate: bool = False) -> AsyncIterator[tuple[Any, Any]]:
    """``projection.consistent_view`` for an event loop, with the history position the view
    reads at when ``locate`` (a recorded turn; else None): the store's ``aconsistent_read()``
    when it has one, else its ``consistent_read()`` opened, and the position asked, in one
    worker thread (both are I/O), and closed in another."""
    if store is None:
        yield None, None
        return
    native = getattr(store, "aconsistent_read", None)
    if native is None and getattr(store, "consistent_read", None) is None:
        warn_no_view(store)
        yield store, (await asyncio.to_thread(position_of, store) if locate else None)
        return
    if native is not None:
        async with native() as view:
            yield view, (await asyncio.to_thread(position_of, view) if locate else None)
        return
    manager = store.consistent_read()

    def open_and_locate() -> tuple[Any, Any]:
        view = manager.__enter__()
        try:
            return view, (position_of(view) if locate else None)
        except BaseException as exc:
            manager.__exit__(type(exc), exc, exc.__traceback__)
            raise

    opening = asyncio.ensure_future(asyncio.to_thread(open_and_locate))
    try:
        opened = await asyncio.shield(opening)
    except asyncio.CancelledError:
        # Cancelled while the thread opens the view: close it once it is open, never leak it.
        opening.add_done_callback(lambda f: _close_late(f, manager))
        raise
    try:
        yield opened
    except BaseException as exc:
        closing = asyncio.to_thread(manager.__exit__, type(exc), exc, exc.__traceback__)
        if not await asyncio.shield(closing):
            raise
    else:
        await asyncio.shield(asyncio.to_thread(manager.__exit__, None, None, None))


def _close_late(opened: asyncio.Future[Any], manager: Any) -> None:
    if not opened.cancelled() and opened.exception() is None:
        asyncio.get_running_loop().run_in_executor(None, manager.__exit__, None, None, None)


async def _drafts(
    drafting: Drafting, request: ProjectionRequest, timeout_s: float | None
) -> dict[int, Outcome]:
    """Every section that drafts this turn, started at once and awaited together up to the
    limit: its rows and meta, or what went wrong, by ``id`` of its registration. Every outcome
    is taken, so a failure that strict mode does not get to (it raises for the first in draft
    order) is never reported by asyncio as unretrieved."""
    running = [
        (reg, asyncio.ensure_future(_guarded(reg.section, request, timeout_s)))
        for reg, why in drafting
        if why is None
    ]
    tasks = [task for _reg, task in running]
    late: set[asyncio.Future[Any]] = set()
    try:
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
    finally:  # the limit, or the turn itself cancelled: nothing is left running unowned
        late.update(task for task in tasks if not task.done())
        for task in late:
            abandon(task)
    outcomes: dict[int, Outcome] = {}
    for reg, task in running:
        if task in late:
            assert timeout_s is not None  # without a limit, nothing is left running
            outcomes[id(reg)] = _late(reg.section, timeout_s)
        elif task.cancelled():  # by the provider itself: not the turn's cancellation
            outcomes[id(reg)] = RuntimeError("the draft cancelled itself (asyncio.CancelledError)")
        else:
            error = task.exception()
            outcomes[id(reg)] = error if error is not None else task.result()
    return outcomes


def _planned(
    drafting: Drafting, outcomes: Mapping[int, Outcome], limit: int | None, strict: bool
) -> tuple[list[SectionPlan], list[Skipped]]:
    """The drafted sections laid out, and the rest with why, in draft order (both of acompose's
    ways of drafting end here, as the sync path does): a row the core cannot lay out fails its
    section, and in strict mode the first failing section raises."""
    plans: list[SectionPlan] = []
    skipped: list[Skipped] = []
    for reg, why in drafting:
        if why is not None:
            skipped.append((reg, why, None))
            continue
        outcome = outcomes[id(reg)]
        if not isinstance(outcome, BaseException):
            rows, meta = outcome
            try:  # laying the rows out belongs to the section too, as on the sync path
                plan = SectionPlan(reg.section, reg.plugin, rows, meta, limit)
            except (Exception, SystemExit) as exc:
                outcome = exc
            else:
                plans.append(plan)
                continue
        if not isinstance(outcome, (Exception, SystemExit)):
            raise outcome
        skipped.append((reg, None, draft_failed(reg, outcome, strict)))
    return plans, skipped


#: Set inside ``per_read()``: every turn takes the per-read route, whatever its store.
_per_read: contextvars.ContextVar[bool] = contextvars.ContextVar("contextplane_per_read", default=False)


@contextlib.contextmanager
def per_read() -> Iterator[None]:
    """Compose the turns inside on the per-read route (each section's ``adraft`` awaited, each
    read its own hop) even on a store that reads in worker threads, where ``acompose`` would
    compose the turn in one worker thread: how the conformance kit checks a section's ``adraft``
    against its ``draft`` (CTX-ASYNC-PARITY) whatever store the check uses."""
    token = _per_read.set(True)
    try:
        yield
    finally:
        _per_read.reset(token)


def reads_in_threads(store: Any) -> bool:
    """True when the store's async reads would only run its synchronous ones in worker threads:
    it says so (``threaded_async``, the embedded store without an async embedder), or it has no
    async reads at all (``contextplane.store.aio`` then hops a thread per read). Asked of the
    store before its view is opened; a store with an async view is never one."""
    if getattr(store, "aconsistent_read", None) is not None:
        return False
    declared = getattr(store, "threaded_async", None)
    if declared is not None:
        return bool(declared)
    return getattr(store, "asearch", None) is None and getattr(store, "alist_chunks", None) is None


def _one_hop(store: Any, drafting: Drafting) -> bool:
    """Whether the whole turn can be composed in one worker thread: its memory is read in
    threads anyway and every section that drafts has a synchronous form."""
    return (
        store is not None
        and not _per_read.get()
        and reads_in_threads(store)
        and not any(why is None and inspect.iscoroutinefunction(reg.section.draft) for reg, why in drafting)
    )


def _drafted_here(
    section: ContextSection, request: ProjectionRequest, timeout_s: float | None
) -> Outcome:
    """One synchronous draft in the calling thread, exactly as ``projection.compose`` makes it
    (an awaitable it returns is run to completion; one over the limit is discarded)."""
    started = time.perf_counter()
    try:
        result = section.draft(request)
        if inspect.isawaitable(result):
            result = run_to_completion(result, timeout_s)
        rows, meta = _as_rows(result, section.name)
        elapsed = time.perf_counter() - started
        if timeout_s is not None and elapsed > timeout_s:
            raise overran(elapsed, timeout_s)
    except (Exception, SystemExit) as exc:  # sys.exit() in a provider fails its section only
        return exc
    return rows, meta


def _stuck(timeout_s: float) -> TimeoutError:
    """The error of a synchronous provider still running in a worker thread at the limit."""
    return TimeoutError(
        f"no result within the {timeout_s:.3f}s limit (context.provider_timeout_ms); no longer "
        "awaited (a synchronous provider cannot be cancelled, so its worker thread runs on)"
    )


class _OneHop:
    """A turn composed in one worker thread: the view opened, every section's synchronous draft
    made in draft order, the view closed, the projection assembled and the observers told, as
    ``projection.compose`` does it, for one hand-off (``contextplane.handoff``) instead of one
    per read.

    Why: on a store that reads in worker threads anyway (the embedded SQLite store), a hop per
    read (open the view, each section's reads, close and record) cost more than the reads of a
    one-turn composition (bench/async_bench.py); the loop gains nothing from awaiting them.

    The loop keeps the time limit: it waits until the draft in progress has run for
    ``context.provider_timeout_ms``, then takes the turn back (``give_up``): that draft is
    reported late, the sections not yet drafted are drafted the ordinary way (``_drafts``) on
    the same view, and the loop closes the view and records. Everything the two threads share
    is read and written under ``lock``; ``finishing`` (the thread is past its last draft) and
    ``given_up`` (the loop took the turn back) exclude each other."""

    def __init__(
        self,
        request: ProjectionRequest,
        host: PluginHost,
        strict: bool,
        drafting: Drafting,
        timeout_s: float | None,
        turn: TurnState | None = None,
    ) -> None:
        self.request, self.host, self.strict, self.drafting, self.timeout_s = (
            request,
            host,
            strict,
            drafting,
            timeout_s,
        )
        self.turn = turn
        self.lock = threading.Lock()
        self.pending = collections.deque(reg for reg, why in drafting if why is None)
        self.outcomes: dict[int, Outcome] = {}
        #: The draft in progress in the thread, and when it started.
        self.running: tuple[Registered[ContextSection], float] | None = None
        self.manager: Any = None
        self.seen: ProjectionRequest = request
        self.position: Any = None
        self.finishing = False
        self.given_up = False

    # ------------------------------------------------------------------ the worker thread

    def run(self) -> ProjectedContext | None:
        """The turn, in the worker thread; None when the loop took it back first."""
        request = self.request
        store = request.knowledge_store
        opener = getattr(store, "consistent_read", None)
        if opener is None:
            warn_no_view(store)
        manager = contextlib.nullcontext(store) if opener is None else opener()
        view = manager.__enter__()
        try:
            position = position_of(view) if request.record and not request.incognito else None
            seen = request if view is request.knowledge_store else request.with_store(view)
        except BaseException as exc:
            manager.__exit__(type(exc), exc, exc.__traceback__)
            raise
        with self.lock:
            if self.given_up:  # the turn was cancelled before its view opened: nobody else closes it
                manager.__exit__(None, None, None)
                return None
            self.manager, self.seen, self.position = manager, seen, position
        try:
            while True:
                with self.lock:
                    if self.given_up:
                        return None  # the loop owns the view now
                    if not self.pending:
                        self.finishing = True
                        break
                    reg = self.pending.popleft()
                    self.running = (reg, time.perf_counter())
                outcome = _drafted_here(reg.section, seen, self.timeout_s)
                with self.lock:
                    self.running = None
                    self.outcomes[id(reg)] = outcome
            plans, skipped = _planned(self.drafting, self.outcomes, row_limit(request.config), self.strict)
        except BaseException as exc:
            with self.lock:
                mine = not self.given_up
                self.finishing = True
            if mine:
                manager.__exit__(type(exc), exc, exc.__traceback__)
                raise
            return None
        manager.__exit__(None, None, None)
        projection = assemble(request, plans, skipped, self.host, position, self.turn)
        if projection.injection is not None:
            self.host.notify_projection(projection, request)
        return projection

    # ------------------------------------------------------------------ the loop

    def _patience(self, timeout_s: float) -> float:
        """How long to wait before looking again: until the draft in progress reaches the
        limit; a whole limit while none is running (the view opening, or between drafts)."""
        with self.lock:
            running = self.running
        if running is None:
            return timeout_s
        return max(running[1] + timeout_s - time.perf_counter(), 0.0)

    def _take_back(self, overdue: float | None) -> tuple[dict[int, Outcome], Drafting] | None:
        """Take the turn back from the thread, unless it is past its last draft (or, with
        ``overdue``, unless the draft in progress has run that long): what was drafted, with
        the draft in progress as late, and the sections still to draft."""
        with self.lock:
            if self.finishing:
                return None
            running = self.running
            if overdue is not None and (running is None or time.perf_counter() - running[1] < overdue):
                return None
            self.given_up = True
            outcomes = dict(self.outcomes)
            if running is not None and overdue is not None:
                outcomes[id(running[0])] = _stuck(overdue)
            return outcomes, tuple((reg, None) for reg in self.pending)

    async def compose(self) -> ProjectedContext:
        """The turn's projection: the thread's, or the loop's once it took the turn back."""
        future = hand_off(self.run)  # a cancelled caller cancels only this future; run() goes on
        timeout_s = self.timeout_s
        try:
            if timeout_s is None:
                done = await future
            else:
                while True:
                    if await settled_within(future, self._patience(timeout_s)):
                        done = future.result()
                        break
                    taken = self._take_back(timeout_s)
                    if taken is not None:
                        return await self._finish_here(*taken)
        except asyncio.CancelledError:
            if self._take_back(None) is not None and self.manager is not None:
                await asyncio.shield(asyncio.to_thread(self.manager.__exit__, None, None, None))
            raise
        assert done is not None  # the thread returns None only once the loop took the turn back
        return done

    async def _finish_here(self, outcomes: dict[int, Outcome], rest: Drafting) -> ProjectedContext:
        """The rest of the turn on the loop, after the draft in progress overran the limit: the
        sections not yet drafted drafted the ordinary way, on the same view."""
        request, manager, host = self.request, self.manager, self.host
        try:
            outcomes.update(await _drafts(rest, self.seen, self.timeout_s))
            plans, skipped = _planned(self.drafting, outcomes, row_limit(request.config), self.strict)
            projection = assemble(request, plans, skipped, host, self.position, self.turn)
        except BaseException as exc:
            await asyncio.shield(asyncio.to_thread(manager.__exit__, type(exc), exc, exc.__traceback__))
            raise

        def close_then_record() -> None:
            manager.__exit__(None, None, None)
            if projection.injection is not None:
                host.notify_projection(projection, request)

        await asyncio.shield(asyncio.to_thread(close_then_record))
        return projection


async def acompose(
    request: ProjectionRequest, *, host: PluginHost | None = None, strict: bool | None = None
) -> ProjectedContext:
    """``projection.compose`` without blocking the event loop: the same projection for the same
    request, with the turn's providers drafting concurrently (see the module docstring)."""
    return await acompose_turn(request, host, strict, None)


async def acompose_turn(
    request: ProjectionRequest, host: PluginHost | None, strict: bool | None, turn: TurnState | None
) -> ProjectedContext:
    """``acompose`` for a ``Runtime`` (see ``projection.compose_turn``)."""
    request, host, strict, drafting, timeout_s = prepare(request, host, strict, wired=turn is not None)
    store = request.knowledge_store if needs_memory(drafting) else None
    if _one_hop(store, drafting):
        return await _OneHop(request, host, strict, drafting, timeout_s, turn).compose()
    recording = request.record and not request.incognito
    async with aconsistent_view(store, locate=recording) as (view, position):
        seen = request if view is None or view is request.knowledge_store else request.with_store(view)
        outcomes = await _drafts(drafting, seen, timeout_s)
        plans, skipped = _planned(drafting, outcomes, row_limit(request.config), strict)
        projection = assemble(request, plans, skipped, host, position, turn)
    if projection.injection is not None:  # told once the view is closed
        await host.anotify_projection(projection, request)
    return projection


async def acompose_projected_context(
    query: str,
    knowledge_store: Any = None,
    skills_index: Sequence[Any] | None = None,
    state: Mapping[str, Any] | None = None,
    *,
    incognito: bool = False,
    goal_turn: bool = False,
    budget_tokens: int | None = None,
    record: bool = True,
    session_id: str = "",
    turn_index: int = 0,
    project: str | None = None,
    surface: Surface | str = Surface.NATIVE,
    only_sections: Iterable[str] | None = None,
    context_window: int | None = None,
    backend: Any = None,
    host: PluginHost | None = None,
    config: Config | None = None,
    strict: bool | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ProjectedContext:
    """``compose_projected_context`` for an event loop: the same arguments, the same projection."""
    request, host = d8_request(
        query,
        knowledge_store,
        skills_index,
        state,
        incognito=incognito,
        goal_turn=goal_turn,
        budget_tokens=budget_tokens,
        record=record,
        session_id=session_id,
        turn_index=turn_index,
        project=project,
        surface=surface,
        only_sections=only_sections,
        context_window=context_window,
        backend=backend,
        host=host,
        config=config,
        extra=extra,
    )
    return await acompose(request, host=host, strict=strict)
