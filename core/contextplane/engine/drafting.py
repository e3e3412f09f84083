"""The one drafting loop and the one view opener, for every way a turn is composed.

Why one loop: the sync composition, the async one-hop route and the async per-read route each
had their own, so a rule about drafting (the time limit, a failure's report, strict mode) was
written three times and kept equal by tests. ``draft_in_order`` walks the turn's sections in
draft order and *starts* each through the driver's ``Start``:

- ``draft_here`` drafts it in the calling thread and returns its outcome (the sync driver, and
  the one-hop route, which runs the sync driver in one worker thread): ``draft`` is called as
  the sync path always called it, an awaitable it returns run to completion (cancelled at the
  limit), one that returned after the limit discarded;
- ``draft_task`` starts it as a task of the running loop (the per-read route): ``adraft`` or an
  ``async def draft`` awaited, a synchronous one in a worker thread (on the loop when
  ``cheap``), and the loop waits for all of them together, up to the limit, cancelling an async
  provider that never returns.

A loop whose every section was drafted here never awaits anything, so the sync driver runs it to
completion without an event loop. The state a turn's drafting shares (``TurnDrafts``) is read
and written under its lock, because on the one-hop route the event loop may take the turn back
from the worker thread when a draft overruns the limit: it then owns the drafting (``owner``)
and drafts what is left through the same loop.

The view: ``open_view`` opens the store's point-in-time view and asks the history position a
recorded turn keeps, in the calling thread (the sync driver's, or a worker's); ``aview`` is the
same for an event loop (a store's native ``aconsistent_read()``, else ``open_view`` in a worker
thread).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import logging
import operator
import threading
import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, Final, TypeGuard, cast

from contextplane.aio import abandon, over_limit, overran, run_to_completion
from contextplane.engine.assembly import Drafting, Skipped
from contextplane.errors import SectionError, ValidationError
from contextplane.fitting import SectionPlan
from contextplane.handoff import hand_off
from contextplane.notices import log_failure, log_once
from contextplane.plugins import Registered
from contextplane.request import ProjectionRequest
from contextplane.sections import ContextSection, Draft, DraftMeta, Row

log = logging.getLogger("contextplane.projection")

_ROW_ID = operator.attrgetter("id")
_ROWS_ONLY = frozenset((Row,))
#: The meta of a draft that gave none (read-only: a report copies the meta it keeps).
_NO_META: Mapping[str, Any] = types.MappingProxyType({})

#: One section's draft: laid out, or what went wrong.
Outcome = SectionPlan | BaseException


def awaitable(result: Any) -> TypeGuard[Awaitable[Any]]:
    """``inspect.isawaitable``, answered at once for the list or tuple most drafts return."""
    return type(result) is not list and type(result) is not tuple and inspect.isawaitable(result)


def as_rows(result: Any, name: str) -> tuple[tuple[Row, ...], Mapping[str, Any]]:
    """Validate a provider's result; raise ValidationError describing garbage precisely."""
    if type(result) is list or type(result) is tuple:  # the usual draft, spared the ABC checks
        rows, meta = tuple(result), _NO_META
    elif isinstance(result, Draft):
        rows, meta = result.rows, result.meta
        if result.heading is not None or result.render_key is not None:
            meta = DraftMeta(meta, result.heading, result.render_key)
    elif isinstance(result, Iterable) and not isinstance(result, str | bytes | Mapping):
        rows, meta = tuple(result), _NO_META
    else:
        raise ValidationError(
            f"section {name!r} returned {type(result).__name__}; expected a Draft or an iterable of Row"
        )
    # One pass answers for the usual draft (every item a plain Row, the ids distinct); only
    # when it does not is each rule checked in turn, for the error that names the culprit.
    if len({row.id for row in rows if type(row) is Row}) == len(rows):
        return rows, meta
    if not _ROWS_ONLY.issuperset(map(type, rows)):
        for i, row in enumerate(rows):
            if not isinstance(row, Row):
                raise ValidationError(
                    f"section {name!r} returned {type(row).__name__} at position {i}; "
                    "expected contextplane.Row"
                )
    if len(set(map(_ROW_ID, rows))) != len(rows):
        seen: set[str] = set()
        for row in rows:
            if row.id in seen:
                raise ValidationError(
                    f"section {name!r} returned the row id {row.id!r} twice; ids must be unique"
                )
            seen.add(row.id)
    return rows, meta


