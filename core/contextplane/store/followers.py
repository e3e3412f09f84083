"""Search hits and the memory written right after each: one ranking for the retrieved section and
for ``explain`` (``context.retrieved_follow``).

Why: in a conversation stored turn by turn, the turn that matches a question best is often the
one that asks or echoes it, and what answers it is the turn said next. On LoCoMo at a
2,000-token budget, a quarter of the evidence turns the search missed were the turn right after
one it found. Only conversation turns are followed (``is_turn``). The memory written next in the hit's scope
from the same source (``FollowingReads``) joins the ranking
beside the hit, worth a share of the hit's rank score, so a follower of the best hit ranks with
the hits around 20th place and a follower of a deep hit below every hit near it.

The ranking is by reciprocal rank, ``1 / (FOLLOW_C + rank)`` per hit, plus ``weight / (FOLLOW_C +
rank of the hit it follows)`` per follower, so a row that is both a hit and a follower adds the
two, up to the score of the best hit it follows (never above it: the hit is why it is there).
Ties keep the search's order, then the followers' in the order of the hits they follow.
A follower carries the relevance of the hit it follows (the question is answered by the pair;
the follower's own words need not repeat it), so the section's relevance gate is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import attrs

from contextplane.memory.model import MemoryChunk
from contextplane.store.protocol import FollowingReads, SearchHit

#: The rank offset of the follower scores: small, so the first hits keep a clear lead (the
#: offline harness over LoCoMo's rankings picked it; 1-60 moved recall by under 0.005).
FOLLOW_C = 4


class Followed(NamedTuple):
    """The ranking with the followers in it, best first, and how it was made."""

    #: Hits and followers, best first. A search hit is the store's own (its ``rank`` is the
    #: search's); a follower's ``rank`` is that of the hit it follows.
    hits: list[SearchHit]
    #: ``{id of a row added as a follower: id of the hit it follows}`` (rows that were hits too
    #: are not in it: they were found on their own).
    after: dict[str, str]
    #: ``{id: the rank a hit with its score would have}``, ``1 / score - FOLLOW_C``: a hit the
    #: followers did not lift keeps its search rank exactly, a follower of the best hit stands
    #: at about 21 (weight 0.2). What the section ranks its rows by, so rows already built for
    #: the search's ranking need not be renumbered.
    standing: dict[str, float]


#: The provenance of a conversation turn (ADR D4's table: source type or domain "conversation").
CONVERSATION = "conversation"


def is_turn(chunk: MemoryChunk) -> bool:
    """Whether ``chunk`` is a conversation turn: only turns are followed. Why: the turn after a
    turn is the reply to it; the fact written after a fact is unrelated ("who approves
    deploys?" must not bring "lunch is at noon")."""
    return chunk.source_type == CONVERSATION or chunk.domain == CONVERSATION


def reach(weight: float, depth: int, found: int) -> int | None:
    """The deepest hit whose follower can rank within ``depth`` rows: a follower of the hit at
    rank r scores at most ``weight / (FOLLOW_C + r)``, and the ``depth`` hits above the cut
    each score at least ``1 / (FOLLOW_C + depth)``. Why ask no deeper: at 2,000 tokens the
    section searches ~60 deep and only the followers of the first ~10 hits can be offered;
    asking for all 60 cost a tenth of the turn. (A deeper hit's follower that is itself a hit
    is not lifted; that moves rows by a place or two far down the list.) None (every hit) when
    the search ``found`` fewer than ``depth`` rows: then every follower has room."""
    if weight <= 0:
        return 0
    if found < depth:
        return None
    return max(0, int(weight * (FOLLOW_C + depth)) - FOLLOW_C)


def to_follow(hits: Sequence[SearchHit], upto: int | None = None) -> list[str]:
    """The ids whose followers are asked for: the conversation turns among the hits the
    retrieved section may deliver (policy "retrieved"; an always-on row is delivered by its own
    section and the turn after it is not an answer to this question), ranked ``upto`` or
    better (``reach``) when given."""
    return [
        str(hit.chunk.id)
        for hit in hits
        if (upto is None or hit.rank <= upto)
        and hit.chunk.effective_delivery_policy == "retrieved"
        and is_turn(hit.chunk)
    ]


def with_followers(
    hits: Sequence[SearchHit],
    following: Mapping[str, MemoryChunk],
    weight: float,
    *,
    limit: int | None = None,
) -> Followed:
    """``hits`` and the memories in ``following`` (each hit's id -> the memory written after it)
    ranked together; the best ``limit`` when given (the depth the search was asked for: a
    follower takes the place of the lowest-ranked hit, never adds a row)."""
    if weight <= 0 or not following:
        kept = list(hits) if limit is None else list(hits[:limit])
        return Followed(kept, {}, {str(h.chunk.id): float(h.rank) for h in kept})
    score: dict[str, float] = {}
    first: dict[str, SearchHit] = {}
    for hit in hits:
        key = str(hit.chunk.id)
        if key not in first:
            first[key] = hit
            score[key] = 1.0 / (FOLLOW_C + hit.rank)
    after: dict[str, str] = {}
    ceiling: dict[str, float] = {}
    for hit in hits:
        key = str(hit.chunk.id)
        nxt = following.get(key)
        if nxt is None:
            continue
        follower = str(nxt.id)
        score[follower] = score.get(follower, 0.0) + weight / (FOLLOW_C + hit.rank)
        ceiling[follower] = max(ceiling.get(follower, 0.0), 1.0 / (FOLLOW_C + hit.rank))
        if follower not in first:
            first[follower] = SearchHit(chunk=nxt, score=0.0, rank=hit.rank, relevance=hit.relevance)
            after[follower] = key
        elif follower in after and _higher(hit.relevance, first[follower].relevance):
            # it follows several hits: it answers as well as the best of them
            first[follower] = attrs.evolve(first[follower], relevance=hit.relevance)
    lifted: set[str] = set()
    for follower, most in ceiling.items():
        # lifted up to, never above, the best hit it follows (the hit is why it is there); a
        # hit that ranked higher on its own keeps its place
        own = 1.0 / (FOLLOW_C + first[follower].rank) if follower not in after else 0.0
        value = max(own, min(score[follower], most))
        score[follower] = value
        if value != own:
            lifted.add(follower)
    keys = list(first)
    position = {key: i for i, key in enumerate(keys)}
    keys.sort(key=lambda key: (-score[key], position[key]))
    if limit is not None:
        keys = keys[:limit]
    standing = {
        key: (1.0 / score[key] - FOLLOW_C) if key in lifted else float(first[key].rank) for key in keys
    }
    ranked = [
        attrs.evolve(first[key], score=score[key]) if key in after else first[key] for key in keys
    ]
    chosen = set(keys)
    return Followed(ranked, {key: of for key, of in after.items() if key in chosen}, standing)


def _higher(new: float | None, old: float | None) -> bool:
    return new is not None and (old is None or new > old)


def follows(store: Any) -> bool:
    """Whether ``store`` (or the view a turn reads through) answers ``following``."""
    return callable(getattr(store, "following", None))


def followers_of(store: Any, ids: Sequence[str]) -> dict[str, MemoryChunk]:
    """``store.following(ids)`` (``FollowingReads``); nothing to ask for or a store without the
    read: none."""
    if not ids or not follows(store):
        return {}
    reader: FollowingReads = store
    return reader.following(ids)
