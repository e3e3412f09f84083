"""Retrieved memories (ADR D6 priority 5): search hits for the turn's query, shed row by row.

Only rows whose effective delivery policy is "retrieved" are injected: "always" rows are
already in the always-on section and "on_demand" rows reach the model only through the
``memory_recall`` tool. Rows below ``context.inject_min_trust`` are dropped; equal ranks are
ordered by trust tier (the core's row order breaks rank ties by tier).

Depth follows the budget: the section offers as many ranked rows as the budget could hold
(``depth``: at most ``context.retrieved_max``), and D6 fitting sheds the lowest-ranked first.
Why: with a fixed depth of 8 the budget never bound, and on real conversations (LoCoMo)
evidence ranked 9-20 was never delivered while three quarters of a 2,000-token budget sat
unused.

The relevance floor ``context.min_relevance`` gates the question, not each row: when no hit
reaches it, the store cannot answer and nothing is injected (an off-corpus question gets no
nearest noise); when one does, the rows are offered in rank order. Why: judged row by row the
floor dropped the best answers of longer questions (an answer that repeats 3 of 7 question
terms scores ~0.27), while the question as a whole was plainly on topic.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import attrs

from contextplane.section import (
    ContextSection,
    Draft,
    EmbedderError,
    ProjectionRequest,
    Row,
    SearchHit,
    Shed,
    budget_chars,
    hookimpl,
    log_failure,
)
from contextplane.store.aio import afollowing, asearch
from contextplane.store.followers import Followed, followers_of, follows, reach, to_follow, with_followers
from contextplane_sections.attribution import common_attribution, compact_heading, compact_row, min_trust
from contextplane_sections.envelopes import INJECTED_MEMORY

log = logging.getLogger("contextplane.sections.retrieved")

NAME = "retrieved"
PRIORITY = 50
#: The fewest chars a row can cost (its attribution alone is ~50): the budget holds at most
#: ``budget // MIN_ROW_CHARS`` rows, which is how deep the section searches.
MIN_ROW_CHARS = 80
#: Each row's cost beyond its text: the list marker and the line break.
ROW_OVERHEAD = 3
#: What a typical memory costs with its attribution: the first search asks for as many rows as
#: the budget holds at this size, and searches again, as deep as the rows it got say the budget
#: needs (up to ``depth``), only while they cannot fill it. Why not always search ``depth``
#: deep: at 100k-1M memories each row fetched and fused costs, and most turns' budgets fill
#: from the first, shallower search. 300 (session 10; 200 before): the scale bench's ~430-char
#: rows filled its 4,000-token budget from 38 rows, so a first search of 80 fetched and fused
#: twice what it needed (100k, one process alternating the two: 7.67 -> 6.71 ms CPU a turn, the
#: same rows delivered); LoCoMo's ~176-char rows search twice either way (sized from the
#: first), and were no slower (2,000 tokens, hybrid: 12.3 -> 11.8 ms; recall within 0.003). A
#: deeper first search (160) made 1M slower in session 7.
FIRST_ROW_CHARS = 300
#: The margin on the second search's estimate (rows past the budget are never offered).
DEEPER_MARGIN = 1.25


def depth(request: ProjectionRequest) -> int:
    """How many ranked rows to ask the store for: as many as the budget could hold, at most
    ``context.retrieved_max`` (0: retrieval off); the whole cap when the budget is unbounded."""
    cap = request.config.context.retrieved_cap
    if cap == 0:
        return 0
    chars = budget_chars(
        request.config, budget_tokens=request.budget_tokens, context_window=request.context_window
    )
    if chars is None:
        return cap
    return max(1, min(cap, chars // MIN_ROW_CHARS))


def _skip(request: ProjectionRequest) -> Draft | None:
    """The draft when there is nothing to search (no store, no query, ``retrieved_max = 0``)."""
    store = request.knowledge_store
    if store is None or not request.query.strip() or request.config.context.retrieved_cap == 0:
        return Draft((), {"store": "none" if store is None else "ok", "query": bool(request.query.strip())})
    return None


def _options(request: ProjectionRequest) -> dict[str, Any]:
    return {"deliverable": True, "namespaces": list(request.namespaces)}


def _candidates(hits: list[SearchHit], request: ProjectionRequest) -> list[SearchHit]:
    """The hits this section may deliver (retrieved policy, trust at or above the floor): what
    the heading's shared attribution is computed over."""
    floor = min_trust(request.config)
    return [
        hit
        for hit in hits
        if (hit.chunk.delivery_policy or "retrieved") == "retrieved" and hit.chunk.trust_tier >= floor
    ]


