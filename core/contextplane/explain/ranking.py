"""The rules that find a memory shed or never retrieved: the budget shed it (which step, under
which budget), the question's best match was under ``context.min_relevance``, the rows ranked
above it filled the budget, or its rank in each retrieval leg missed the cut-off.

Why apart from the filters: these rerun the search the turn ran (its trace, its ranks), which
only a deliverable, in-scope memory needs; ``explain.verdict`` asks them last.
"""

from __future__ import annotations

from typing import Any

import attrs

from contextplane.explain.evidence import Verdict, _filtered, _row_of, _Turn
from contextplane.fitting import escape_measured
from contextplane.memory.model import MemoryChunk
from contextplane.projection import ProjectedContext
from contextplane.store.followers import Followed, followers_of, follows, reach, to_follow, with_followers
from contextplane.store.protocol import SearchTrace


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


def _ranked(turn: _Turn, k: int) -> Followed:
    """The ranking the retrieved section offered from: the search it asked, ``k`` deep, with the
    memory written after each hit beside it (``context.retrieved_follow``) when the store says."""
    request = turn.request
    hits = turn.view.search(request.query, k, deliverable=True, namespaces=list(request.namespaces))
    weight = float(request.config.context.retrieved_follow)
    ids = to_follow(hits, reach(weight, k, len(hits))) if weight > 0 and follows(turn.view) else []
    return with_followers(hits, followers_of(turn.view, ids), weight, limit=k)


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
    ranked = _ranked(turn, k)
    hits = ranked.hits
    hit = next((h for h in hits if h.chunk.id == memory_id), None)
    offered = [h for h in hits if h.chunk.effective_delivery_policy == "retrieved"]
    known = [h.relevance for h in offered if h.relevance is not None]
    if hit is None or hit.relevance is None or not known or max(known) >= floor:
        return None
    best = max(known) if best is None else best
    followed = ranked.after.get(memory_id)
    found = (
        f"it is the memory written right after {followed}, which the search ranked {hit.rank}"
        if followed is not None
        else f"the search ranked it {hit.rank}"
    )
    return _filtered(
        turn,
        memory_id,
        "below_min_relevance",
        f"{found} for {request.query!r}, but the question's best match has "
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
    ranked = _ranked(turn, k)
    hits = ranked.hits
    hit = next((h for h in hits if h.chunk.id == memory_id), None)
    if hit is None:
        return None
    place = hits.index(hit) + 1
    evidence = {"section": "retrieved", "rank": place, "depth": k, "budget_chars": projection.budget_chars}
    how = "the search ranked it"
    if memory_id in ranked.after:
        evidence["follows"] = ranked.after[memory_id]
        how = f"as the memory written right after {ranked.after[memory_id]} (a hit), it ranked"
    return Verdict(
        memory_id,
        "shed",
        None,
        f"{how} {place} of {len(hits)} for {request.query!r}, but the rows ranked "
        f"above it already fill the {projection.budget_chars}-char budget, so it was not offered "
        "(a larger budget delivers it)",
        evidence,
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
