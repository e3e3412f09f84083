"""A plan of record writes and its two drivers: the one record path, sync or from a loop.

A *plan* is a generator that yields one ``Write`` per row and is sent back what the write
returned (a trajectory entry's reference, which later rows cite); it performs no I/O
(``contextplane.recorder`` builds them). ``write`` performs a plan with a backend's synchronous
record methods; ``awrite`` from an event loop, never blocking it: a part with an async method
of its own (``arecord``, ``aput``, ...; a backend with an async client) is awaited on the loop,
and from the first write that would only be a thread hop (a part declaring ``threaded_async``,
as the embedded SQLite parts do, one with no such method, or the trajectory, a file) the rest
of the plan runs in one worker thread rather than a hop per row. A write that fails is thrown
into the plan, so a plan can say what failed (the records observer marks the turn) and re-raise.

``Writes`` binds a plan to where it writes. It is what a *sans-IO observer* returns: an
``observe_*`` hook implementation marked ``sans_io`` is called on the event loop and returns
its rows instead of writing them, and the plugin host performs them with the driver of its
path (``write`` from ``notify_*``, ``awrite`` from ``anotify_*``). The records observer is
one, so it is written once, not as a sync hook and an async twin. This module sits beside the
record protocols, not in ``contextplane.observability``, because the host drives it and must
not import the record pipeline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar, cast

import attrs

from contextplane.records.aio import in_threads

__all__ = ["Plan", "Write", "Writes", "awrite", "is_sans_io", "perform", "sans_io", "write"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: The attribute ``sans_io`` sets on a hook implementation.
SANS_IO = "contextplane_sans_io"


@attrs.frozen
class Write:
    """One row for the backend: call ``<part>.<method>(*args)`` (``part``: ``injections``,
    ``snapshots`` or ``trajectory``; ``method``: the record protocol's synchronous name; a
    backend's async form is ``a<method>``). What the call returns is sent back to the plan."""

    part: str
    method: str
    args: tuple[Any, ...]


#: A recording plan: yields the rows to write, is sent what each write returned, returns ``T``.
Plan = Generator[Write, object, T]


@attrs.frozen
class Writes(Generic[T]):
    """A plan and the backend (or anything with the record parts as attributes) it writes to:
    what a sans-IO observer returns for the host to perform."""

    parts: Any
    plan: Plan[T]


def sans_io(function: F) -> F:
    """Mark an ``observe_*`` hook implementation as sans-IO: it does no I/O and may return
    ``Writes``, so the host calls it on the event loop and performs its rows itself."""
    setattr(function, SANS_IO, True)
    return function


def is_sans_io(function: object) -> bool:
    """True for a hook implementation marked ``sans_io``."""
    return getattr(function, SANS_IO, False) is True


def perform(parts: Any, row: Write) -> object:
    """One write with the part's synchronous method."""
    return getattr(getattr(parts, row.part), row.method)(*row.args)


def write(parts: Any, plan: Plan[T]) -> T:
    """Run ``plan`` to its end, writing every row synchronously; returns what the plan returns."""
    return _finish(parts, plan, None)


def _finish(parts: Any, plan: Plan[T], first: Write | None) -> T:
    """Run ``plan`` on from ``first`` (a row it yielded and is waiting on; None: not started)."""
    try:
        row = next(plan) if first is None else first
        while True:
            try:
                done = perform(parts, row)
            except Exception as exc:
                row = plan.throw(exc)
            else:
                row = plan.send(done)
    except StopIteration as end:
        return cast(T, end.value)


async def awrite(parts: Any, plan: Plan[T]) -> T:
    """``write`` for an event loop: native async writes awaited, the rest in one worker thread."""
    try:
        row = next(plan)
        while True:
            part = getattr(parts, row.part)
            native = None if in_threads(part) else getattr(part, "a" + row.method, None)
            if native is None:
                return await asyncio.to_thread(_finish, parts, plan, row)
            try:
                done = await native(*row.args)
            except Exception as exc:
                row = plan.throw(exc)
            else:
                row = plan.send(done)
    except StopIteration as end:
        return cast(T, end.value)