class _Laid:
    """A search's candidates, what they share and their compact rows, each built at most once:
    ``_deeper`` measures the rows and ``_draft_of`` offers the same ones (at 100k memories,
    building every row twice was a tenth of a turn's compose). The ranking with followers is
    laid out ``built`` on the search's: a row already built is reused when the rows still share
    the same attribution and it stands where the search ranked it (``Followed.standing``)."""

    __slots__ = ("_after", "_built", "_rows", "_standing", "candidates", "common")

    def __init__(
        self,
        hits: list[SearchHit],
        request: ProjectionRequest,
        followed: Followed | None = None,
        built: _Laid | None = None,
    ) -> None:
        self.candidates = _candidates(hits, request)
        self.common = common_attribution(hit.chunk for hit in self.candidates)
        self._rows: dict[str, Row] = {}
        self._after = followed.after if followed is not None else {}
        self._standing = followed.standing if followed is not None else {}
        self._built = built._rows if built is not None and built.common == self.common else {}

    def row(self, hit: SearchHit) -> Row:
        key = str(hit.chunk.id)
        row = self._rows.get(key)
        if row is None:
            rank = self._standing.get(key, hit.rank)
            row = self._built.get(key)
            if row is None or row.rank != rank:
                row = compact_row(hit.chunk, rank, self.common)
                follows = self._after.get(key)
                if follows is not None:  # for explain: why a row no search ranked was offered
                    row = attrs.evolve(row, meta={**row.meta, "follows": follows})
            self._rows[key] = row
        return row


def _draft_of(hits: list[SearchHit], laid: _Laid, request: ProjectionRequest, k: int) -> Draft:
    floor = min_trust(request.config)
    relevance_floor = request.config.context.min_relevance
    row_floor = request.config.context.min_row_relevance
    # the gate: a question whose best hit is under the floor is one the store cannot answer;
    # judged on the hits this section could deliver (an always-on row matching the question is
    # delivered by its own section and says nothing about whether the store can answer it)
    offered = [hit for hit in hits if (hit.chunk.delivery_policy or "retrieved") == "retrieved"]
    known = [hit.relevance for hit in offered if hit.relevance is not None]
    gated = bool(known) and max(known) < relevance_floor and len(known) == len(offered)
    room = budget_chars(
        request.config, budget_tokens=request.budget_tokens, context_window=request.context_window
    )
    cut = request.config.context.max_row_chars  # the core cuts a longer row to this (0: never)
    common = laid.common
    rows = []
    dropped = irrelevant = 0
    used = 0
    for hit in hits:
        chunk = hit.chunk
        policy = chunk.delivery_policy or "retrieved"
        if policy != "retrieved":
            continue
        if gated or (row_floor > 0 and hit.relevance is not None and hit.relevance < row_floor):
            irrelevant += 1
            continue
        if chunk.trust_tier < floor:
            dropped += 1
            continue
        if room is not None and used > room:
            break  # the rows above fill the budget: the fitting stage need not see the rest
        row = laid.row(hit)
        cost = (min(len(row.text), cut) if cut else len(row.text)) + ROW_OVERHEAD
        if room is None or cost <= room:  # a row no budget holds is shed alone, taking no room
            used += cost
        rows.append(row)
    meta = {
        "hits": len(hits),
        "depth": k,
        "below_min_trust": dropped,
        "below_min_relevance": irrelevant,
        "best_relevance": round(max(known), 6) if known else None,
    }
    order = request.config.context.retrieved_order
    return Draft(
        rows,
        meta,
        heading=compact_heading(common, order) if rows else None,
        render_key=_by_date if order == "chronological" else None,
    )


def _by_date(row: Row) -> str:
    return str(row.meta["when"])


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


def _unfollowed(request: ProjectionRequest, exc: Exception) -> dict[str, Any]:
    """The store's ``following`` failed: strict mode raises; otherwise the turn offers its hits
    without the turns after them, logged once, and the draft's meta says so. Why not fail the
    section: the search, which is what the turn needs most, already answered."""
    if request.config.plugins.strict:
        raise exc
    log_failure(
        log,
        ("retrieved-following", type(request.knowledge_store).__name__, type(exc).__name__),
        "retrieved memories: the store's following() failed, so this turn offered its hits without "
        "the turns after them (logged once): %s",
        exc,
        exc=exc,
    )
    return {"followers_fallback": f"following() failed, hits offered alone: {type(exc).__name__}: {exc}"}


def _with(draft: Draft, meta: dict[str, Any]) -> Draft:
    """``draft`` with more meta, its heading and render order kept (a turn that fell back to
    full text lost both before: its rows were laid out by rank under the section's heading)."""
    return attrs.evolve(draft, meta={**draft.meta, **meta}) if meta else draft