def draft_failed(reg: Registered[ContextSection], exc: BaseException, strict: bool) -> str:
    """A provider's failure: raised in strict mode, else logged once and returned as the
    report's error text (the same on every route)."""
    section = reg.section
    message = f"{type(exc).__name__}: {exc}"
    if strict:
        raise SectionError(
            f"context section {section.name!r} of plugin {reg.plugin!r} failed: {message} "
            "(strict mode; fix the plugin or disable it)"
        ) from exc
    log_failure(
        log,
        ("draft", reg.plugin, section.name, message),
        "context section %r of plugin %r failed, so it is left out of this projection: %s",
        section.name,
        reg.plugin,
        message,
        exc=exc,
    )
    return message


# --------------------------------------------------------------------------- the view


_NO_VIEW = "no consistent_read"
#: The view of a composition that reads no memory (a context manager is reusable when stateless).
_NO_VIEW_NEEDED: contextlib.nullcontext[None] = contextlib.nullcontext()


def warn_no_view(store: Any) -> None:
    """Say once per store type that its projections cannot promise one committed state."""
    log_once(
        log,
        (_NO_VIEW, type(store)),
        logging.WARNING,
        "store %s has no consistent_read(); the sections of one projection may see different "
        "committed states (implement consistent_read, see docs/hooks.md)",
        type(store).__name__,
    )


def position_of(view: Any) -> Any:
    """The history position of the state ``view`` reads, when its store keeps a history
    (looked up on the class, so a proxy's ``__getattr__`` is never asked). A store that fails
    to say costs the turn its replayability, never the turn."""
    reader = getattr(type(view), "history_position", None)
    if reader is None:
        return None
    try:
        return reader(view)
    except Exception as exc:
        log_failure(
            log,
            ("history_position", type(view)),
            "store view %s failed to report its history position, so this turn cannot be replayed: %s",
            type(view).__name__,
            exc,
            exc=exc,
        )
        return None


def consistent_view(store: Any) -> contextlib.AbstractContextManager[Any]:
    """The store's point-in-time view for one composition, or the store itself (logged once)
    when it offers none: then each section reads whatever is committed when it reads."""
    if store is None:
        return _NO_VIEW_NEEDED
    opener = getattr(store, "consistent_read", None)
    if opener is None:
        warn_no_view(store)
        return contextlib.nullcontext(store)
    return cast(contextlib.AbstractContextManager[Any], opener())


def open_view(store: Any, locate: bool) -> tuple[contextlib.AbstractContextManager[Any], Any, Any]:
    """The one view opener: the view's manager (entered; the caller exits it), the view, and
    the history position it reads at when ``locate`` (a recorded turn; else None). Opening and
    locating are both I/O, so a loop runs this in one worker thread."""
    manager = consistent_view(store)
    view = manager.__enter__()
    if not locate or view is None:
        return manager, view, None
    try:
        return manager, view, position_of(view)
    except BaseException as exc:
        manager.__exit__(type(exc), exc, exc.__traceback__)
        raise


@contextlib.asynccontextmanager
async def aview(store: Any, locate: bool = False) -> AsyncIterator[tuple[Any, Any]]:
    """``open_view`` for an event loop: the view and its position, from the store's
    ``aconsistent_read()`` when it has one, else opened in a worker thread and closed in
    another (never leaked, even when the turn is cancelled while it opens)."""
    if store is None:
        yield None, None
        return
    native = getattr(store, "aconsistent_read", None)
    if native is not None:
        async with native() as view:
            yield view, (await asyncio.to_thread(position_of, view) if locate else None)
        return
    opening = asyncio.ensure_future(asyncio.to_thread(open_view, store, locate))
    try:
        manager, view, position = await asyncio.shield(opening)
    except asyncio.CancelledError:
        # Cancelled while the thread opens the view: close it once it is open, never leak it.
        opening.add_done_callback(_close_late)
        raise
    try:
        yield view, position
    except BaseException as exc:
        closing = asyncio.to_thread(manager.__exit__, type(exc), exc, exc.__traceback__)
        if not await asyncio.shield(closing):
            raise
    else:
        await asyncio.shield(asyncio.to_thread(manager.__exit__, None, None, None))


def _close_late(opened: asyncio.Future[Any]) -> None:
    if not opened.cancelled() and opened.exception() is None:
        manager = opened.result()[0]
        asyncio.get_running_loop().run_in_executor(None, manager.__exit__, None, None, None)


