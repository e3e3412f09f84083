"""``explain``: for one memory and one turn, exactly one verdict with its evidence.

"Why wasn't this memory used?" has one answer per turn, found by asking in the order the
pipeline decides (the first rule that applies is the verdict):

1. **delivered**: in the section, at a place, taking so many chars (for a past turn, from
   the turn's recorded manifest: what was delivered, not what would be now);
2. **filtered** because of the memory's state then: ``purged``, ``not_written_yet``,
   ``rejected``, ``superseded`` (by #id), ``invalidated``, ``expired``; because of the turn:
   ``incognito``, ``out_of_scope`` (not in the turn's scopes), ``policy_on_demand``,
   ``below_min_trust``, ``below_min_relevance`` (the search found it, but the question's best
   match was under ``context.min_relevance``, so nothing was retrieved); or because the section
   that carries its policy did not run:
   ``goal_turn``, ``not_selected`` (a subagent's contract), ``section_disabled``,
   ``section_failed``;
3. **shed**: the section drafted it, the budget shed it (which step, under which budget); or
   the search ranked it within the section's depth, but the rows above it already filled the
   budget, so it was never offered;
4. **never retrieved**: its rank for the turn's query in each retrieval leg and in the final
   list, and the cut-off it missed;
5. **not offered**: none of the above explains it (a section's own rule left it out).

A past turn is judged from its recorded inputs against the store as of the history position
it read (``explain.turns``), so the answer is about what happened then; ``--query`` judges a
turn composed now.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs

from contextplane.config import Config
from contextplane.errors import StoreError, ValidationError
from contextplane.explain.turns import (
    TurnNotRecorded,
    config_for,
    events_of,
    load_inputs,
    past_view,
    position_of,
    request_for,
)
from contextplane.fitting import escape_measured
from contextplane.memory.history import HistoryEvent, HistoryPosition
from contextplane.memory.model import MemoryChunk, format_timestamp, utc_now
from contextplane.plugins import PluginHost, get_host
from contextplane.projection import ProjectedContext, SectionReport, compose
from contextplane.request import ProjectionRequest
from contextplane.store.protocol import SearchTrace

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
        where = f"row {evidence['position']} of {len(ids)}"
        size = f", {evidence['chars']} chars" if "chars" in evidence else ""
        return Verdict(
            memory_id,
            "delivered",
            None,
            f"memory {memory_id} was delivered in section {label} ({where}{size})",
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


def _filtered(turn: _Turn, memory_id: str, reason: str, why: str, evidence: Mapping[str, Any]) -> Verdict:
    return Verdict(
        memory_id, "filtered", reason, f"memory {memory_id} was filtered: {why}", evidence, turn.info
    )


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


def _shed(turn: _Turn, projection: ProjectedContext, memory_id: str) -> Verdict | None:
    recorded_ids = {s["label"]: set(s["ids"]) for s in turn.recorded} if turn.recorded is not None else None
    for report in projection.sections:
        found = _row_of(report, memory_id)
        if found is None:
            continue
        delivered = recorded_ids.get(report.name, set()) if recorded_ids is not None else set(report.item_ids)
        if memory_id in delivered:
            continue
        steps = [s for s in projection.overflow if s.section == report.name]
        actions = ", ".join(f"{s.action} x{s.items} ({s.chars} chars)" for s in steps) or "none recorded"
        evidence = {
            "section": report.name,
            "rank": found[1].rank,
            "offered_position": found[0] + 1,
            "offered": len(report.drafted),
            "delivered": len(delivered),
            "shed_steps": [attrs.asdict(s) for s in steps],
            "budget_chars": projection.budget_chars,
            "used_chars": projection.used_chars,
            "chars": escape_measured(found[1].text)[1],
        }
        return Verdict(
            memory_id,
            "shed",
            None,
            f"memory {memory_id} was drafted by section {report.name} (row {found[0] + 1} of "
            f"{len(report.drafted)}) and shed to fit the {projection.budget_chars}-char budget: {actions}",
            evidence,
            turn.info,
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


def _cut_off(trace: SearchTrace, k: int) -> str:
    if trace.rank is not None:
        return (
            f"it ranked {trace.rank} in the final list; the section searched {k} deep "
            "(what the budget could hold)"
        )
    parts = []
    for leg in trace.legs:
        if leg.rank is None:
            parts.append(f"{leg.leg}: {leg.note or 'not a candidate'}")
        elif leg.rank > leg.cutoff and trace.form == "fast":
            parts.append(
                f"{leg.leg}: rank {leg.rank} of {leg.candidates}, "
                f"past the {leg.cutoff} candidates the leg keeps"
            )
        elif leg.filtered_rank is None:
            parts.append(f"{leg.leg}: rank {leg.rank} of {leg.candidates}, but filtered out")
        else:
            parts.append(
                f"{leg.leg}: rank {leg.rank} of {leg.candidates} ({leg.filtered_rank} after filters)"
            )
    return "; ".join(parts) or "no leg returned it"


def _retrieval(projection: ProjectedContext, request: Any) -> tuple[int, float | None]:
    """The depth the retrieved section searched this turn and the best relevance it saw: from
    its report (``depth``, ``best_relevance``), or for a turn composed before depth followed the
    budget, the fixed depth its configuration gave."""
    report = projection.section("retrieved")
    meta = report.meta if report is not None else {}
    depth = meta.get("depth")
    best = meta.get("best_relevance")
    k = int(depth) if isinstance(depth, int) else int(request.config.context.retrieved_cap)
    return k, float(best) if isinstance(best, (int, float)) else None


def _below_relevance(
    turn: _Turn, projection: ProjectedContext, chunk: MemoryChunk, memory_id: str
) -> Verdict | None:
    """The search returned it within the section's depth, but the question's best hit was under
    the relevance floor, so the section injected nothing (``context.min_relevance`` gates the
    question, not each row): ask the search the section asked and read the row's relevance."""
    request = turn.request
    k, best = _retrieval(projection, request)
    floor = float(request.config.context.min_relevance)
    if chunk.effective_delivery_policy != "retrieved" or not request.query.strip() or k == 0 or floor <= 0:
        return None
    hits = turn.view.search(request.query, k, deliverable=True, namespaces=list(request.namespaces))
    hit = next((h for h in hits if h.chunk.id == memory_id), None)
    offered = [h for h in hits if h.chunk.effective_delivery_policy == "retrieved"]
    known = [h.relevance for h in offered if h.relevance is not None]
    if hit is None or hit.relevance is None or not known or max(known) >= floor:
        return None
    best = max(known) if best is None else best
    return _filtered(
        turn,
        memory_id,
        "below_min_relevance",
        f"the search ranked it {hit.rank} for {request.query!r}, but the question's best match has "
        f"relevance {best:.3f}, below context.min_relevance = {floor:g}: the store cannot answer "
        "it, so no retrieved row was injected",
        {
            "section": "retrieved",
            "rank": hit.rank,
            "relevance": round(hit.relevance, 6),
            "best_relevance": round(best, 6),
            "min_relevance": floor,
        },
    )


