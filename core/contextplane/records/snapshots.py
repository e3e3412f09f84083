"""Prompt snapshots (ADR D5): what each model call saw, by reference.

A snapshot is keyed by ``(session_id, turn_index, call_index)``. It holds the stable prefix by
hash (the text and section manifest are stored once per hash), the projected sections by
reference (label, chars, content hash, delivered ids), the context frames stripped from the
checkpoint, references to trajectory entries, and full text only when the operator turned on
``context.capture_full_text``. ``SnapshotRow`` is the storage form every backend keeps as it
is (manifests are JSON text built once per turn, so capture costs one small insert);
``decode_snapshot`` turns one into the ``PromptSnapshot`` readers get.
"""

from __future__ import annotations

import builtins
import json
from typing import Protocol, runtime_checkable

import attrs

from contextplane.prompt_parts import PrefixSection
from contextplane.prompt_parts import StrippedFrame as StrippedFrame
from contextplane.records.cache_prefix import CachePrefix


@attrs.frozen
class SectionRef:
    """One projected section by reference."""

    label: str
    chars: int
    sha256: str | None
    ids: tuple[str, ...] = ()
    truncated: bool = False


@attrs.frozen
class PrefixRef:
    """A stable prefix registered with the store: its hash and its section manifest (JSON)."""

    sha256: str | None
    sections_json: str | None
    trajectory_ref: str | None = None


@attrs.frozen
class SnapshotRow:
    """One snapshot in storage form: manifests and lists are compact JSON text."""

    session_id: str
    turn_index: int
    call_index: int
    created_at: float
    mode: str
    incognito: bool
    prefix_sha256: str | None
    prefix_sections: str | None
    projection_sha256: str | None
    projection: str
    budget_chars: int | None
    used_chars: int
    history_messages: int
    history_chars: int
    stripped: str
    trajectory_refs: str
    full_text: str | None = None
    #: The cacheable prefix (``records.cache_prefix``): its hash, chars, the chars shared
    #: with the session's previous call (None: unknown), and what broke the share (JSON, or
    #: None when nothing did). All None on rows written before they were recorded.
    cache_prefix_sha256: str | None = None
    cache_prefix_chars: int | None = None
    cache_shared_chars: int | None = None
    cache_break: str | None = None

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.session_id, self.turn_index, self.call_index)


@attrs.frozen
class PromptSnapshot:
    """One stored snapshot, decoded."""

    session_id: str
    turn_index: int
    call_index: int
    created_at: float
    mode: str
    incognito: bool
    prefix_sha256: str | None
    prefix_sections: tuple[PrefixSection, ...]
    projection_sha256: str | None
    sections: tuple[SectionRef, ...]
    budget_chars: int | None
    used_chars: int
    history_messages: int
    history_chars: int
    stripped: tuple[StrippedFrame, ...]
    trajectory_refs: tuple[str, ...]
    full_text: str | None = None
    #: The call's cacheable prefix figures; None for a row written before they were recorded.
    cache: CachePrefix | None = None

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.session_id, self.turn_index, self.call_index)

    @property
    def delivered_ids(self) -> dict[str, tuple[str, ...]]:
        return {s.label: s.ids for s in self.sections if s.ids}


def decode_snapshot(row: SnapshotRow) -> PromptSnapshot:
    """The reader's view of a stored row (the same decoding for every backend)."""
    prefix_sections = tuple(
        PrefixSection(s["name"], s["plugin"], s["chars"], s["sha256"])
        for s in json.loads(row.prefix_sections or "[]")
    )
    sections = tuple(
        SectionRef(
            s["label"], s["chars"], s.get("sha256"), tuple(s.get("ids", ())), s.get("truncated", False)
        )
        for s in json.loads(row.projection)
    )
    frames = tuple(StrippedFrame(f.get("id"), f["chars"], f.get("sha256")) for f in json.loads(row.stripped))
    return PromptSnapshot(
        session_id=row.session_id,
        turn_index=row.turn_index,
        call_index=row.call_index,
        created_at=row.created_at,
        mode=row.mode,
        incognito=bool(row.incognito),
        prefix_sha256=row.prefix_sha256,
        prefix_sections=prefix_sections,
        projection_sha256=row.projection_sha256,
        sections=sections,
        budget_chars=row.budget_chars,
        used_chars=row.used_chars,
        history_messages=row.history_messages,
        history_chars=row.history_chars,
        stripped=frames,
        trajectory_refs=tuple(json.loads(row.trajectory_refs)),
        full_text=row.full_text,
        cache=CachePrefix.of_row(
            row.cache_prefix_sha256, row.cache_prefix_chars, row.cache_shared_chars, row.cache_break
        ),
    )


@runtime_checkable
class SnapshotStore(Protocol):
    """Where prompt snapshots and the once-per-hash prefix texts are kept."""

    def register_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        """Keep a prefix's manifest once per hash; ``text`` None keeps no text (incognito).
        A text-less entry gains its text on the first call that brings one."""
        ...

    def put(self, row: SnapshotRow) -> None:
        """Store (or replace, same key) one snapshot. May buffer until ``flush``."""
        ...

    def flush(self) -> None: ...

    def prefix_text(self, sha256: str) -> str | None: ...

    def count(self, session_id: str | None = None) -> int: ...

    def list(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> builtins.list[PromptSnapshot]:
        """Snapshots in key order; ``limit`` keeps the newest rows."""
        ...

    def get(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None: ...

    def sessions(self) -> builtins.list[tuple[str, int, float]]:
        """(session id, snapshot count, newest created_at) per session, newest first."""
        ...

    def prune(self, now: float | None = None) -> int:
        """Apply the retention policy; return the rows dropped."""
        ...


@runtime_checkable
class AsyncSnapshotStore(SnapshotStore, Protocol):
    """A ``SnapshotStore`` that also answers an event loop (see ``AsyncSessionSummaries``)."""

    async def aregister_prefix(self, sha256: str, text: str | None, sections_json: str) -> None: ...

    async def aput(self, row: SnapshotRow) -> None: ...

    async def aflush(self) -> None: ...

    async def aget(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None: ...

    async def alist(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> builtins.list[PromptSnapshot]: ...
