"""How a hybrid search merges its two rankings: reciprocal rank fusion (RRF), shared by every
backend so a fused rank means the same on each.

Why by rank and not by score: the two legs' scores live on unrelated scales. The previous
fusion added the lexical relevance to the raw cosine similarity, and a row absent from one leg
scored 0 there; on real conversations (LoCoMo, all-MiniLM-L6-v2) that pushed rows ranked 1-2
by full text to fused ranks 12-42, and hybrid delivered less evidence than full text alone.
Ranks need no calibration: each leg only has to order its own candidates well.

Why a small constant: RRF scores a row ``sum 1 / (C + rank)`` over the legs that returned it.
With the usual ``C = 60`` a row ranked first by one leg only (1/61) loses to every row ranked
up to ~60 by both, which is how RRF earned its reputation for burying exact matches. With
``C = FUSION_C`` a row whose better leg rank is ``r`` can be beaten only by rows holding a leg
rank below ``C + 2r`` (their two terms must exceed its one), so its fused rank is at most
``2 (C + 2r - 1) + 1`` (``rank_bound``) whatever the other leg did. Measured on LoCoMo (bench/
locomo_bench.py) the constant barely matters between 1 and 10; it matters for that bound.

Ties are broken by the row's id as the store gives it (older rows first for integer ids), so
the fused order is a pure function of the two rankings: replaying a search reproduces it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Final, TypeVar

K = TypeVar("K", bound=Hashable)

#: The RRF constant (see the module docstring for why it is small).
FUSION_C: Final[int] = 4


def fuse(legs: Sequence[Sequence[K]], *, c: int = FUSION_C) -> list[tuple[K, float]]:
    """The rows of ``legs`` (each a ranking, best first, no repeats) in fused order with their
    RRF scores, best first; ties by the row key (so the order is deterministic)."""
    scores: dict[K, float] = {}
    for leg in legs:
        for rank, key in enumerate(leg, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (c + rank)
    if all(type(key) is int for key in scores):  # the embedded store's ids: one cheap key
        return sorted(scores.items(), key=_by_score_then_int)
    return sorted(scores.items(), key=lambda item: (-item[1], _tiebreak(item[0])))


def _by_score_then_int(item: tuple[Any, float]) -> tuple[float, Any]:
    return (-item[1], item[0])


def _tiebreak(key: Hashable) -> tuple[int, object]:
    # integer ids sort numerically, anything else by its text: never a comparison of mixed types
    return (0, key) if isinstance(key, int) else (1, str(key))


def rank_bound(best_leg_rank: int, legs: int = 2, *, c: int = FUSION_C) -> int:
    """The worst fused rank a row can get when its best rank in any leg is ``best_leg_rank``
    (1-based), whatever the other legs hold: a row outscores it only with some leg rank below
    ``legs * (c + best_leg_rank) - c`` (its at most ``legs`` terms must exceed one), and each
    leg holds fewer than that many such rows."""
    reach = legs * (c + best_leg_rank) - c - 1
    return legs * reach + 1