# --------------------------------------------------------------------------- the loop

#: Who drafts a turn: the thread that drafts in order (the sync driver, the one-hop worker),
#: or the event loop once it took the turn back.
HERE: Final = "here"
LOOP: Final = "loop"


class TurnDrafts:
    """One turn's drafting: the sections still to draft, each outcome by ``id`` of its
    registration, the draft in progress (and when it started), the view they read through,
    and who owns the drafting. Shared by a worker thread and the loop on the one-hop route, so
    read and written under ``lock`` when ``watched`` (the sync driver alone skips the lock);
    ``finishing`` (the thread is past its last draft) and a turn taken back by the loop
    (``owner`` LOOP) exclude each other."""

    __slots__ = (
        "drafting",
        "finishing",
        "limit",
        "lock",
        "manager",
        "outcomes",
        "owner",
        "pending",
        "position",
        "running",
        "seen",
        "strict",
        "timeout_s",
        "watched",
    )

    def __init__(
        self,
        drafting: Drafting,
        to_draft: Iterable[Registered[ContextSection]],
        seen: ProjectionRequest,
        timeout_s: float | None,
        limit: int | None,
        strict: bool,
        watched: bool = False,
    ) -> None:
        self.drafting, self.seen, self.timeout_s = drafting, seen, timeout_s
        self.limit, self.strict, self.watched = limit, strict, watched
        self.pending = collections.deque(to_draft)
        self.outcomes: dict[int, Outcome] = {}
        self.running: tuple[Registered[ContextSection], float] | None = None
        self.lock = threading.Lock()
        self.owner: str = HERE
        self.finishing = False
        self.manager: contextlib.AbstractContextManager[Any] | None = None
        self.position: Any = None


#: How a driver starts one section's draft: its outcome now, or a future of it.
Start = Callable[[Registered[ContextSection], TurnDrafts], "Outcome | asyncio.Future[Outcome]"]


async def draft_in_order(work: TurnDrafts, start: Start, owner: str) -> None:
    """The one drafting loop: every pending section started in draft order while ``owner``
    owns the turn, then the started tasks awaited together up to the limit (counted from the
    moment the turn asks for them). In strict mode a failure drafted here ends the loop: the
    first failing section in draft order raises, and nothing after it is drafted for nothing."""
    started: list[tuple[Registered[ContextSection], asyncio.Future[Outcome]]] = []
    lock, pending, outcomes, clock = work.lock, work.pending, work.outcomes, time.perf_counter
    watched, strict = work.watched, work.strict
    while True:
        if watched:  # the one-hop route: the loop may take the turn back between two steps
            with lock:
                if work.owner is not owner:
                    return  # the loop took the turn back: it drafts the rest
                if not pending:
                    work.finishing = owner is HERE
                    break
                reg = pending.popleft()
                work.running = (reg, clock())
        elif pending:
            reg = pending.popleft()
        else:
            break
        outcome = start(reg, work)
        if type(outcome) is not SectionPlan and isinstance(outcome, asyncio.Future):
            started.append((reg, outcome))
            continue
        if watched:
            with lock:
                work.running = None
                if work.owner is not owner:
                    return  # a late result: the loop reported this draft late already
                outcomes[id(reg)] = outcome
        else:
            outcomes[id(reg)] = outcome
        if strict and type(outcome) is not SectionPlan:
            with lock:
                work.finishing = owner is HERE
            break
    if started:
        await _settle(started, work)


async def _settle(
    started: list[tuple[Registered[ContextSection], asyncio.Future[Outcome]]], work: TurnDrafts
) -> None:
    """Await the started drafts up to the limit. Every outcome is taken, so a failure that
    strict mode does not get to is never reported by asyncio as unretrieved."""
    timeout_s = work.timeout_s
    tasks = [task for _reg, task in started]
    late: set[asyncio.Future[Any]] = set()
    try:
        await asyncio.wait(tasks, timeout=timeout_s)
    finally:  # the limit, or the turn itself cancelled: nothing is left running unowned
        late.update(task for task in tasks if not task.done())
        for task in late:
            abandon(task)
    for reg, task in started:
        outcome: Outcome
        if task in late:
            assert timeout_s is not None  # without a limit, nothing is left running
            outcome = _late(reg.section, timeout_s)
        elif task.cancelled():  # by the provider itself: not the turn's cancellation
            outcome = RuntimeError("the draft cancelled itself (asyncio.CancelledError)")
        else:
            error = task.exception()
            outcome = error if error is not None else task.result()
        work.outcomes[id(reg)] = outcome


