"""Prior-session digest (ADR D9, D6 priority 4): cross-session continuity, evaluated per turn.

``context.prior_sessions`` chooses the policy:

* ``newest``: the newest summaries, newest ranked first (and so shed last).
* ``relevant``: summaries ranked by the backend's full-text search against the query (BM25 on
  SQLite). This is ADR D9's relevance gate: a query with no match, or an empty one, gets no
  digest at all, and the section metadata says why (``gate``).
* ``off``: the loader is never called.

The active session is never its own prior session. Goal turns and incognito never call the
loader (the section is goal-suppressed and carries memory). The digest has no cap of its own
beyond ``context.prior_sessions_limit`` candidates: it competes for the D6 budget and is shed
entry by entry. The only cache is the newest list, keyed by summaries table and limit, checked
against the number of summaries (so a summary stored since is seen at once, and a replay reads
what the turn read), and filtered by session *after* the cache, so one session's exclusion
never leaks into another's digest.

Summaries come from the turn's backend (``request.backend.summaries``), whatever it is: a
store that is not SQLite gets the same digest through its own backend.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from contextplane.records.aio import acall
from contextplane.section import (
    ContextSection,
    Draft,
    ProjectionRequest,
    Row,
    SessionSummaries,
    SessionSummary,
    Shed,
    hookimpl,
)
from contextplane_sections.envelopes import INJECTED_MEMORY

NAME = "prior_sessions"
PRIORITY = 40
CACHE_TTL_S = 60.0

#: Per summaries object (weakly, so a closed backend's entries go with it), per limit: when it
#: was read, how many summaries there were, the rows.
_cache: weakref.WeakKeyDictionary[Any, dict[int, tuple[float, int, list[SessionSummary]]]] = (
    weakref.WeakKeyDictionary()
)
_cache_lock = threading.Lock()


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def summaries_for(request: ProjectionRequest) -> SessionSummaries | None:
    """The turn's summaries: its backend's; None without a backend."""
    backend = request.backend
    return None if backend is None else backend.summaries


def _cached(source: SessionSummaries, limit: int, now: float, count: int) -> list[SessionSummary] | None:
    """The cached newest list, while it is fresh and no summary was stored since. Why the
    count: summaries are append-only, so an unchanged count means an unchanged newest list; a
    list cached before a summary was stored would give the next turns (for up to the TTL) a
    digest that a replay of them, reading the summaries stored by their time, cannot match."""
    with _cache_lock:
        try:
            hit = _cache.get(source, {}).get(limit)
        except TypeError:  # a summaries object that cannot be weakly referenced: no cache
            hit = None
    return None if hit is None or now - hit[0] > CACHE_TTL_S or hit[1] != count else hit[2]


def _newest(source: SessionSummaries, limit: int, exclude: str) -> list[SessionSummary]:
    now = time.monotonic()
    count = source.count()
    hit = _cached(source, limit, now, count)
    if hit is None:
        # One extra, so excluding the active session still leaves ``limit`` entries.
        rows = source.newest(limit + 1)
        _keep(source, limit, now, count, rows)
    else:
        rows = hit
    return [r for r in rows if r.session_id != exclude][:limit]


def _keep(source: SessionSummaries, limit: int, now: float, count: int, rows: list[SessionSummary]) -> None:
    with _cache_lock, contextlib.suppress(TypeError):
        _cache.setdefault(source, {})[limit] = (now, count, rows)


def entry(summary: SessionSummary, rank: int) -> Row:
    topic = f" [{summary.topic}]" if summary.topic else ""
    text = f"session {summary.session_id} @ {summary.created_at} ({summary.kind}){topic}: {summary.summary}"
    return Row(
        f"session:{summary.session_id}:{summary.id}", rank, text, meta={"session_id": summary.session_id}
    )


def _settled(request: ProjectionRequest) -> Draft | None:
    """The draft when no summaries are read (policy ``off``, no backend, an empty query under
    ``relevant``), else None."""
    policy = request.config.context.prior_sessions
    if policy == "off":
        return Draft((), {"policy": "off"})
    if summaries_for(request) is None:
        return Draft((), {"policy": policy, "source": "none"})
    if policy == "relevant" and not request.query.strip():
        return Draft((), {"policy": policy, "gate": "closed (empty query: nothing to measure overlap with)"})
    return None


def _draft_of(request: ProjectionRequest, chosen: list[SessionSummary]) -> Draft:
    policy = request.config.context.prior_sessions
    meta: dict[str, Any] = {"policy": policy}
    if policy == "relevant" and not chosen:
        meta["gate"] = "closed (no prior session overlaps the query)"
    return Draft([entry(s, i) for i, s in enumerate(chosen, start=1)], meta)


def draft(request: ProjectionRequest) -> Draft:
    settled = _settled(request)
    if settled is not None:
        return settled
    source = summaries_for(request)
    assert source is not None
    limit = request.config.context.prior_sessions_limit
    exclude = request.session_id
    if request.config.context.prior_sessions == "relevant":
        chosen = source.relevant(request.query, limit, exclude_session=exclude)
    else:
        chosen = _newest(source, limit, exclude)
    return _draft_of(request, chosen)


async def adraft(request: ProjectionRequest) -> Draft:
    """``draft`` for the async composition: the same digest, the summaries read with
    ``contextplane.records.aio.acall`` (the backend's async reads, or its sync ones in a worker
    thread); the newest list is read again only when a summary was stored since (one count)."""
    settled = _settled(request)
    if settled is not None:
        return settled
    source = summaries_for(request)
    assert source is not None
    limit = request.config.context.prior_sessions_limit
    exclude = request.session_id
    if request.config.context.prior_sessions == "relevant":
        chosen = list(await acall(source, "relevant", request.query, limit, exclude_session=exclude))
    else:
        now = time.monotonic()
        count = int(await acall(source, "count"))
        rows = _cached(source, limit, now, count)
        if rows is None:
            rows = list(await acall(source, "newest", limit + 1, exclude_session=None))
            _keep(source, limit, now, count, rows)
        chosen = [r for r in rows if r.session_id != exclude][:limit]
    return _draft_of(request, chosen)


SECTION = ContextSection(
    NAME,
    priority=PRIORITY,
    shed=Shed.DROP_ROWS,
    draft=draft,
    adraft=adraft,
    envelope=INJECTED_MEMORY,
    carries_memory=True,
    goal_suppressed=True,
    heading="Prior sessions:",
    inner_tag="prior_sessions",
    description="Summaries of earlier sessions (never the active one), shed entry by entry.",
)


@hookimpl
def register_context_sections(register: Callable[[ContextSection], None]) -> None:
    register(SECTION)
