"""Writing a recorder's rows to a backend: one plan, a sync driver and an event-loop driver.

``contextplane.recorder`` decides what a turn's rows hold and performs no I/O; its plans yield
one ``Write`` per row. ``write`` performs them in order with the backend's synchronous record
methods. ``awrite`` performs them from an event loop, never blocking it: a part with an async
method of its own (``arecord``, ``aput``, ...; a backend with an async client) is awaited on
the loop, and from the first write that would only be a thread hop (a part declaring
``threaded_async``, as the embedded SQLite parts do, one with no such method, or the
trajectory, a file) the rest of the plan runs in one worker thread rather than a hop per row.
The rows are the plan's either way, so the two paths write the same rows.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar, cast

from contextplane.recorder import Plan, Write
from contextplane.records.aio import in_threads

__all__ = ["awrite", "perform", "write"]

T = TypeVar("T")


def perform(parts: Any, row: Write) -> object:
    """One write with the part's synchronous method (``parts``: a backend, or anything with
    the record parts as attributes)."""
    return getattr(getattr(parts, row.part), row.method)(*row.args)


def write(parts: Any, plan: Plan[T]) -> T:
    """Run ``plan`` to its end, writing every row synchronously; returns what the plan returns."""
    return _finish(parts, plan, None)


def _finish(parts: Any, plan: Plan[T], first: Write | None) -> T:
    """Run ``plan`` on from ``first`` (a row it yielded and is waiting on; None: not started)."""
    try:
        row = next(plan) if first is None else first
        while True:
            row = plan.send(perform(parts, row))
    except StopIteration as done:
        return cast(T, done.value)


async def awrite(parts: Any, plan: Plan[T]) -> T:
    """``write`` for an event loop: native async writes awaited, the rest in one worker thread."""
    try:
        row = next(plan)
        while True:
            part = getattr(parts, row.part)
            native = None if in_threads(part) else getattr(part, "a" + row.method, None)
            if native is None:
                return await asyncio.to_thread(_finish, parts, plan, row)
            row = plan.send(await native(*row.args))
    except StopIteration as done:
        return cast(T, done.value)
