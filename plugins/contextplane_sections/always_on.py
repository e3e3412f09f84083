"""Always-on memories (ADR D6 priority 2): delivery policy "always", deliverable only, never shed.

Selected by ``delivery_policy="always"`` (the v1 ``domain="hot"``), restricted to the turn's
scopes and to rows that are deliverable now: not rejected, not expired, not superseded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextplane.section import ContextSection, Draft, MemoryChunk, ProjectionRequest, Shed, hookimpl
from contextplane.store.aio import alist_chunks
from contextplane_sections.attribution import memory_row, min_trust
from contextplane_sections.envelopes import INJECTED_MEMORY

NAME = "always_on"
PRIORITY = 20


def _filters(request: ProjectionRequest) -> dict[str, Any]:
    return {"deliverable": True, "delivery_policy": "always", "namespaces": list(request.namespaces)}


def _draft_of(chunks: list[MemoryChunk], request: ProjectionRequest) -> Draft:
    floor = min_trust(request.config)
    kept = [c for c in chunks if c.trust_tier >= floor]
    # Operator rows first, then newest: the rank orders the section (it is never shed).
    kept.sort(key=lambda c: (c.updated_at, c.id), reverse=True)
    kept.sort(key=lambda c: -c.trust_tier)
    rows = [memory_row(c, i) for i, c in enumerate(kept, start=1)]
    return Draft(rows, {"below_min_trust": len(chunks) - len(kept)})


def draft(request: ProjectionRequest) -> Draft:
    store = request.knowledge_store
    if store is None:
        return Draft((), {"store": "none"})
    return _draft_of(store.list_chunks(**_filters(request)), request)


async def adraft(request: ProjectionRequest) -> Draft:
    """``draft`` for the async composition: the same rows, read with ``alist_chunks``."""
    store = request.knowledge_store
    if store is None:
        return Draft((), {"store": "none"})
    return _draft_of(await alist_chunks(store, **_filters(request)), request)


SECTION = ContextSection(
    NAME,
    priority=PRIORITY,
    shed=Shed.NEVER,
    draft=draft,
    adraft=adraft,
    envelope=INJECTED_MEMORY,
    carries_memory=True,
    heading="Always-on memories:",
    description="Memories with delivery policy 'always' (standing instructions, profile).",
)


@hookimpl
def register_context_sections(register: Callable[[ContextSection], None]) -> None:
    register(SECTION)
