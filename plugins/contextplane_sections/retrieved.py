"""Retrieved memories (ADR D6 priority 5): search hits for the turn's query, shed row by row.

Only rows whose effective delivery policy is "retrieved" are injected: "always" rows are
already in the always-on section and "on_demand" rows reach the model only through the
``memory_recall`` tool. Rows below ``context.inject_min_trust`` are dropped, and so are rows
below the relevance floor ``context.min_relevance`` (a question the store cannot answer
injects nothing rather than its nearest noise); equal ranks are ordered by trust tier (the
core's row order breaks rank ties by tier).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from contextplane import ContextSection, Draft, ProjectionRequest, SearchHit, Shed, hookimpl
from contextplane.errors import EmbedderError
from contextplane.notices import log_failure
from contextplane.store.aio import asearch
from contextplane_sections.attribution import memory_row, min_trust
from contextplane_sections.envelopes import INJECTED_MEMORY

log = logging.getLogger("contextplane.sections.retrieved")

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


def _full_text(request: ProjectionRequest, exc: EmbedderError) -> dict[str, Any]:
    """The embedder failed on this turn's query: strict mode raises; otherwise the turn searches
    full text, logged once, and the draft's meta says so (the section report, the injection
    record's ``fallbacks`` and the snapshot carry it)."""
    if request.config.plugins.strict:
        raise exc
    log_failure(
        log,
        ("retrieved-full-text", type(request.knowledge_store).__name__),
        "retrieved memories: the embedder failed, so this turn searched full text only (logged once): %s",
        exc,
        exc=exc,
    )
    return {"search": "full_text", "fallback": f"embedder failed, full text this turn: {exc}"}


def _with(draft: Draft, meta: dict[str, Any]) -> Draft:
    return Draft(draft.rows, {**draft.meta, **meta}) if meta else draft


def draft(request: ProjectionRequest) -> Draft:
    skip = _skip(request)
    if skip is not None:
        return skip
    k = request.config.context.retrieved_k
    store, fell_back = request.knowledge_store, {}
    try:
        hits = store.search(request.query, k, **_options(request))
    except EmbedderError as exc:
        fell_back = _full_text(request, exc)
        hits = store.search(request.query, k, **_options(request), full_text=True)
    return _with(_draft_of(hits, request), fell_back)


async def adraft(request: ProjectionRequest) -> Draft:
    """``draft`` for the async composition: the same rows, searched with ``asearch``."""
    skip = _skip(request)
    if skip is not None:
        return skip
    k = request.config.context.retrieved_k
    store, fell_back = request.knowledge_store, {}
    try:
        hits = await asearch(store, request.query, k, **_options(request))
    except EmbedderError as exc:
        fell_back = _full_text(request, exc)
        hits = await asearch(store, request.query, k, **_options(request), full_text=True)
    return _with(_draft_of(hits, request), fell_back)


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
