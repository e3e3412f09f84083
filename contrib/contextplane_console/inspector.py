"""The prompt inspector (ADR D5): what one model call saw, rebuilt from what was recorded.

A prompt snapshot holds references and sizes; the text lives once per hash (the stable
prefix, ``snapshots.prefix_text``) and in the trajectory entry the snapshot references (the
projection's text, query, budget table and shed steps). This module joins the three, and the
injection log's row for the turn, into one view, and says plainly what is missing and why
(an incognito turn recorded nothing; a backend with no trajectory keeps no text) instead of
showing a blank.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from contextplane import Backend, PluginHost
from contextplane.authority import SECTION_SEPARATOR
from contextplane.observability.snapshots import snapshot_time
from contextplane.records.snapshots import PromptSnapshot
from contextplane_console.errors import refuse


@attrs.frozen
class PrefixPart:
    """One stable-prefix section: its manifest entry, and its text when the stored prefix
    still hashes to what the manifest says (otherwise the text is withheld, not guessed)."""

    name: str
    plugin: str
    chars: int
    sha256: str
    text: str | None


@attrs.frozen
class CallView:
    snapshot: PromptSnapshot
    prefix: tuple[PrefixPart, ...]
    #: The trajectory's projection entry (query, text, budget, overflow), if one was kept.
    projection: Mapping[str, Any] | None
    #: Sections whose delivered ids are memory ids (linked to their rows).
    memory_sections: frozenset[str]
    injection: Mapping[str, Any] | None
    notes: tuple[str, ...]

    @property
    def incognito(self) -> bool:
        return self.snapshot.incognito

    @property
    def budget(self) -> list[Mapping[str, Any]] | None:
        rows = (self.projection or {}).get("budget")
        return list(rows) if isinstance(rows, list) else None

    @property
    def overflow(self) -> list[Mapping[str, Any]] | None:
        steps = (self.projection or {}).get("overflow")
        return list(steps) if isinstance(steps, list) else None

    def as_json(self) -> dict[str, Any]:
        s = self.snapshot
        if s.incognito:
            return {
                "session_id": s.session_id,
                "turn_index": s.turn_index,
                "call_index": s.call_index,
                "created_at": snapshot_time(s.created_at),
                "mode": s.mode,
                "incognito": True,
                "recorded": "incognito: nothing recorded",
                "used_chars": s.used_chars,
                "budget_chars": s.budget_chars,
            }
        return {
            "session_id": s.session_id,
            "turn_index": s.turn_index,
            "call_index": s.call_index,
            "created_at": snapshot_time(s.created_at),
            "mode": s.mode,
            "incognito": False,
            "stable_prefix": {
                "sha256": s.prefix_sha256,
                "sections": [attrs.asdict(p) for p in self.prefix],
            },
            "history": {"messages": s.history_messages, "chars": s.history_chars},
            "cacheable_prefix": cacheable_prefix(s),
            "stripped_frames": [attrs.asdict(f) for f in s.stripped],
            "projected_context": {
                "sha256": s.projection_sha256,
                "used_chars": s.used_chars,
                "budget_chars": s.budget_chars,
                "query": (self.projection or {}).get("query"),
                "text": (self.projection or {}).get("text"),
                "sections": [
                    {**attrs.asdict(sec), "memory_ids": sec.label in self.memory_sections}
                    for sec in s.sections
                ],
                "budget": self.budget,
                "overflow": self.overflow,
            },
            "injection": self.injection,
            "trajectory_refs": list(s.trajectory_refs),
            "full_text": s.full_text,
            "notes": list(self.notes),
        }


def snapshot_summary(s: PromptSnapshot) -> dict[str, Any]:
    """One line of a session's call list."""
    return {
        "session_id": s.session_id,
        "turn_index": s.turn_index,
        "call_index": s.call_index,
        "created_at": snapshot_time(s.created_at),
        "mode": s.mode,
        "incognito": s.incognito,
        "prefix_sha256": s.prefix_sha256,
        "sections": len(s.sections),
        "used_chars": s.used_chars,
        "budget_chars": s.budget_chars,
        "history_messages": s.history_messages,
        "stripped": len(s.stripped),
        "cacheable_prefix": None if s.cache is None else s.cache.line(),
    }


