"""Session summaries: what the prior-session digest (ADR D9) is made from.

A summary is appended once per finished session and never changed, which is why the digest
may read summaries outside the turn's consistent memory view: the only thing a concurrent
write can do is add a summary, never turn one into another.
"""

from __future__ import annotations

import builtins
from typing import Protocol, runtime_checkable

import attrs

from contextplane.errors import ValidationError
from contextplane.memory.model import format_timestamp, utc_now, validate_text


@attrs.frozen
class SessionSummary:
    """One stored summary; ``id`` is opaque to callers (decimal text on SQLite)."""

    id: str = attrs.field(converter=str)
    session_id: str
    created_at: str
    kind: str
    topic: str
    summary: str


def summary_stamp() -> str:
    """The time a summary is stored at, to the microsecond and fixed-width (so text order is
    time order). Why not to the second: a replay admits the summaries stored at or before its
    turn's time, and a summary stored just after a turn, in the same second, was admitted."""
    return format_timestamp(utc_now())


def validate_summary(session_id: object, summary: object, topic: object, kind: object) -> None:
    """The checks every backend applies before storing a summary (one error text for all)."""
    for field, value in (("session_id", session_id), ("summary", summary), ("topic", topic), ("kind", kind)):
        validate_text(value, field)
    assert isinstance(session_id, str) and isinstance(summary, str)
    if not session_id.strip() or not summary.strip():
        raise ValidationError("session_id and summary must not be empty")


@runtime_checkable
class SessionSummaries(Protocol):
    """Append-only summaries of finished sessions, newest-first and by relevance."""

    def add(
        self, session_id: str, summary: str, *, topic: str = "", kind: str = "session", at: str | None = None
    ) -> str:
        """Store one summary; return its id."""
        ...

    def newest(self, limit: int, *, exclude_session: str | None = None) -> builtins.list[SessionSummary]:
        """The newest ``limit`` summaries, never those of ``exclude_session`` (the active one)."""
        ...

    def relevant(
        self, query: str, limit: int, *, exclude_session: str | None = None
    ) -> builtins.list[SessionSummary]:
        """Summaries matching ``query`` by the backend's full-text ranking, best first; empty
        when nothing matches (the D9 relevance gate: no LLM judge)."""
        ...

    def count(self) -> int: ...


@runtime_checkable
class AsyncSessionSummaries(SessionSummaries, Protocol):
    """``SessionSummaries`` that also answer an event loop: each returns what its synchronous
    twin returns, without blocking the loop. A protocol of its own so that every backend written
    against ``SessionSummaries`` still satisfies it; ``contextplane.records.aio`` calls these
    when a backend's summaries have them and the synchronous method in a worker thread when
    they do not (RECORDS-ASYNC-PARITY checks each against its twin)."""

    async def aadd(
        self, session_id: str, summary: str, *, topic: str = "", kind: str = "session", at: str | None = None
    ) -> str: ...

    async def anewest(
        self, limit: int, *, exclude_session: str | None = None
    ) -> builtins.list[SessionSummary]: ...

    async def arelevant(
        self, query: str, limit: int, *, exclude_session: str | None = None
    ) -> builtins.list[SessionSummary]: ...

    async def acount(self) -> int: ...
