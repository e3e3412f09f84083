"""``vector_matrix.best_first`` is the full stable sort's prefix, exactly (issue 21: the scan of
the held vectors sorted every row to keep the best ``4n``; ties must stay by id, or two searches
of one store could deliver different rows)."""

from __future__ import annotations

import numpy as np
import pytest

from contextplane.store.vector_matrix import best_first


def _expected(sims: np.ndarray, take: int) -> list[int]:
    return np.argsort(-sims, kind="stable")[:take].tolist()


@pytest.mark.parametrize("seed", range(12))
def test_it_is_the_stable_sorts_prefix_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    # rounded to few values, so many similarities tie, at the cut too
    sims = np.round(rng.uniform(-1, 1, n), int(rng.integers(0, 3))).astype(np.float32)
    for take in {1, 2, n // 3, n // 2, n - 1, n, n + 5, 4 * 10}:
        if take >= 1:
            assert best_first(np, sims, take).tolist() == _expected(sims, take), (n, take)


def test_all_equal_and_non_finite_values_keep_the_full_sorts_order() -> None:
    same = np.full(50, 0.25, dtype=np.float32)
    assert best_first(np, same, 7).tolist() == list(range(7))
    odd = np.array([0.1, np.nan, 0.9, -np.inf, 0.9, np.inf, 0.3], dtype=np.float32)
    for take in range(1, 8):
        assert best_first(np, odd, take).tolist() == _expected(odd, take), take