def cacheable_prefix(s: PromptSnapshot) -> dict[str, Any] | None:
    """The call's cacheable prefix (stable prefix + history, what a provider's prompt cache
    can reuse): its figures and the line ``contextplane snapshots`` prints; None for a call
    recorded before they were."""
    c = s.cache
    if c is None:
        return None
    return {
        "sha256": c.sha256,
        "chars": c.chars,
        "shared_chars": c.shared,
        "unchanged": c.unchanged,
        "first": c.first,
        "broken_by_sections": list(c.sections),
        "history_rewritten_at": c.history_at,
        "line": c.line(),
    }


def memory_sections(host: PluginHost) -> frozenset[str]:
    """Names of the context sections that deliver memory rows (their ids are memory ids)."""
    return frozenset(r.section.name for r in host.context_sections() if r.section.carries_memory)


def _prefix_parts(snapshot: PromptSnapshot, text: str | None) -> tuple[tuple[PrefixPart, ...], bool]:
    parts: list[PrefixPart] = []
    pos, intact = 0, True
    for p in snapshot.prefix_sections:
        piece = text[pos : pos + p.chars] if text is not None else None
        if piece is not None and hashlib.sha256(piece.encode()).hexdigest() != p.sha256:
            piece, intact = None, False
        parts.append(PrefixPart(p.name, p.plugin, p.chars, p.sha256, piece))
        pos += p.chars + len(SECTION_SEPARATOR)
    return tuple(parts), intact


def _projection_entry(backend: Backend, snapshot: PromptSnapshot) -> Mapping[str, Any] | None:
    trajectory = backend.trajectory
    if trajectory is None or not snapshot.trajectory_refs:
        return None
    read = trajectory.read(snapshot.session_id)
    for ref in snapshot.trajectory_refs:
        entry = read.get(ref)
        if entry is not None and entry.kind == "projection":
            return dict(entry.data)
    return None


def _injection(backend: Backend, snapshot: PromptSnapshot) -> Mapping[str, Any] | None:
    rows = [r for r in backend.injections.rows(snapshot.session_id) if r.turn_index == snapshot.turn_index]
    if not rows:
        return None
    row = rows[-1]
    return {"id": row.id, "at": row.at, "approx_tokens": row.approx_tokens, "delivered": row.delivered}


def call_view(
    backend: Backend, host: PluginHost, session_id: str, turn_index: int, call_index: int
) -> CallView:
    """The inspector's view of one model call, or a 404 refusal that lists the calls the turn has."""
    snapshot = backend.snapshots.get(session_id, turn_index, call_index)
    if snapshot is None:
        calls = [s.call_index for s in backend.snapshots.list(session_id) if s.turn_index == turn_index]
        hint = f"; calls recorded for that turn: {', '.join(map(str, calls))}" if calls else ""
        raise refuse(
            "call",
            f"no snapshot for session {session_id!r} turn {turn_index} call {call_index}{hint}",
            status=404,
        )
    notes: list[str] = []
    if snapshot.incognito:
        return CallView(snapshot, (), None, frozenset(), None, ("incognito: nothing recorded",))
    text = backend.snapshots.prefix_text(snapshot.prefix_sha256) if snapshot.prefix_sha256 else None
    if snapshot.prefix_sha256 and text is None:
        notes.append("the stable prefix's text is not stored (pruned, or recorded without text)")
    prefix, intact = _prefix_parts(snapshot, text)
    if not intact:
        notes.append("the stored prefix text does not match this snapshot's section hashes; text withheld")
    projection = _projection_entry(backend, snapshot)
    if projection is None:
        notes.append(
            "no trajectory entry for this call (the backend keeps no trajectory, or it was removed): "
            "the projection's text, budget table and shed steps are not available"
        )
    elif "overflow" not in projection:
        notes.append(
            "this turn was recorded before shed steps were kept: budget table and shed steps unknown"
        )
    return CallView(
        snapshot, prefix, projection, memory_sections(host), _injection(backend, snapshot), tuple(notes)
    )


def sessions_json(rows: Sequence[tuple[str, int, float]]) -> list[dict[str, Any]]:
    return [{"session_id": s, "snapshots": n, "newest": snapshot_time(t)} for s, n, t in rows]
