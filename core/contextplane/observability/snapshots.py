"""How a model call becomes a prompt snapshot (ADR D5): the recording policy, not the storage.

Storage is the backend's (``contextplane.records.SnapshotStore``); what a row holds is decided
by ``contextplane.recorder`` (sans-IO: a projection and a model call become rows), and
``contextplane.observability.writer`` writes them. This module keeps ``PromptRecorder``, the
recorder bound to one snapshot store and trajectory as adapters used it before issue 25 (per
turn ``begin_turn``, per prefix ``register_prefix``, per call ``capture``), and the
inspectors' helpers. ``TurnRecord``, ``budget_rows`` and ``shed_steps`` live in
``contextplane.recorder`` and are re-exported here.

Incognito calls record references and sizes only: no prefix text, no projection text, no
full text, no content hashes.

Capture is a plain call made at the model-call boundary with everything it needs as
arguments. Nothing is handed over through a context variable, because a context variable set
inside a child asyncio task is invisible to its parent (the origin project lost every
snapshot that way).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import attrs

from contextplane.observability.redaction import Redactor
from contextplane.observability.trajectory import TrajectoryWriter
from contextplane.observability.writer import write
from contextplane.recorder import Recorder, TurnRecord, budget_rows, shed_steps
from contextplane.records.snapshots import (
    PrefixRef,
    PromptSnapshot,
    SectionRef,
    SnapshotStore,
    StrippedFrame,
)
from contextplane.signatures import method_of
from contextplane.types import ProjectedContext, StablePrefix

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


class PromptRecorder:
    """A ``Recorder`` bound to one snapshot store (and trajectory): each method builds its rows
    with the recorder and writes them at once, synchronously.

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
        self.snapshots = store  # the part name a recorder's plans write to
        self.recorder = Recorder(
            trajectory=trajectory is not None,
            capture_full_text=capture_full_text,
            redactor=redactor,
            full_text_max_bytes=full_text_max_bytes,
        )

    def register_prefix(
        self, prefix: StablePrefix | str | None, *, session_id: str = "", incognito: bool = False
    ) -> PrefixRef:
        """Hash the prefix once, store its text once per hash (never for incognito), and write
        one trajectory entry per session and hash."""
        return write(self, self.recorder.prefix(prefix, session_id=session_id, incognito=incognito))

    def begin_turn(
        self, projection: ProjectedContext, *, query: str = "", reason: str = "turn"
    ) -> TurnRecord:
        """Build the turn's shared manifest and write its trajectory entry (no text if incognito)."""
        return write(self, self.recorder.turn(projection, query=query, reason=reason))

    @method_of(Recorder.snapshot_row)
    def capture(self, **call: Any) -> None:
        """Record one model call (``Recorder.snapshot_row``'s keywords). ``full_text`` is called
        only when capture is on and the call is not incognito, so the caller never builds the
        text otherwise."""
        self.store.put(self.recorder.snapshot_row(**call))

    def flush(self) -> None:
        self.store.flush()


def snapshot_time(value: float) -> str:
    """A snapshot's ``created_at`` as an ISO-8601 UTC string (for inspectors)."""
    return dt.datetime.fromtimestamp(value, dt.UTC).isoformat(timespec="seconds")


def as_dict(snapshot: PromptSnapshot) -> Mapping[str, Any]:
    """A JSON-ready view of a snapshot (``--json`` output)."""
    return attrs.asdict(snapshot, recurse=True)
