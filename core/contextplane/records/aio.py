"""The records from an event loop: one adapter for every record part's async form.

``acall(part, "newest", 5)`` awaits the part's own async method (``anewest``: the
``AsyncSessionSummaries``, ``AsyncInjectionLog``, ``AsyncSnapshotStore`` and
``AsyncTurnInputStore`` forms a backend with an async client implements) when it has one, and
otherwise runs the synchronous method in a worker thread: every backend works on the async
path without blocking the loop, and one with a native client is awaited directly. (Before
issue 25 this module held a helper per method, thirteen bodies of the same two lines.)

``in_threads`` says whether a part's async methods would only be thread hops (it declares
``threaded_async``, as the embedded SQLite parts do, or it has no async methods at all): the
record writer (``contextplane.records.plans.awrite``) then writes the rest of a turn's rows
in one worker thread instead of a hop per row.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["acall", "in_threads"]

_ASYNC_METHODS = ("aadd", "anewest", "arecord", "arows", "aput", "aget", "aput_inputs")


def in_threads(part: Any) -> bool:
    """True when ``part``'s async methods would only run its synchronous ones in worker threads."""
    declared = getattr(part, "threaded_async", None)
    if declared is not None:
        return bool(declared)
    return not any(getattr(part, name, None) is not None for name in _ASYNC_METHODS)


async def acall(part: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """``part.<method>(*args, **kwargs)`` without blocking the loop: ``part.a<method>`` awaited
    when the part has it, else the synchronous method in a worker thread."""
    native = getattr(part, "a" + method, None)
    if native is not None:
        return await native(*args, **kwargs)
    return await asyncio.to_thread(getattr(part, method), *args, **kwargs)
