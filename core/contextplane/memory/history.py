"""A memory row's lifecycle history: the append-only record of every change, and positions in it.

Why a history and not just the row: the row says what a memory is *now*; "why did the agent
use (or not use) this memory on Tuesday?" needs what it was *then*. Every change to a row
(created, review state changed and by whom, superseded, expiry set or cleared, invalidated,
purged) appends one ``HistoryEvent`` in the same transaction as the change, carrying the
row's lifecycle state *after* it. Nothing rewrites or deletes an event. The latest event of a
row at or before a ``HistoryPosition`` is therefore the row's state at that position, which is
all an as-of read needs (the D6/D7 filters evaluated then, not now).

Stores that existed before the history start it at their migration, and say so
(``MIGRATION_NOTE``): each row that was already there has one ``migrated`` event, its state
from the start of the history, stamped with the migration time. A store may write that event
lazily, just before the row's first change (the embedded store does: one event per row would
cost a million-row migration more than its own rewrite), or read one for a row that has not
changed since. Either way a ``migrated`` event is read at ``HISTORY_START``, whatever its
place in the table: it holds from the start of the history until the row's next event.

Storage-agnostic: the SQLite store and any other store share these values.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Literal, cast, get_args

import attrs

from contextplane.memory.model import (
    REVIEW_STATES,
    SUPERSEDED_PREFIX,
    MemoryChunk,
    ReviewState,
    format_timestamp,
)

EventName = Literal[
    "created",
    "migrated",
    "review",
    "expiry",
    "superseded",
    "invalidated",
    "purged",
    "consolidated",
]
EVENT_NAMES: Final[frozenset[str]] = frozenset(get_args(EventName))

#: The position a store's history starts at (no event has happened yet), and the ``seq`` every
#: ``migrated`` event is read at: the row's state at the start, however late the event was written.
HISTORY_START: Final[int] = 0

#: What a ``migrated`` event says: the history of that row starts at the migration.
MIGRATION_NOTE: Final[str] = (
    "history starts at the migration that added it; changes before it were not recorded"
)

LifecycleState = Literal["active", "pending", "rejected", "superseded", "expired", "invalidated", "purged"]


def _frozen(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


@attrs.frozen
class HistoryEvent:
    """One change to one memory row, with the row's lifecycle state after the change.

    ``seq`` orders events store-wide (a later change has a larger ``seq``; a ``migrated`` event
    has ``HISTORY_START``, since it describes the row from the start); ``actor`` says who
    made the change (the provenance of a write, the curator of a review, ``purge``...);
    ``detail`` holds what the change needs beyond the state (the successor of a supersession,
    the near-duplicate candidates of a write, the migration note)."""

    seq: int
    chunk_id: str
    at: datetime
    event: EventName
    actor: str = ""
    review_state: str | None = None
    expires_at: datetime | None = None
    invalidated_at: datetime | None = None
    invalidation_reason: str | None = None
    #: The row's ``updated_at`` after the change (sections order by it, so an as-of read needs it).
    updated_at: datetime | None = None
    detail: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen)

    @property
    def superseded_by(self) -> str | None:
        reason = self.invalidation_reason or ""
        if self.invalidated_at is not None and reason.startswith(SUPERSEDED_PREFIX):
            return reason[len(SUPERSEDED_PREFIX) :] or None
        return None

    def deliverable_at(self, now: datetime) -> bool:
        """The D6 filter on the state this event left the row in, evaluated at ``now``."""
        if self.event == "purged":
            return False
        return (
            self.review_state != "rejected"
            and self.invalidated_at is None
            and (self.expires_at is None or self.expires_at > now)
        )

    def describe(self) -> str:
        """One line for ``memory show``: when, what, by whom, and the state it left."""
        who = f" (by {self.actor})" if self.actor else ""
        what = {
            "created": "created",
            "migrated": "present at migration",
            "review": f"review state set to {self.review_state}",
            "expiry": (
                f"expiry set to {format_timestamp(self.expires_at)}"
                if self.expires_at is not None
                else "expiry cleared"
            ),
            "superseded": f"superseded by {self.superseded_by}",
            "invalidated": f"invalidated ({self.invalidation_reason})",
            "purged": "purged (row deleted)",
            "consolidated": "consolidated",
        }[self.event]
        extra = ""
        if self.detail.get("note"):
            extra = f"; {self.detail['note']}"
        elif self.detail.get("outcome") and self.detail["outcome"] != "stored":
            extra = f"; {self.detail.get('message', self.detail['outcome'])}"
        return f"#{self.seq} {format_timestamp(self.at)} {what}{who}{extra}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for field in attrs.fields(HistoryEvent):
            value = getattr(self, field.name)
            if isinstance(value, datetime):
                value = format_timestamp(value)
            elif field.name == "detail":
                value = dict(value)
            out[field.name] = value
        return out


@attrs.frozen(order=True)
class HistoryPosition:
    """A point in a store's history: every event with ``seq <= seq`` had happened, and ``at``
    is the time the deliverable filter is evaluated at (expiry is a matter of time, not of
    events). A composition records the position of its view, so a later as-of read sees
    exactly what the composition saw."""

    seq: int
    at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "at": format_timestamp(self.at)}


def lifecycle_state(chunk: MemoryChunk | None, now: datetime) -> LifecycleState:
    """The one word ``memory list`` shows: superseded, invalidated, expired, rejected, pending
    or active (confirmed and deliverable); ``purged`` when the row is gone."""
    if chunk is None:
        return "purged"
    if chunk.superseded_by is not None:
        return "superseded"
    if chunk.invalidated_at is not None:
        return "invalidated"
    if chunk.is_expired(now):
        return "expired"
    if chunk.review_state == "rejected":
        return "rejected"
    if chunk.review_state == "pending":
        return "pending"
    return "active"


def apply_event(chunk: MemoryChunk, event: HistoryEvent) -> MemoryChunk:
    """``chunk`` with the lifecycle state ``event`` left it in (its content never changes)."""
    return attrs.evolve(
        chunk,
        review_state=cast(
            ReviewState, event.review_state if event.review_state in REVIEW_STATES else "pending"
        ),
        expires_at=event.expires_at,
        invalidated_at=event.invalidated_at,
        invalidation_reason=event.invalidation_reason,
        updated_at=event.updated_at or chunk.updated_at,
    )
