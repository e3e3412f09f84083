"""Rank fusion (``store.fusion``): a row one leg ranks first is never buried by the other."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextplane.store import fusion

ids = st.integers(min_value=1, max_value=60)


def _ranking(draw: st.DrawFn) -> list[int]:
    return draw(st.lists(ids, unique=True, max_size=40))


@st.composite
def two_legs(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    return _ranking(draw), _ranking(draw)


@settings(max_examples=400, deadline=None)
@given(two_legs())
def test_a_row_is_fused_no_lower_than_its_best_leg_rank_allows(legs: tuple[list[int], list[int]]) -> None:
    fts, vector = legs
    fused = [key for key, _ in fusion.fuse([fts, vector])]
    assert sorted(fused) == sorted(set(fts) | set(vector))  # every row of either leg, once
    for key in fused:
        best = min(leg.index(key) + 1 for leg in (fts, vector) if key in leg)
        assert fused.index(key) + 1 <= fusion.rank_bound(best)
    if fts and vector and fts[0] == vector[0]:  # a row both legs rank first is fused first
        assert fused[0] == fts[0]


@settings(max_examples=200, deadline=None)
@given(two_legs())
def test_fusion_is_a_pure_function_of_the_rankings(legs: tuple[list[int], list[int]]) -> None:
    fts, vector = legs
    assert fusion.fuse([fts, vector]) == fusion.fuse([list(fts), list(vector)])
    # swapping the legs changes nothing: neither leg is preferred
    assert [k for k, _ in fusion.fuse([fts, vector])] == [k for k, _ in fusion.fuse([vector, fts])]


def test_the_bound_is_tight_enough_to_matter() -> None:
    # ranked first by one leg, absent from the other, behind rows both legs rank 2..: it stays
    # within the first few places, where RRF's usual constant (60) would put it past 120
    fts = [0, *range(1, 40)]
    vector = list(range(1, 40))
    fused = [key for key, _ in fusion.fuse([fts, vector])]
    assert fused.index(0) + 1 <= fusion.rank_bound(1) == 2 * (fusion.FUSION_C + 1) + 1
    assert [k for k, _ in fusion.fuse([fts, vector], c=60)].index(0) + 1 > 20
