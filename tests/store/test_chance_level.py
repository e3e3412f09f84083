"""The vector leg's chance level (``vector_index.chance_similarity``): what the best unrelated
row reaches by chance, measured on a sample the store keeps. Its relevance effect is shown
through the retrieved section in tests/sections/test_relevance_floor.py; here, the sample."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

from contextplane.store import SQLiteKnowledgeStore, vector_index
from tests.store.helpers import HashEmbedder


def rows(n: int) -> list[dict[str, object]]:
    return [{"content": f"note {i} about widget {i % 37} and gadget {i % 53} in lane {i % 11}"} for i in range(n)]


def test_training_keeps_a_sample_and_both_paths_measure_the_same_level(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3", embedder=HashEmbedder(), vector_index_min_rows=256) as store:
        conn = store.conn
        # never trained: no kept sample, the level is measured on the first rows
        store.add_chunks(rows(200))
        assert conn.execute("SELECT count(*) FROM _vec_calibration").fetchone()[0] == 0
        query = store._embed(["what about widget 5 in lane 3?"])[0]
        untrained = vector_index.chance_similarity(conn, query, 200)
        assert untrained == store._chance.of(conn, query, 200) > 0
        store.add_chunks(rows(1400))  # trains at 256, 512 and 1024 vectors
        kept = conn.execute("SELECT count(*) FROM _vec_calibration").fetchone()[0]
        assert kept == vector_index.CALIBRATION_SAMPLE
        level = store._chance.of(conn, query, 1600)
        assert math.isclose(level, vector_index.chance_similarity(conn, query, 1600), abs_tol=1e-4)
        # more rows to beat by chance raise the level: sqrt(2 ln N) deviations
        assert store._chance.of(conn, query, 10**6) > level
        assert 0 < level < 0.99


def test_a_purged_row_leaves_the_sample(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3", embedder=HashEmbedder(), vector_index_min_rows=64) as store:
        ids = store.add_chunks(rows(100))
        sampled = {str(r[0]) for r in store.conn.execute("SELECT chunk_id FROM _vec_calibration")}
        assert sampled == set(ids)  # fewer rows than the sample: all of them
        gone = ids[:10]
        past = datetime.now(UTC) - timedelta(days=1)
        for chunk_id in gone:
            store.set_expires_at(chunk_id, past)
        assert store.purge() == 10
        left = {str(r[0]) for r in store.conn.execute("SELECT chunk_id FROM _vec_calibration")}
        assert left == set(ids[10:])  # no vector of a purged memory is kept


def test_the_fast_median_is_numpys_median_exactly() -> None:
    """The chance level's medians (``chance.median``) must be ``np.median``'s values bit for bit:
    the relevance of every vector hit, and so what a turn delivers, is computed from them."""
    import numpy as np

    from contextplane.store.vector_index.chance import median

    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 4, 255, 256, 999, 1000, 1001):
        for dtype in (np.float32, np.float64):
            values = rng.standard_normal(n).astype(dtype)
            assert median(np, values) == float(np.median(values)), (n, dtype)
            centre = median(np, values)
            spread = np.abs(values - centre)
            assert median(np, spread) == float(np.median(spread)), (n, dtype)
    ties = np.array([0.5, 0.5, 0.5, 0.25], dtype=np.float32)  # a MAD of 0 (templated rows)
    assert median(np, np.abs(ties - median(np, ties))) == 0.0
