"""A row's past: its lifecycle history and its supersession chain in both directions.

Why a module of its own: the row view and the API both show them, and both come from the
store's ``MemoryHistory`` (issue 14), which a ``KnowledgeStore`` need not keep. Forward (what
replaced this row) is on the rows themselves (``superseded_by``); backward (what this row
replaced) is not: the protocol has no reverse lookup of ``superseded_by``, so it is read from
the row's ``created`` event, whose detail names the rows the write superseded (``supersedes``
for ``supersede()``, ``superseded`` for a same-subject consolidation). A store that keeps no
history, or records no such detail, shows no earlier versions, and the view says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from contextplane import KnowledgeStore, MemoryChunk
from contextplane.memory.history import HistoryEvent
from contextplane.memory.model import format_timestamp
from contextplane.store import MemoryHistory
from contextplane_console.errors import refuse
from contextplane_console.memories import MAX_CHAIN, chain

#: Keys of an event's detail whose values are memory ids (linked in the row view).
ID_KEYS: Final[frozenset[str]] = frozenset({"by", "supersedes", "superseded", "duplicate_of"})


def keeps_history(store: KnowledgeStore) -> bool:
    return isinstance(store, MemoryHistory)


def events(store: KnowledgeStore, chunk_id: str) -> list[HistoryEvent]:
    """The row's lifecycle events, oldest first; none when the store keeps no history."""
    return store.history(chunk_id) if isinstance(store, MemoryHistory) else []


def replaced_ids(history: Sequence[HistoryEvent]) -> list[str]:
    """The ids the row's write superseded, from its ``created`` event."""
    for event in history:
        if event.event != "created":
            continue
        detail = event.detail
        found: list[str] = []
        one = detail.get("supersedes")
        if isinstance(one, str | int):
            found.append(str(one))
        many = detail.get("superseded")
        if isinstance(many, list):
            found.extend(str(i) for i in many if isinstance(i, str | int))
        return list(dict.fromkeys(found))
    return []


def backward(
    store: KnowledgeStore, chunk: MemoryChunk, history: Sequence[HistoryEvent] | None = None
) -> list[MemoryChunk]:
    """Every row ``chunk`` replaced, directly or through the rows it replaced, nearest first
    (each names its successor in ``superseded_by``, so a consolidation's fan-in stays legible)."""
    out: list[MemoryChunk] = []
    seen = {chunk.id}
    frontier = replaced_ids(history if history is not None else events(store, chunk.id))
    while frontier and len(out) < MAX_CHAIN:
        nxt: list[str] = []
        for old_id in frontier:
            if old_id in seen:
                continue
            seen.add(old_id)
            old = store.get(old_id)
            if old is None:
                continue
            out.append(old)
            nxt.extend(replaced_ids(events(store, old_id)))
        frontier = nxt
    return out[:MAX_CHAIN]


@attrs.frozen
class Lineage:
    """One row's past, as the row view and ``GET /api/memory/chunks/{id}`` show it."""

    chunk: MemoryChunk
    history: tuple[HistoryEvent, ...]
    #: The rows it replaced, nearest first.
    supersedes: tuple[MemoryChunk, ...]
    #: It, then the rows that replaced it, to the current version.
    chain: tuple[MemoryChunk, ...]
    kept: bool


def lineage(store: KnowledgeStore, chunk: MemoryChunk) -> Lineage:
    history = events(store, chunk.id)
    return Lineage(
        chunk,
        tuple(history),
        tuple(backward(store, chunk, history)),
        tuple(chain(store, chunk)),
        keeps_history(store),
    )


def require(store: KnowledgeStore, chunk_id: str) -> MemoryChunk:
    """The row, or a 404 naming the id, and saying so when the row was purged (its history
    is still served)."""
    chunk = store.get(chunk_id)
    if chunk is not None:
        return chunk
    purge = next((e for e in reversed(events(store, chunk_id)) if e.event == "purged"), None)
    if purge is None:
        raise refuse("id", f"no memory with id {chunk_id!r}", status=404)
    raise refuse(
        "id",
        f"no memory with id {chunk_id!r}: it was purged at {format_timestamp(purge.at)} "
        f"(its history: GET /api/memory/chunks/{chunk_id}/history)",
        status=404,
    )


def history_or_404(store: KnowledgeStore, chunk_id: str) -> list[HistoryEvent]:
    """A row's events, also for a purged row; a 404 naming the id when there is neither a row
    nor a history of one."""
    history = events(store, chunk_id)
    if not history and store.get(chunk_id) is None:
        raise refuse("id", f"no memory with id {chunk_id!r}", status=404)
    return history


def change(event: HistoryEvent) -> str:
    """What the event changed, in words (the state it left is in the event's fields)."""
    if event.event == "review":
        return f"review state set to {event.review_state}"
    if event.event == "expiry":
        if event.expires_at is None:
            return "expiry cleared"
        return f"expiry set to {format_timestamp(event.expires_at)}"
    if event.event == "superseded":
        return f"superseded by {event.superseded_by}"
    if event.event == "invalidated":
        return f"invalidated ({event.invalidation_reason})"
    if event.event == "purged":
        return "purged (row deleted)"
    if event.event == "migrated":
        return "present at the migration (its history starts here)"
    if event.event == "consolidated":
        return str(event.detail.get("message") or "consolidated")
    message = event.detail.get("message")
    if event.event == "created":
        return f"created; {message}" if message else "created"
    return str(event.event) + (f"; {message}" if message else "")  # an event newer than this console


def detail_links(detail: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The detail's memory ids, by key (``supersedes``: 8), for links in the row view."""
    out = []
    for key in sorted(detail):
        if key not in ID_KEYS:
            continue
        value = detail[key]
        ids = [str(v) for v in value] if isinstance(value, list) else [str(value)]
        out.append((key, ids))
    return out


def event_json(event: HistoryEvent) -> dict[str, Any]:
    """``HistoryEvent.to_dict()`` with ``by`` (who) and ``change`` (what, in words)."""
    out = event.to_dict()
    out["by"] = event.actor
    out["change"] = change(event)
    return out
