"""The rules that find a memory delivered or filtered: in the section's report (delivered), its
state at the turn (purged, not written yet, rejected, superseded, invalidated, expired), the
turn's own rules (scope, policy, trust) and whether the section that carries its policy ran.

Why these together: each answers from the memory's and the turn's recorded state alone, before
any budget or ranking question; ``explain.verdict`` asks them first, in this order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from contextplane.errors import StoreError
from contextplane.explain.evidence import (
    POLICY_SECTIONS,
    Verdict,
    _event_evidence,
    _filtered,
    _last,
    _row_of,
    _Turn,
)
from contextplane.fitting import escape_measured
from contextplane.memory.history import HistoryEvent
from contextplane.memory.model import MemoryChunk, format_timestamp
from contextplane.plugins import PluginHost
from contextplane.projection import ProjectedContext, compose


def _delivered(turn: _Turn, projection: ProjectedContext, memory_id: str) -> Verdict | None:
    delivered: list[tuple[str, list[str], int]] = []
    if turn.recorded is not None:
        delivered = [(s["label"], list(s["ids"]), int(s["chars"])) for s in turn.recorded]
    else:
        delivered = [(s.name, list(s.item_ids), s.chars) for s in projection.sections]
    for label, ids, section_chars in delivered:
        if memory_id not in ids:
            continue
        evidence: dict[str, Any] = {
            "section": label,
            "position": ids.index(memory_id) + 1,
            "of": len(ids),
            "section_chars": section_chars,
            "budget_chars": projection.budget_chars,
        }
        report = projection.section(label)
        found = _row_of(report, memory_id) if report is not None else None
        if found is not None:
            evidence["rank"] = found[1].rank
            evidence["chars"] = escape_measured(found[1].text)[1]
            follows = found[1].meta.get("follows")
            if follows is not None:
                evidence["follows"] = follows
        where = f"row {evidence['position']} of {len(ids)}"
        size = f", {evidence['chars']} chars" if "chars" in evidence else ""
        why = (
            f", as the memory written right after {evidence['follows']}, which the search found"
            if "follows" in evidence
            else ""
        )
        return Verdict(
            memory_id,
            "delivered",
            None,
            f"memory {memory_id} was delivered in section {label} ({where}{size}){why}",
            evidence,
            turn.info,
        )
    return None


def _lifecycle(
    turn: _Turn, chunk: MemoryChunk, events: Sequence[HistoryEvent], memory_id: str
) -> Verdict | None:
    upto = turn.position.seq if turn.position is not None else None
    at = turn.view_now
    if chunk.review_state == "rejected":
        event = _last(events, ("review", "created", "migrated"), upto)
        who = f" by {event.actor}" if event is not None and event.actor else ""
        return _filtered(turn, memory_id, "rejected", f"it was rejected{who}", _event_evidence(event))
    if chunk.superseded_by is not None:
        event = _last(events, ("superseded", "migrated"), upto)
        evidence = {"superseded_by": chunk.superseded_by, **_event_evidence(event)}
        return _filtered(
            turn, memory_id, "superseded", f"it was superseded by #{chunk.superseded_by}", evidence
        )
    if chunk.invalidated_at is not None:
        event = _last(events, ("invalidated", "migrated"), upto)
        evidence = {"invalidation_reason": chunk.invalidation_reason, **_event_evidence(event)}
        return _filtered(
            turn, memory_id, "invalidated", f"it was invalidated ({chunk.invalidation_reason})", evidence
        )
    if chunk.is_expired(at):
        assert chunk.expires_at is not None
        evidence = {"expires_at": format_timestamp(chunk.expires_at), "turn_at": format_timestamp(at)}
        return _filtered(
            turn, memory_id, "expired", f"it had expired at {format_timestamp(chunk.expires_at)}", evidence
        )
    return None


def _request_rules(turn: _Turn, chunk: MemoryChunk, memory_id: str) -> Verdict | None:
    request = turn.request
    scopes = list(request.namespaces)
    if chunk.namespace not in scopes:
        return _filtered(
            turn,
            memory_id,
            "out_of_scope",
            f"its scope {chunk.namespace or 'global'!r} is not one of the turn's scopes "
            f"{', '.join(s or 'global' for s in scopes)}",
            {"namespace": chunk.namespace, "turn_scopes": scopes},
        )
    if chunk.effective_delivery_policy == "on_demand":
        return _filtered(
            turn,
            memory_id,
            "policy_on_demand",
            "its delivery policy is on_demand: it reaches the model only through memory_recall",
            {"delivery_policy": "on_demand"},
        )
    floor = int(request.config.context.inject_min_trust)
    if chunk.trust_tier < floor:
        return _filtered(
            turn,
            memory_id,
            "below_min_trust",
            f"its trust tier {chunk.trust_tier} ({chunk.trust_label}) is below "
            f"context.inject_min_trust = {floor}",
            {"trust_tier": chunk.trust_tier, "inject_min_trust": floor, "source_type": chunk.source_type},
        )
    return None


def _would_offer(turn: _Turn, host: PluginHost, memory_id: str, **lifted: Any) -> str | None:
    """The section that drafts the memory when a mode rule is lifted (``goal_turn=False``,
    ``only_sections=None``), or None."""
    request = attrs.evolve(turn.request, **lifted)
    projection = compose(request, host=host, strict=False)
    for report in projection.sections:
        if _row_of(report, memory_id) is not None:
            return report.name
    return None


def _section_rules(
    turn: _Turn, projection: ProjectedContext, chunk: MemoryChunk, memory_id: str, host: PluginHost
) -> Verdict | None:
    suppressed = {s.name: s.suppressed for s in projection.sections if s.suppressed}
    for why, lifted in (("goal_turn", {"goal_turn": False}), ("not_selected", {"only_sections": None})):
        if why not in suppressed.values():
            continue
        section = _would_offer(turn, host, memory_id, **lifted)
        if section is not None and suppressed.get(section) == why:
            text = (
                f"section {section} does not run on goal turns (it would have drafted it)"
                if why == "goal_turn"
                else f"the turn's subagent contract does not select section {section} "
                "(it would have drafted it)"
            )
            return _filtered(turn, memory_id, why, text, {"section": section})
    carrier = POLICY_SECTIONS.get(chunk.effective_delivery_policy)
    if carrier is None:
        return None
    # A past turn's failure is in its manifest: recomposing may well succeed now (the error was
    # transient, or the plugin was fixed since), and the question is what happened then.
    then = next((s for s in turn.recorded or () if s.get("label") == carrier), None)
    if then is not None and then.get("error"):
        return _filtered(
            turn,
            memory_id,
            "section_failed",
            f"section {carrier} failed that turn ({then['error']})",
            {"section": carrier, "error": then["error"], "recorded": True},
        )
    report = projection.section(carrier)
    if report is None:
        return _filtered(
            turn,
            memory_id,
            "section_disabled",
            f"section {carrier}, which delivers {chunk.effective_delivery_policy!r} memories, "
            "is not registered "
            "(its plugin is disabled or not installed)",
            {"section": carrier},
        )
    if report.error is not None:
        return _filtered(
            turn,
            memory_id,
            "section_failed",
            f"section {carrier} failed this turn ({report.error})",
            {"section": carrier, "error": report.error, "recorded": False},
        )
    if report.suppressed is not None:
        return _filtered(
            turn,
            memory_id,
            report.suppressed,
            f"section {carrier} was suppressed this turn ({report.suppressed})",
            {"section": carrier},
        )
    return None


def _gone(turn: _Turn, events: Sequence[HistoryEvent], memory_id: str) -> Verdict:
    """The row is not in the view: not written yet then, or purged."""
    if not events:
        raise StoreError(f"no memory with id {memory_id!r}")
    upto = turn.position.seq if turn.position is not None else None
    if upto is not None and events[0].seq > upto:
        return _filtered(
            turn,
            memory_id,
            "not_written_yet",
            f"it was written after this turn (at {format_timestamp(events[0].at)})",
            _event_evidence(events[0]),
        )
    purge = next((e for e in events if e.event == "purged"), None)
    if purge is not None and (upto is None or purge.seq <= upto):
        return _filtered(
            turn,
            memory_id,
            "purged",
            f"it had been purged ({format_timestamp(purge.at)})",
            _event_evidence(purge),
        )
    return Verdict(
        memory_id,
        "not_offered",
        "purged_since",
        f"memory {memory_id} was purged after this turn: its text is gone, "
        "so where it ranked cannot be recomputed",
        _event_evidence(purge),
        turn.info,
    )