def run_here(loop: Coroutine[Any, Any, None]) -> None:
    """Run a drafting loop that drafts every section in this thread to completion, without an
    event loop: it never awaits, so one step finishes it."""
    try:
        loop.send(None)
    except StopIteration:
        return
    loop.close()
    raise RuntimeError("a drafting loop run in this thread awaited (a driver started a task)")


def planned(
    drafting: Drafting, outcomes: Mapping[int, Outcome], strict: bool
) -> tuple[list[SectionPlan], list[Skipped]]:
    """The drafted sections laid out and the rest with why, in draft order (every route ends
    here): in strict mode the first failing section raises."""
    plans: list[SectionPlan] = []
    skipped: list[Skipped] = []
    for reg, why in drafting:
        if why is not None:
            skipped.append((reg, why, None))
            continue
        outcome = outcomes[id(reg)]
        if type(outcome) is SectionPlan:
            plans.append(outcome)
            continue
        if not isinstance(outcome, (Exception, SystemExit)):
            raise cast(BaseException, outcome)
        skipped.append((reg, None, draft_failed(reg, outcome, strict)))
    return plans, skipped


# --------------------------------------------------------------------------- starting a draft


def draft_here(reg: Registered[ContextSection], work: TurnDrafts) -> Outcome:
    """One section drafted in this thread, as the sync path drafts it: ``draft`` called (an
    awaitable it returns run to completion, cancelled at the limit), the rows checked and laid
    out; one that returned after the limit is discarded. Escaping and measuring the rows belong
    to the section too: a row the core cannot lay out fails that section, never the turn."""
    section, timeout_s = reg.section, work.timeout_s
    started = time.perf_counter()
    try:
        result = section.draft(work.seen)
        if type(result) is not list and awaitable(result):  # an async provider, run here
            result = run_to_completion(result, timeout_s)
        rows, meta = as_rows(result, section.name)
        elapsed = time.perf_counter() - started
        if timeout_s is not None and elapsed > timeout_s:
            raise overran(elapsed, timeout_s)
        return SectionPlan(section, reg.plugin, rows, meta, work.limit)
    except (Exception, SystemExit) as exc:  # sys.exit() in a provider fails its section only
        return exc


def draft_task(reg: Registered[ContextSection], work: TurnDrafts) -> asyncio.Future[Outcome]:
    """One section's draft started as a task of the running loop (the per-read route)."""
    return asyncio.ensure_future(_guarded(reg, work))


async def _guarded(reg: Registered[ContextSection], work: TurnDrafts) -> Outcome:
    """``_draft``, with a provider's ``sys.exit()`` handed back as its outcome: SystemExit
    raised in a task escapes asyncio and stops the whole event loop, so it is caught inside
    the task and fails that section only, as on the sync path."""
    try:
        rows, meta = await _draft(reg.section, work.seen, work.timeout_s)
        return SectionPlan(reg.section, reg.plugin, rows, meta, work.limit)
    except SystemExit as exc:
        return exc


class _Validated:
    """A synchronous draft already checked in its worker thread (so a generator it returned was
    consumed there, off the loop)."""

    __slots__ = ("meta", "rows")

    def __init__(self, rows: tuple[Row, ...], meta: Mapping[str, Any]) -> None:
        self.rows, self.meta = rows, meta


def _in_thread(section: ContextSection, request: ProjectionRequest) -> Any:
    result = section.draft(request)
    if inspect.isawaitable(result):
        return result
    return _Validated(*as_rows(result, section.name))


async def _draft(
    section: ContextSection, request: ProjectionRequest, timeout_s: float | None
) -> tuple[tuple[Row, ...], Mapping[str, Any]]:
    """One section's draft on the loop, run the way the section says it runs."""
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
    return as_rows(result, section.name)


def stuck(timeout_s: float) -> TimeoutError:
    """The error of a synchronous provider still running in a worker thread at the limit."""
    return TimeoutError(
        f"no result within the {timeout_s:.3f}s limit (context.provider_timeout_ms); no longer "
        "awaited (a synchronous provider cannot be cancelled, so its worker thread runs on)"
    )


def _late(section: ContextSection, timeout_s: float) -> TimeoutError:
    if section.asynchronous or section.cheap:
        return over_limit(timeout_s)
    return stuck(timeout_s)
