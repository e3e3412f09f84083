"""The event loop's driver: the same turn as ``engine.driver``, without blocking the loop.

Agent runtimes are async (LangGraph's ``ainvoke``, MCP servers, web servers). The sync
composition run inside a loop blocks every concurrent session of the process for as long as
its store queries and query embeddings take. ``acompose`` composes the same projection, byte
for byte, without blocking the loop:

- **Same output by construction.** The request is checked by ``assembly.prepare``, every
  section drafted by the one drafting loop (``drafting.draft_in_order``) and everything after
  drafting is ``assembly.assemble``: only how a draft is started differs.
- **Two routes, one result.** When the turn's memory is read in worker threads anyway (the
  embedded SQLite store without an async embedder, or any store with no async reads: see
  ``reads_in_threads``) and every section has a synchronous form, the whole turn is the sync
  driver's ``run_turn`` in **one worker thread** (``_OneHop``), for one hand-off instead of one
  per read (a hop per read cost more than a one-turn composition's reads: bench/async_bench.py).
  Otherwise the turn takes the **per-read route**: every section starts at once as a task
  (``drafting.draft_task``: ``adraft`` or an ``async def draft`` awaited on the loop,
  synchronous ones in worker threads, on the loop when ``cheap=True``), collected in draft
  order, so which finishes first changes nothing. ``per_read()`` forces the per-read route (the
  conformance kit checks ``adraft`` so).
- **The time limit is enforced.** On the per-read route ``context.provider_timeout_ms`` counts
  from the moment the turn asks for the drafts: at the limit an async provider is cancelled; a
  synchronous one in a worker thread cannot be, so the turn stops waiting for it and its thread
  runs on. On the one-hop route the loop watches the draft in progress: once it has run for the
  limit the loop takes the turn back, reports that draft late, drafts the sections not yet
  drafted through the same loop as tasks against the same view, and closes the view and
  records itself.
- **One consistent read**, opened by ``drafting.open_view`` in a worker thread (or the store's
  ``aconsistent_read()``), closed in a worker thread. Failures and strict mode are the sync
  path's, in draft order.
- **Recording stays off the loop.** On the one-hop route the observers are told in the turn's
  worker thread, after the view closed; on the per-read route ``PluginHost.anotify_projection``
  is awaited. Either way before ``acompose`` returns, so the injection-log row is written before
  the turn's first model call records its snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import time
from collections.abc import Iterator
from typing import Any

from contextplane.engine.assembly import (
    Drafting,
    assemble,
    needs_memory,
    prepare,
    row_limit,
    split,
)
from contextplane.engine.drafting import (
    HERE,
    LOOP,
    TurnDrafts,
    aview,
    draft_in_order,
    draft_task,
    planned,
    stuck,
)
from contextplane.engine.driver import run_turn
from contextplane.handoff import hand_off, settled_within
from contextplane.observability.turn import TurnState
from contextplane.plugins import PluginHost
from contextplane.request import ProjectionRequest
from contextplane.types import ProjectedContext

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


class _OneHop:
    """The loop's side of a turn composed in one worker thread (``driver.run_turn``).

    The loop keeps the time limit: it waits until the draft in progress has run for
    ``context.provider_timeout_ms``, then takes the turn back (``TurnDrafts.owner``): that draft
    is reported late, the sections not yet drafted are drafted through the same loop as tasks
    on the same view, and the loop closes the view and records."""

    def __init__(
        self, request: ProjectionRequest, host: PluginHost, work: TurnDrafts, turn: TurnState | None
    ) -> None:
        self.request, self.host, self.work, self.turn = request, host, work, turn

    def run(self) -> ProjectedContext | None:
        """The turn, in the worker thread; None when the loop took it back first."""
        return run_turn(self.request, self.host, self.work, self.request.knowledge_store, self.turn)

    def _patience(self, timeout_s: float) -> float:
        """How long to wait before looking again: until the draft in progress reaches the
        limit; a whole limit while none is running (the view opening, or between drafts)."""
        with self.work.lock:
            running = self.work.running
        if running is None:
            return timeout_s
        return max(running[1] + timeout_s - time.perf_counter(), 0.0)

    def _take_back(self, overdue: float | None) -> bool:
        """Take the turn back from the thread, unless it is past its last draft (or, with
        ``overdue``, unless the draft in progress has run that long); the draft in progress is
        then reported late."""
        work = self.work
        with work.lock:
            if work.finishing or work.owner is not HERE:
                return False
            running = work.running
            if overdue is not None and (running is None or time.perf_counter() - running[1] < overdue):
                return False
            work.owner = LOOP
            if running is not None and overdue is not None:
                work.outcomes[id(running[0])] = stuck(overdue)
            return True

    async def compose(self) -> ProjectedContext:
        """The turn's projection: the thread's, or the loop's once it took the turn back."""
        future = hand_off(self.run)  # a cancelled caller cancels only this future; run() goes on
        timeout_s = self.work.timeout_s
        try:
            if timeout_s is None:
                done = await future
            else:
                while True:
                    if await settled_within(future, self._patience(timeout_s)):
                        done = future.result()
                        break
                    if self._take_back(timeout_s):
                        return await self._finish_here()
        except asyncio.CancelledError:
            if self._take_back(None) and (manager := self.work.manager) is not None:
                await asyncio.shield(asyncio.to_thread(manager.__exit__, None, None, None))
            raise
        assert done is not None  # the thread returns None only once the loop took the turn back
        return done

    async def _finish_here(self) -> ProjectedContext:
        """The rest of the turn on the loop, after the draft in progress overran the limit."""
        request, work, host = self.request, self.work, self.host
        manager = work.manager
        assert manager is not None  # a draft ran, so the view was open
        try:
            await draft_in_order(work, draft_task, LOOP)
            plans, skipped = planned(work.drafting, work.outcomes, work.strict)
            projection = assemble(request, plans, skipped, host, work.position, self.turn)
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
    """``acompose`` for a ``Runtime`` (see ``driver.compose_turn``)."""
    request, host, strict, drafting, timeout_s = prepare(request, host, strict, wired=turn is not None)
    store = request.knowledge_store if needs_memory(drafting) else None
    regs = [t[0] for t in split(drafting)[0]]
    limit = row_limit(request.config)
    if _one_hop(store, drafting):
        work = TurnDrafts(drafting, regs, request, timeout_s, limit, strict, watched=True)
        return await _OneHop(request, host, work, turn).compose()
    recording = request.record and not request.incognito
    async with aview(store, locate=recording) as (view, position):
        seen = request if view is None or view is request.knowledge_store else request.with_store(view)
        work = TurnDrafts(drafting, regs, seen, timeout_s, limit, strict)
        work.owner = LOOP
        await draft_in_order(work, draft_task, LOOP)
        plans, skipped = planned(drafting, work.outcomes, strict)
        projection = assemble(request, plans, skipped, host, position, turn)
    if projection.injection is not None:  # told once the view is closed
        await host.anotify_projection(projection, request)
    return projection