def _first(request: ProjectionRequest) -> tuple[int, int]:
    """(the first search's depth, the deepest the section may go: ``depth``)."""
    deepest = depth(request)
    chars = budget_chars(
        request.config, budget_tokens=request.budget_tokens, context_window=request.context_window
    )
    if chars is None:
        return deepest, deepest
    return max(1, min(deepest, chars // FIRST_ROW_CHARS)), deepest


def _deeper(
    hits: list[SearchHit], laid: _Laid, request: ProjectionRequest, k: int, deepest: int
) -> int | None:
    """The next depth when the store may hold more (it returned all ``k``) and the rows this
    section would offer cannot fill the budget yet; None when this search is deep enough."""
    if len(hits) < k or k >= deepest:
        return None
    room = budget_chars(
        request.config, budget_tokens=request.budget_tokens, context_window=request.context_window
    )
    if room is None:
        return None
    cut = request.config.context.max_row_chars
    used = 0
    for hit in laid.candidates:
        length = len(laid.row(hit).text)
        used += (min(length, cut) if cut else length) + ROW_OVERHEAD
        if used > room:
            return None
    if not laid.candidates:  # none of these could be offered: the next ones may be
        return min(deepest, 4 * k)
    # as deep as the rows seen say the budget needs, with a margin: rows offered per hit
    # (some hits are always-on or under the trust floor) and chars per offered row
    per_hit = len(hits) / len(laid.candidates) * used / len(laid.candidates)
    return min(deepest, max(k + 1, math.ceil(room * DEEPER_MARGIN / per_hit)))


def _follow_weight(request: ProjectionRequest, store: Any) -> float:
    """``context.retrieved_follow``, or 0 when the store cannot say what was written after a
    hit (a third-party store without ``following``: its hits are offered alone)."""
    weight = request.config.context.retrieved_follow
    return weight if weight > 0 and follows(store) else 0.0


def _followed(
    hits: list[SearchHit],
    following: dict[str, Any],
    weight: float,
    laid: _Laid,
    request: ProjectionRequest,
    k: int,
    fell_back: dict[str, Any],
) -> Draft:
    """The draft of the settled search, with the memory written after each hit ranked beside it
    (``contextplane.store.followers``); the meta says how many rows joined that way."""
    if not following:
        return _with(_draft_of(hits, laid, request, k), fell_back)
    # no deeper than the search: ``k`` is what the budget could hold (and at most
    # ``context.retrieved_max``); a follower takes the place of the lowest-ranked hit
    ranked: Followed = with_followers(hits, following, weight, limit=k)
    laid = _Laid(ranked.hits, request, ranked, laid)
    return _with(_draft_of(ranked.hits, laid, request, k), {**fell_back, "followers": len(ranked.after)})


def draft(request: ProjectionRequest) -> Draft:
    skip = _skip(request)
    if skip is not None:
        return skip
    k, deepest = _first(request)
    store = request.knowledge_store
    assert store is not None  # _skip drafted the turn without a store
    fell_back: dict[str, Any] = {}
    while True:
        options = _options(request) | ({"full_text": True} if fell_back else {})
        try:
            hits = store.search(request.query, k, **options)
        except EmbedderError as exc:
            fell_back = _full_text(request, exc)
            hits = store.search(request.query, k, **_options(request) | {"full_text": True})
        laid = _Laid(hits, request)
        more = _deeper(hits, laid, request, k, deepest)
        if more is None:
            weight = _follow_weight(request, store)
            ids = to_follow(hits, reach(weight, k, len(hits))) if weight else []
            try:
                following = followers_of(store, ids)
            except Exception as exc:  # the hits stand without their followers
                following, fell_back = {}, {**fell_back, **_unfollowed(request, exc)}
            return _followed(hits, following, weight, laid, request, k, fell_back)
        k = more


async def adraft(request: ProjectionRequest) -> Draft:
    """``draft`` for the async composition: the same rows, searched with ``asearch``."""
    skip = _skip(request)
    if skip is not None:
        return skip
    k, deepest = _first(request)
    store = request.knowledge_store
    assert store is not None  # _skip drafted the turn without a store
    fell_back: dict[str, Any] = {}
    while True:
        options = _options(request) | ({"full_text": True} if fell_back else {})
        try:
            hits = await asearch(store, request.query, k, **options)
        except EmbedderError as exc:
            fell_back = _full_text(request, exc)
            hits = await asearch(store, request.query, k, **_options(request), full_text=True)
        laid = _Laid(hits, request)
        more = _deeper(hits, laid, request, k, deepest)
        if more is None:
            weight = _follow_weight(request, store)
            ids = to_follow(hits, reach(weight, k, len(hits))) if weight else []
            try:
                following = await afollowing(store, ids) if ids else {}
            except Exception as exc:  # the hits stand without their followers
                following, fell_back = {}, {**fell_back, **_unfollowed(request, exc)}
            return _followed(hits, following, weight, laid, request, k, fell_back)
        k = more


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
