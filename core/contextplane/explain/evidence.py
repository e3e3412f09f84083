"""What every verdict is made of: the ``Verdict`` itself, the turn being judged (``_Turn``), and
the evidence helpers every rule shares (history events, a row's place in a section's report).

Why its own module: the rules (``filters``, ``ranking``) each build verdicts from the same
pieces, and ``verdict`` orders the rules; with the pieces here, no rule module imports another
and the order stays in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from contextplane.memory.history import HistoryEvent, HistoryPosition
from contextplane.memory.model import format_timestamp, utc_now
from contextplane.projection import SectionReport
from contextplane.request import ProjectionRequest

VerdictKind = Literal["delivered", "shed", "filtered", "never_retrieved", "not_offered"]

#: The standard section that carries each delivery policy (ADR D6): always-on rows are listed,
#: retrieved rows are searched for; on-demand rows are never injected.
POLICY_SECTIONS: Mapping[str, str] = {"always": "always_on", "retrieved": "retrieved"}


def _frozen(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


@attrs.frozen
class Verdict:
    """One memory, one turn, one answer. ``reason`` names the filter for ``filtered``."""

    memory_id: str
    verdict: VerdictKind
    reason: str | None
    summary: str
    evidence: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen)
    #: Which turn: session, turn index, query, ``basis`` ("recorded" or "now") and the
    #: history position it was judged at.
    turn: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "verdict": self.verdict,
            "reason": self.reason,
            "summary": self.summary,
            "evidence": _plain(self.evidence),
            "turn": _plain(self.turn),
        }


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if attrs.has(type(value)):
        return _plain(attrs.asdict(value))
    if hasattr(value, "isoformat"):
        return format_timestamp(value)
    return value


def _event_evidence(event: HistoryEvent | None) -> dict[str, Any]:
    if event is None:
        return {}
    return {"event": event.event, "at": format_timestamp(event.at), "by": event.actor, "seq": event.seq}


def _last(events: Sequence[HistoryEvent], names: tuple[str, ...], upto: int | None) -> HistoryEvent | None:
    found = None
    for event in events:
        if upto is not None and event.seq > upto:
            break
        if event.event in names:
            found = event
    return found


@attrs.frozen
class _Turn:
    """What the judge needs to know about the turn being explained."""

    request: ProjectionRequest
    view: Any
    #: The recorded manifest (past turns) or None (a turn composed now).
    recorded: Sequence[Mapping[str, Any]] | None
    position: HistoryPosition | None
    info: Mapping[str, Any]

    @property
    def view_now(self) -> Any:
        """The time the turn's deliverable filter was evaluated at."""
        now = getattr(self.view, "now", None)
        if now is None and self.position is not None:
            now = self.position.at
        return now or utc_now()


def _row_of(report: SectionReport, memory_id: str) -> tuple[int, Any] | None:
    for index, row in enumerate(report.drafted):
        if row.id == memory_id:
            return index, row
    return None


def _filtered(turn: _Turn, memory_id: str, reason: str, why: str, evidence: Mapping[str, Any]) -> Verdict:
    return Verdict(
        memory_id, "filtered", reason, f"memory {memory_id} was filtered: {why}", evidence, turn.info
    )
