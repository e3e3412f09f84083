"""Prior-session digest (ADR D9, D6 priority 4): cross-session continuity, evaluated per turn.

``context.prior_sessions`` chooses the policy:

* ``newest``: the newest summaries, newest ranked first (and so shed last).
* ``relevant``: summaries ranked by FTS5 BM25 against the query. An empty query, or one with
  no match, falls back to ``newest`` and says so in the section metadata (``fallback``).
* ``off``: the loader is never called.

The active session is never its own prior session. Goal turns and incognito never call the
loader (the section is goal-suppressed and carries memory). The digest has no cap of its own
beyond ``context.prior_sessions_limit`` candidates: it competes for the D6 budget and is shed
entry by entry. The only cache is the newest list, keyed by file and limit and filtered by
session *after* the cache, so one session's exclusion never leaks into another's digest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from contextplane import ContextSection, Draft, ProjectionRequest, Row, Shed, hookimpl
from contextplane_sections.envelopes import INJECTED_MEMORY
from contextplane_sections.session_summaries import SessionSummaries, SessionSummary, summaries_at
from contextplane_sections.sqlite_file import store_file

NAME = "prior_sessions"
PRIORITY = 40
CACHE_TTL_S = 60.0

_cache: dict[tuple[str, int], tuple[float, list[SessionSummary]]] = {}
_cache_lock = threading.Lock()


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def summaries_for(request: ProjectionRequest) -> SessionSummaries | None:
    """Where the summaries live: explicit, else beside the SQLite store, else ``store.path``."""
    explicit = request.extra.get("session_summaries")
    if explicit is not None:
        return explicit  # type: ignore[no-any-return]
    path = store_file(request)
    return summaries_at(path) if path is not None else None


def _newest(source: SessionSummaries, limit: int, exclude: str) -> list[SessionSummary]:
    key = (getattr(source, "path", str(id(source))), limit)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
    if hit is None or now - hit[0] > CACHE_TTL_S:
        # One extra, so excluding the active session still leaves ``limit`` entries.
        rows = source.newest(limit + 1)
        with _cache_lock:
            _cache[key] = (now, rows)
    else:
        rows = hit[1]
    return [r for r in rows if r.session_id != exclude][:limit]


def entry(summary: SessionSummary, rank: int) -> Row:
    topic = f" [{summary.topic}]" if summary.topic else ""
    text = f"session {summary.session_id} @ {summary.created_at} ({summary.kind}){topic}: {summary.summary}"
    return Row(
        f"session:{summary.session_id}:{summary.id}", rank, text, meta={"session_id": summary.session_id}
    )


def draft(request: ProjectionRequest) -> Draft:
    policy = request.config.context.prior_sessions
    if policy == "off":
        return Draft((), {"policy": "off"})
    source = summaries_for(request)
    if source is None:
        return Draft((), {"policy": policy, "source": "none"})
    limit = request.config.context.prior_sessions_limit
    exclude = request.session_id
    meta: dict[str, Any] = {"policy": policy}
    chosen: list[SessionSummary]
    if policy == "relevant":
        if not request.query.strip():
            meta["fallback"] = "newest (empty query)"
            chosen = _newest(source, limit, exclude)
        else:
            chosen = source.relevant(request.query, limit, exclude_session=exclude)
            if not chosen:
                meta["fallback"] = "newest (no summary matched the query)"
                chosen = _newest(source, limit, exclude)
    else:
        chosen = _newest(source, limit, exclude)
    rows: list[Row] = [entry(s, i) for i, s in enumerate(chosen, start=1)]
    return Draft(rows, meta)


SECTION = ContextSection(
    NAME,
    priority=PRIORITY,
    shed=Shed.DROP_ROWS,
    draft=draft,
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
