"""The records from an event loop: what the async composition and delivery await.

Each helper calls the record part's own async method (``AsyncSessionSummaries``,
``AsyncInjectionLog``, ``AsyncSnapshotStore``, ``AsyncTurnInputStore``) when it has one, and
otherwise runs the synchronous method in a worker thread, as ``contextplane.store.aio`` does for
the memory store: every backend works on the async path without blocking the loop, and a
backend with a native async client is awaited directly.

``in_threads`` says whether a part's async methods would only be thread hops (it declares
``threaded_async``, as the embedded SQLite parts do, or it has no async methods at all): the
record writer (``contextplane.observability.writer.awrite``) then writes the rest of a turn's
rows in one worker thread instead of a hop per row. The record path itself uses no helper here
but ``in_threads``: its rows come from ``contextplane.recorder`` and the writer calls a part's
``a<method>`` directly.
"""

from __future__ import annotations

import asyncio
from typing import Any

from contextplane.records.injections import InjectionRow
from contextplane.records.snapshots import PromptSnapshot, SnapshotRow
from contextplane.records.summaries import SessionSummary
from contextplane.records.turn_inputs import TurnInputs

_ASYNC_METHODS = ("aadd", "anewest", "arecord", "arows", "aput", "aget", "aput_inputs")


def in_threads(part: Any) -> bool:
    """True when ``part``'s async methods would only run its synchronous ones in worker threads."""
    declared = getattr(part, "threaded_async", None)
    if declared is not None:
        return bool(declared)
    return not any(getattr(part, name, None) is not None for name in _ASYNC_METHODS)


async def _call(part: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    native = getattr(part, "a" + name, None)
    if native is not None:
        return await native(*args, **kwargs)
    return await asyncio.to_thread(getattr(part, name), *args, **kwargs)


async def aadd_summary(
    summaries: Any,
    session_id: str,
    summary: str,
    *,
    topic: str = "",
    kind: str = "session",
    at: str | None = None,
) -> str:
    """``summaries.add(...)`` off the loop; returns the new id."""
    return str(await _call(summaries, "add", session_id, summary, topic=topic, kind=kind, at=at))


async def anewest(summaries: Any, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
    """``summaries.newest(limit, ...)`` off the loop."""
    return list(await _call(summaries, "newest", limit, exclude_session=exclude_session))


async def arelevant(
    summaries: Any, query: str, limit: int, *, exclude_session: str | None = None
) -> list[SessionSummary]:
    """``summaries.relevant(query, limit, ...)`` off the loop."""
    return list(await _call(summaries, "relevant", query, limit, exclude_session=exclude_session))


async def acount_summaries(summaries: Any) -> int:
    """``summaries.count()`` off the loop."""
    return int(await _call(summaries, "count"))


async def arecord(injections: Any, row: InjectionRow) -> int:
    """``injections.record(row)`` off the loop; returns the row's id."""
    return int(await _call(injections, "record", row))


async def arows(
    injections: Any, session_id: str | None = None, limit: int | None = None
) -> list[InjectionRow]:
    """``injections.rows(...)`` off the loop."""
    return list(await _call(injections, "rows", session_id, limit))


async def aregister_prefix(snapshots: Any, sha256: str, text: str | None, sections_json: str) -> None:
    """``snapshots.register_prefix(...)`` off the loop."""
    await _call(snapshots, "register_prefix", sha256, text, sections_json)


async def aput(snapshots: Any, row: SnapshotRow) -> None:
    """``snapshots.put(row)`` off the loop."""
    await _call(snapshots, "put", row)


async def aflush(snapshots: Any) -> None:
    """``snapshots.flush()`` off the loop."""
    await _call(snapshots, "flush")


async def aget(
    snapshots: Any, session_id: str, turn_index: int, call_index: int = 0
) -> PromptSnapshot | None:
    """``snapshots.get(...)`` off the loop."""
    found: PromptSnapshot | None = await _call(snapshots, "get", session_id, turn_index, call_index)
    return found


async def alist(
    snapshots: Any, session_id: str | None = None, *, limit: int | None = None
) -> list[PromptSnapshot]:
    """``snapshots.list(...)`` off the loop."""
    return list(await _call(snapshots, "list", session_id, limit=limit))


async def aput_inputs(store: Any, inputs: TurnInputs) -> None:
    """``store.put_inputs(inputs)`` off the loop."""
    await _call(store, "put_inputs", inputs)


async def aget_inputs(store: Any, session_id: str, turn_index: int) -> TurnInputs | None:
    """``store.get_inputs(...)`` off the loop."""
    found: TurnInputs | None = await _call(store, "get_inputs", session_id, turn_index)
    return found
