"""How a model call becomes a prompt snapshot (ADR D5): the recording policy, not the storage.

Storage is the backend's (``contextplane.records.SnapshotStore``); this module decides what a
row holds. Per-turn work (the projection manifest, the trajectory entry) happens once per
composition in ``begin_turn``; per-prefix work (hashing, storing the text once per hash) in
``register_prefix``; ``capture`` only assembles one row from precomputed parts, so the
per-call cost is one small insert.

Incognito calls record references and sizes only: no prefix text, no projection text, no
full text, no content hashes.

Capture is a plain synchronous call made at the model-call boundary with everything it needs
as arguments. Nothing is handed over through a context variable, because a context variable
set inside a child asyncio task is invisible to its parent (the origin project lost every
snapshot that way).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from contextplane.observability.redaction import Redactor, capture_text
from contextplane.observability.trajectory import TrajectoryWriter
from contextplane.records.aio import aput, aregister_prefix
from contextplane.records.snapshots import (
    PrefixRef,
    PromptSnapshot,
    SectionRef,
    SnapshotRow,
    SnapshotStore,
    StrippedFrame,
)
from contextplane.types import PrefixSection, ProjectedContext, StablePrefix

__all__ = [
    "PrefixRef",
    "PromptRecorder",
    "PromptSnapshot",
    "SectionRef",
    "StrippedFrame",
    "TurnRecord",
    "as_dict",
    "budget_rows",
    "shed_steps",
    "snapshot_time",
]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@attrs.frozen
class TurnRecord:
    """What every call of one turn shares: built once per composition, not once per call."""

    session_id: str
    turn_index: int
    mode: str
    incognito: bool
    projection_sha256: str | None
    sections_json: str
    budget_chars: int | None
    used_chars: int
    text: str
    trajectory_ref: str | None = None


def budget_rows(projection: ProjectedContext, *, errors: bool = True) -> list[dict[str, Any]]:
    """The budget table of one projection as JSON-ready rows, one per section in draft order:
    what each offered and kept, its size, and why it was shed, suppressed or failed.

    Kept in the trajectory beside the text so an inspector can show a recorded turn's budget
    exactly as the preview shows a fresh one. ``errors=False`` leaves out error text (it may
    quote a provider's data), for incognito turns."""
    return [
        {
            "name": s.name,
            "plugin": s.plugin,
            "priority": s.priority,
            "offered": s.offered,
            "kept": len(s.item_ids),
            "chars": s.chars,
            "truncated": s.truncated,
            "suppressed": s.suppressed,
            "error": (s.error if errors else "error") if s.error is not None else None,
        }
        for s in projection.sections
    ]


def shed_steps(projection: ProjectedContext) -> list[dict[str, Any]]:
    """What fitting shed, in the order it was shed (ADR D6): section, action, items, chars."""
    return [attrs.asdict(step) for step in projection.overflow]


def _prefix_sections_json(sections: Iterable[PrefixSection]) -> str:
    return json.dumps(
        [{"name": s.name, "plugin": s.plugin, "chars": s.chars, "sha256": s.sha256} for s in sections],
        separators=(",", ":"),
    )


class PromptRecorder:
    """Captures one snapshot per model call; the runtime adapters' single entry point.

    Per-turn work (the projection manifest, the trajectory entry) happens in ``begin_turn``;
    per-prefix work (hashing, storing the text once) in ``register_prefix``; ``capture`` only
    assembles one row from precomputed parts, so the per-call cost is one small insert.
    """

    def __init__(
        self,
        store: SnapshotStore,
        trajectory: TrajectoryWriter | None = None,
        *,
        capture_full_text: bool = False,
        redactor: Redactor | None = None,
        full_text_max_bytes: int = 65_536,
    ) -> None:
        self.store = store
        self.trajectory = trajectory
        self.capture_full_text = capture_full_text
        self.redactor = redactor if redactor is not None else Redactor.from_patterns()
        self.full_text_max_bytes = full_text_max_bytes
        self._prefix_by_text: dict[str, tuple[str, str]] = {}
        self._session_prefix_refs: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    # per prefix

    def _prefix_parts(self, prefix: StablePrefix | str) -> tuple[str, str, str]:
        """(sha256, section manifest JSON, text) of a prefix, hashed once per text."""
        if isinstance(prefix, StablePrefix):
            text = prefix.text
            cached = self._prefix_by_text.get(text)
            if cached is None:
                cached = (prefix.sha256, _prefix_sections_json(prefix.sections))
                self._prefix_by_text[text] = cached
        else:
            text = prefix
            cached = self._prefix_by_text.get(text)
            if cached is None:
                sha = _sha(text)
                cached = (sha, _prefix_sections_json([PrefixSection("system_prompt", "", len(text), sha)]))
                self._prefix_by_text[text] = cached
        return cached[0], cached[1], text

    def register_prefix(
        self, prefix: StablePrefix | str | None, *, session_id: str = "", incognito: bool = False
    ) -> PrefixRef:
        """Hash the prefix once, store its text once per hash (never for incognito), and write
        one trajectory entry per session and hash."""
        if prefix is None:
            return PrefixRef(None, None)
        sha, sections_json, text = self._prefix_parts(prefix)
        if incognito:
            self.store.register_prefix(sha, None, sections_json)
            return PrefixRef(sha, sections_json)
        key = (session_id, sha)
        ref = self._session_prefix_refs.get(key)
        if ref is None:
            with self._lock:
                ref = self._session_prefix_refs.get(key)
                if ref is None:
                    self.store.register_prefix(sha, text, sections_json)
                    if self.trajectory is not None:
                        ref = self.trajectory.append(
                            session_id, "stable_prefix", {"sha256": sha, "text": text}
                        )
                    else:
                        ref = ""
                    self._session_prefix_refs[key] = ref
        return PrefixRef(sha, sections_json, ref or None)

    async def aregister_prefix(
        self, prefix: StablePrefix | str | None, *, session_id: str = "", incognito: bool = False
    ) -> PrefixRef:
        """``register_prefix`` for an event loop, for a recorder that keeps no trajectory (a file:
        the records observer hands such a recorder's calls to a worker thread instead): the
        store's ``aregister_prefix`` awaited. Registering is idempotent, so two first calls of one
        session racing on the loop store the text twice, never differently."""
        if prefix is None:
            return PrefixRef(None, None)
        sha, sections_json, text = self._prefix_parts(prefix)
        if incognito:
            await aregister_prefix(self.store, sha, None, sections_json)
            return PrefixRef(sha, sections_json)
        key = (session_id, sha)
        if key not in self._session_prefix_refs:
            await aregister_prefix(self.store, sha, text, sections_json)
            self._session_prefix_refs.setdefault(key, "")
        return PrefixRef(sha, sections_json, self._session_prefix_refs[key] or None)

    # per turn

    def begin_turn(
        self, projection: ProjectedContext, *, query: str = "", reason: str = "turn"
    ) -> TurnRecord:
        """Build the turn's shared manifest and write its trajectory entry (no text if incognito)."""
        incognito = projection.incognito
        sections = []
        for s in projection.sections:
            if s.suppressed is not None or s.error is not None:
                continue
            entry = {
                "label": s.name,
                "chars": s.chars,
                "sha256": None if incognito else getattr(s, "sha256", None),
                "ids": list(s.item_ids),
                "truncated": s.truncated,
            }
            if "fallback" in s.meta:  # the turn degraded (the embedder failed): say so
                entry["fallback"] = str(s.meta["fallback"])
            sections.append(entry)
        sections_json = json.dumps(sections, separators=(",", ":"))
        psha = None if incognito or not projection.text else _sha(projection.text)
        ref = None
        if self.trajectory is not None:
            data: dict[str, Any] = {
                "turn_index": projection.turn_index,
                "reason": reason,
                "mode": projection.mode,
                "incognito": incognito,
                "sections": sections,
                "budget_chars": projection.budget_chars,
                "used_chars": projection.used_chars,
                "budget": budget_rows(projection, errors=not incognito),
                "overflow": shed_steps(projection),
            }
            if not incognito:
                data["query"] = query
                data["sha256"] = psha
                data["text"] = projection.text
            ref = self.trajectory.append(projection.session_id, "projection", data)
        return TurnRecord(
            session_id=projection.session_id,
            turn_index=projection.turn_index,
            mode=projection.mode,
            incognito=incognito,
            projection_sha256=psha,
            sections_json=sections_json,
            budget_chars=projection.budget_chars,
            used_chars=projection.used_chars,
            text="" if incognito else projection.text,
            trajectory_ref=ref,
        )

    # per call

    def capture(
        self,
        *,
        session_id: str,
        turn_index: int,
        call_index: int,
        prefix: PrefixRef,
        turn: TurnRecord | None,
        stripped: Sequence[StrippedFrame] = (),
        history_messages: int = 0,
        history_chars: int = 0,
        incognito: bool = False,
        mode: str = "native",
        full_text: Callable[[], str] | None = None,
        created_at: float | None = None,
    ) -> None:
        """Record one model call. ``full_text`` is called only when capture is on and the call
        is not incognito, so the caller never builds the text otherwise."""
        self.store.put(
            self._row(
                session_id, turn_index, call_index, prefix, turn, stripped, history_messages,
                history_chars, incognito, mode, full_text, created_at,
            )
        )  # fmt: skip

    async def acapture(
        self,
        *,
        session_id: str,
        turn_index: int,
        call_index: int,
        prefix: PrefixRef,
        turn: TurnRecord | None,
        stripped: Sequence[StrippedFrame] = (),
        history_messages: int = 0,
        history_chars: int = 0,
        incognito: bool = False,
        mode: str = "native",
        full_text: Callable[[], str] | None = None,
        created_at: float | None = None,
    ) -> None:
        """``capture`` for an event loop: the same row, stored with the store's ``aput``."""
        await aput(
            self.store,
            self._row(
                session_id, turn_index, call_index, prefix, turn, stripped, history_messages,
                history_chars, incognito, mode, full_text, created_at,
            ),
        )  # fmt: skip

    def _row(
        self,
        session_id: str,
        turn_index: int,
        call_index: int,
        prefix: PrefixRef,
        turn: TurnRecord | None,
        stripped: Sequence[StrippedFrame],
        history_messages: int,
        history_chars: int,
        incognito: bool,
        mode: str,
        full_text: Callable[[], str] | None,
        created_at: float | None,
    ) -> SnapshotRow:
        incognito = incognito or (turn is not None and turn.incognito)
        refs = [r for r in (prefix.trajectory_ref, turn.trajectory_ref if turn else None) if r]
        frames = (
            "[]"
            if not stripped
            else json.dumps(
                [
                    {"id": f.message_id, "chars": f.chars, "sha256": None if incognito else f.sha256}
                    for f in stripped
                ],
                separators=(",", ":"),
            )
        )
        text = None
        if self.capture_full_text and not incognito and full_text is not None:
            text = capture_text(full_text(), self.redactor, self.full_text_max_bytes)
        return SnapshotRow(
            session_id,
            turn_index,
            call_index,
            time.time() if created_at is None else created_at,
            turn.mode if turn is not None else mode,
            incognito,
            prefix.sha256,
            prefix.sections_json,
            turn.projection_sha256 if turn is not None else None,
            turn.sections_json if turn is not None else "[]",
            turn.budget_chars if turn is not None else None,
            turn.used_chars if turn is not None else 0,
            history_messages,
            history_chars,
            frames,
            json.dumps(refs) if refs else "[]",
            text,
        )

    def flush(self) -> None:
        self.store.flush()


def snapshot_time(value: float) -> str:
    """A snapshot's ``created_at`` as an ISO-8601 UTC string (for inspectors)."""
    return dt.datetime.fromtimestamp(value, dt.UTC).isoformat(timespec="seconds")


def as_dict(snapshot: PromptSnapshot) -> Mapping[str, Any]:
    """A JSON-ready view of a snapshot (``--json`` output)."""
    return attrs.asdict(snapshot, recurse=True)
