"""The sync driver: a turn composed in the calling thread, with no event loop.

Why no loop: a turn whose sections are all synchronous (the usual one) is about a millisecond
of work, and an event loop's start and stop would cost a good part of it (bench/core_bench.py
holds the ratio). The drafting loop (``engine.drafting.draft_in_order``) drafts every section
here through ``draft_here``, so it never awaits and one step runs it to completion; an async
provider is run to completion by ``draft_here`` itself, cancelled at the limit. The one-hop
route of the async composition runs ``run_turn`` in one worker thread, so it is this driver
too, with the loop watching the time limit from outside (``engine.async_driver``).
"""

from __future__ import annotations

from typing import Any

from contextplane.engine.assembly import assemble, prepare, row_limit, split
from contextplane.engine.drafting import (
    HERE,
    TurnDrafts,
    draft_here,
    draft_in_order,
    open_view,
    planned,
    run_here,
)
from contextplane.observability.turn import TurnState
from contextplane.plugins import PluginHost
from contextplane.request import ProjectionRequest
from contextplane.types import ProjectedContext


def compose(
    request: ProjectionRequest, *, host: PluginHost | None = None, strict: bool | None = None
) -> ProjectedContext:
    """Compose the projected context for one request (ADR D6, D8): the one composition.

    Sections the request forbids (incognito, goal turn, a subagent's subset) are never called.
    ``request.record`` false composes without notifying observers (previews); incognito
    projections are never handed to ``observe_projection``. ``contextplane.aprojection.acompose``
    is the same composition for an event loop, and returns the same projection."""
    return compose_turn(request, host, strict, None)


def compose_turn(
    request: ProjectionRequest, host: PluginHost | None, strict: bool | None, turn: TurnState | None
) -> ProjectedContext:
    """``compose`` for a ``Runtime``: ``turn`` (the runtime's backend and recorders) is attached
    to the projection before observers are told, and the request is taken as wired (its store
    and backend resolved once, by the runtime). ``turn=None`` is ``compose``."""
    request, host, strict, drafting, timeout_s = prepare(request, host, strict, wired=turn is not None)
    to_draft, _suppressed, memory = split(drafting)
    regs = [t[0] for t in to_draft]
    work = TurnDrafts(drafting, regs, request, timeout_s, row_limit(request.config), strict)
    projection = run_turn(request, host, work, request.knowledge_store if memory else None, turn)
    assert projection is not None  # only the one-hop route's loop takes a turn back
    return projection


def run_turn(
    request: ProjectionRequest, host: PluginHost, work: TurnDrafts, store: Any, turn: TurnState | None
) -> ProjectedContext | None:
    """The whole turn in this thread: the view opened (the one opener), every section drafted
    in draft order, the view closed, the projection assembled and the observers told. None when
    the event loop took the turn back first (the one-hop route: it then closes the view and
    records)."""
    recording = request.record and not request.incognito
    manager, view, position = open_view(store, recording)
    try:
        seen = request if view is None or view is request.knowledge_store else request.with_store(view)
    except BaseException as exc:
        manager.__exit__(type(exc), exc, exc.__traceback__)
        raise
    with work.lock:
        if work.owner is not HERE:  # the turn was cancelled before its view opened: nobody else closes it
            manager.__exit__(None, None, None)
            return None
        work.manager, work.seen, work.position = manager, seen, position
    try:
        run_here(draft_in_order(work, draft_here, HERE))
        if work.owner is not HERE:
            return None  # the loop owns the view now
        plans, skipped = planned(work.drafting, work.outcomes, work.strict)
    except BaseException as exc:
        with work.lock:
            mine = work.owner is HERE
            work.finishing = True
        if mine:
            manager.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return None
    manager.__exit__(None, None, None)
    projection = assemble(request, plans, skipped, host, position, turn)
    if projection.injection is not None:
        host.notify_projection(projection, request)
    return projection
