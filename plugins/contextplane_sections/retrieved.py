"""Retrieved memories (ADR D6 priority 5): search hits for the turn's query, shed row by row.

Only rows whose effective delivery policy is "retrieved" are injected: "always" rows are
already in the always-on section and "on_demand" rows reach the model only through the
``memory_recall`` tool. Rows below ``context.inject_min_trust`` are dropped, and so are rows
below the relevance floor ``context.min_relevance`` (a question the store cannot answer
injects nothing rather than its nearest noise); equal ranks are ordered by trust tier (the
core's row order breaks rank ties by tier).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextplane import ContextSection, Draft, ProjectionRequest, SearchHit, Shed, hookimpl
from contextplane.store.aio import asearch
from contextplane_sections.attribution import memory_row, min_trust
from contextplane_sections.envelopes import INJECTED_MEMORY

NAME = "retrieved"
PRIORITY = 50


def _skip(request: ProjectionRequest) -> Draft | None:
    """The draft when there is nothing to search (no store, no query, ``retrieved_k = 0``)."""
    store = request.knowledge_store
    if store is None or not request.query.strip() or request.config.context.retrieved_k == 0:
        return Draft((), {"store": "none" if store is None else "ok", "query": bool(request.query.strip())})
    return None


def _options(request: ProjectionRequest) -> dict[str, Any]:
    return {"deliverable": True, "namespaces": list(request.namespaces)}


def _draft_of(hits: list[SearchHit], request: ProjectionRequest) -> Draft:
    floor = min_trust(request.config)
    relevance_floor = request.config.context.min_relevance
    rows = []
    dropped = irrelevant = 0
    for hit in hits:
        chunk = hit.chunk
        policy = chunk.delivery_policy or "retrieved"
        if policy != "retrieved":
            continue
        if hit.relevance is not None and hit.relevance < relevance_floor:
            irrelevant += 1
            continue
        if chunk.trust_tier < floor:
            dropped += 1
            continue
        rows.append(memory_row(chunk, hit.rank))
    return Draft(rows, {"hits": len(hits), "below_min_trust": dropped, "below_min_relevance": irrelevant})


def draft(request: ProjectionRequest) -> Draft:
    skip = _skip(request)
    if skip is not None:
        return skip
    k = request.config.context.retrieved_k
    return _draft_of(request.knowledge_store.search(request.query, k, **_options(request)), request)


async def adraft(request: ProjectionRequest) -> Draft:
    """``draft`` for the async composition: the same rows, searched with ``asearch``."""
    skip = _skip(request)
    if skip is not None:
        return skip
    k = request.config.context.retrieved_k
    return _draft_of(await asearch(request.knowledge_store, request.query, k, **_options(request)), request)


SECTION = ContextSection(
    NAME,
    priority=PRIORITY,
    shed=Shed.DROP_ROWS,
    draft=draft,
    adraft=adraft,
    envelope=INJECTED_MEMORY,
    carries_memory=True,
    heading="Retrieved memories:",
    description="Memories matching the turn's query (hybrid FTS5 + vector search).",
)


@hookimpl
def register_context_sections(register: Callable[[ContextSection], None]) -> None:
    register(SECTION)