def _past_budget(
    turn: _Turn, projection: ProjectedContext, chunk: MemoryChunk, memory_id: str
) -> Verdict | None:
    """The search returned it within the section's depth, but the rows ranked above it already
    filled the budget, so the section did not offer it (fitting would have shed it first)."""
    request = turn.request
    k, _ = _retrieval(projection, request)
    if chunk.effective_delivery_policy != "retrieved" or not request.query.strip() or k == 0:
        return None
    hits = turn.view.search(request.query, k, deliverable=True, namespaces=list(request.namespaces))
    hit = next((h for h in hits if h.chunk.id == memory_id), None)
    if hit is None:
        return None
    return Verdict(
        memory_id,
        "shed",
        None,
        f"the search ranked it {hit.rank} of {len(hits)} for {request.query!r}, but the rows ranked "
        f"above it already fill the {projection.budget_chars}-char budget, so it was not offered "
        "(a larger budget delivers it)",
        {"section": "retrieved", "rank": hit.rank, "depth": k, "budget_chars": projection.budget_chars},
        turn.info,
    )


def _never_retrieved(
    turn: _Turn, projection: ProjectedContext, chunk: MemoryChunk, memory_id: str
) -> Verdict | None:
    if chunk.effective_delivery_policy != "retrieved":
        return None
    request = turn.request
    k, _ = _retrieval(projection, request)
    query = request.query
    evidence: dict[str, Any] = {"section": "retrieved", "query": query, "k": k}
    if not query.strip() or k == 0:
        why = "the turn's query was empty" if not query.strip() else "context.retrieved_max is 0"
        return Verdict(
            memory_id,
            "never_retrieved",
            None,
            f"memory {memory_id} was never retrieved: {why}",
            evidence,
            turn.info,
        )
    if not hasattr(type(turn.view), "trace_search"):  # the class: a proxy's __getattr__ is not asked
        evidence["legs"] = "the store cannot report leg ranks (no trace_search)"
        return Verdict(
            memory_id,
            "never_retrieved",
            None,
            f"memory {memory_id} was never retrieved for {query!r}",
            evidence,
            turn.info,
        )
    trace = turn.view.trace_search(query, memory_id, k, namespaces=list(request.namespaces))
    evidence.update(
        {
            "form": trace.form,
            "final_rank": trace.rank,
            "results": list(trace.results),
            "legs": [attrs.asdict(leg) for leg in trace.legs],
        }
    )
    return Verdict(
        memory_id,
        "never_retrieved",
        None,
        f"memory {memory_id} was never retrieved for {query!r}: {_cut_off(trace, k)}",
        evidence,
        turn.info,
    )


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


def judge(turn: _Turn, memory_id: str, host: PluginHost, events: Sequence[HistoryEvent]) -> Verdict:
    """The verdict for one memory in one (rebuilt) turn."""
    if turn.request.incognito:
        return _filtered(
            turn, memory_id, "incognito", "the turn was incognito: no memory section is composed", {}
        )
    chunk = turn.view.get(memory_id)
    projection = compose(turn.request, host=host, strict=False)
    found = _delivered(turn, projection, memory_id)
    if found is not None:
        return found
    if chunk is None:
        return _gone(turn, events, memory_id)
    verdict = (
        _lifecycle(turn, chunk, events, memory_id)
        or _request_rules(turn, chunk, memory_id)
        or _section_rules(turn, projection, chunk, memory_id, host)
        or _shed(turn, projection, memory_id)
        or _below_relevance(turn, projection, chunk, memory_id)
        or _past_budget(turn, projection, chunk, memory_id)
        or _never_retrieved(turn, projection, chunk, memory_id)
    )
    if verdict is not None:
        return verdict
    return Verdict(
        memory_id,
        "not_offered",
        None,
        f"memory {memory_id} was deliverable and in scope, but no section offered it this turn",
        {"delivery_policy": chunk.effective_delivery_policy},
        turn.info,
    )


@contextlib.contextmanager
def _now_view(backend: Any) -> Iterator[Any]:
    store = backend.memories
    opener = getattr(store, "consistent_read", None)
    if opener is None:
        yield store
        return
    with opener() as view:
        yield view


def explain(
    memory_id: str,
    *,
    backend: Any,
    host: PluginHost | None = None,
    session_id: str | None = None,
    turn_index: int | None = None,
    query: str | None = None,
    project: str | None = None,
    incognito: bool = False,
    goal_turn: bool = False,
    config: Config | None = None,
    exact_ranking: bool = True,
) -> Verdict:
    """Why memory ``memory_id`` was (or was not) delivered in one turn.

    A recorded turn: ``session_id`` and ``turn_index``; it is judged from its recorded
    inputs against the store as of that turn. A turn composed now: ``query`` (with the
    optional ``session_id``, ``project``, ``incognito`` and ``goal_turn`` of that turn)."""
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise ValidationError(f"memory_id: expected a memory id, got {memory_id!r}")
    host = host if host is not None else get_host()
    past = turn_index is not None
    if past == (query is not None):
        raise ValidationError(
            "explain: give either a recorded turn (session_id and turn_index) "
            "or a query (a turn composed now)"
        )
    events = events_of(backend.memories, memory_id)
    if past:
        if session_id is None:
            raise ValidationError("explain: turn_index needs the session_id of the turn")
        assert turn_index is not None
        try:
            inputs = load_inputs(backend, session_id, turn_index)
        except TurnNotRecorded as exc:
            if "was incognito" in str(exc):
                info = {"session_id": session_id, "turn_index": turn_index, "basis": "recorded"}
                return Verdict(
                    memory_id,
                    "filtered",
                    "incognito",
                    f"memory {memory_id} was filtered: the turn was incognito, "
                    "so no memory section was composed",
                    {"recorded": "nothing but a snapshot of references (incognito)"},
                    info,
                )
            raise
        notes: list[str] = []
        cfg = config if config is not None else config_for(inputs, host.config, notes)
        with past_view(backend, inputs, exact_ranking=exact_ranking) as (view, past_backend):
            position = position_of(inputs)
            request = request_for(inputs, cfg, store=view, backend=past_backend)
            info = {
                "session_id": session_id,
                "turn_index": turn_index,
                "query": inputs.query,
                "basis": "recorded",
                "history_position": None if position is None else position.to_dict(),
                **({"notes": notes} if notes else {}),
            }
            turn = _Turn(request, view, inputs.section_manifest(), position, info)
            return judge(turn, memory_id, host, events)
    assert query is not None
    cfg = config if config is not None else host.config
    with _now_view(backend) as view:
        position = view.history_position() if hasattr(type(view), "history_position") else None
        request = ProjectionRequest(
            query=query,
            config=cfg,
            knowledge_store=view,
            session_id=session_id or "",
            project=project if project is not None else cfg.context.project,
            incognito=incognito,
            goal_turn=goal_turn,
            record=False,
            backend=backend,
        )
        info = {
            "session_id": session_id or "",
            "query": query,
            "basis": "now",
            "history_position": None if position is None else position.to_dict(),
        }
        return judge(_Turn(request, view, None, position, info), memory_id, host, events)
