"""The chance level: how similar the best of N unrelated stored vectors is to a query, so a cosine
similarity counts only above it (see the comment below for why), and the sample it is measured
on.

Why its own module: the PostgreSQL backend computes the same level from its own sample
(``chance_level``), so a vector relevance means the same on every store.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import threading
from collections.abc import Sequence
from typing import Any, Final

import apsw

from contextplane.store.vector_index.ivf import _numpy

# ---------------------------------------------------------------------- calibration
#
# Why: a cosine similarity is not a relevance on a fixed scale. The vector leg always has
# nearest neighbours, and the best of a million unrelated rows is the far tail of the query's
# similarity to the corpus: with the benchmark's 384-dimension hashing embedder unrelated rows
# sit around 0 +- 0.05, and at 1M rows the best of them reaches 0.3 (a row sharing one hashed
# feature more), so an off-corpus question injected its nearest noise. A real embedder is
# worse: its unrelated texts score 0.1-0.3 (MiniLM) or 0.7 (ada-002) to begin with. So the
# similarity only counts above what chance gives *this* query in *this* corpus: the median of
# the query's similarity to a sample of the stored vectors plus sqrt(2 ln N) robust standard
# deviations (MAD), the expected best of N unrelated rows; the vector relevance is the share
# of the way from there to an identical vector, ``(sim - chance) / (1 - chance)``. Median and
# MAD, not mean and standard deviation: in a small store the rows that do answer the query are
# part of the sample and must not raise the bar they are measured against.

#: Stored vectors the chance level is measured on (kept by ``train``, else the first rows).
CALIBRATION_SAMPLE: Final[int] = 1024
#: Below this many vectors there is no distribution to measure: the raw cosine is the relevance.
MIN_CALIBRATION: Final[int] = 64
#: A normal distribution's standard deviation is 1.4826 median absolute deviations.
_MAD_SIGMA: Final[float] = 1.4826
_SAMPLED_SQL: Final[str] = (
    "SELECT 1.0 - d * d / 2.0 FROM (SELECT vec_distance_l2(s.embedding, (SELECT vec_normalize(:v))) AS d "
    "FROM ({source}) AS s)"
)
_CALIBRATION_SOURCE: Final[str] = (
    "SELECT embedding FROM _vec_calibration UNION ALL SELECT embedding FROM "
    f"(SELECT embedding FROM chunks_vec ORDER BY chunk_id LIMIT {CALIBRATION_SAMPLE}) "
    "WHERE NOT EXISTS (SELECT 1 FROM _vec_calibration)"
)
_FIRST_ROWS_SOURCE: Final[str] = (
    f"SELECT embedding FROM chunks_vec ORDER BY chunk_id LIMIT {CALIBRATION_SAMPLE}"
)
#: What identifies the kept sample: it changes only when ``train`` or ``clear`` runs (or a
#: purge deletes sampled rows). Index seeks only: counting the sample reads all its pages.
_SAMPLE_KEY_SQL: Final[str] = (
    "SELECT (SELECT max(chunk_id) FROM _vec_calibration), (SELECT min(chunk_id) FROM _vec_calibration), "
    "(SELECT group_concat(key || '=' || value, ';') FROM _kb_meta "
    "WHERE key IN ('vector_index_trained_on', 'vector_embedder', 'vector_dimensions'))"
)


def chance_similarity(conn: apsw.Connection, vector: bytes, rows: int) -> float:
    """The cosine similarity the best of ``rows`` unrelated stored vectors reaches for this
    query, by chance alone (see above); 0.0 when fewer than ``MIN_CALIBRATION`` vectors are
    stored. In [0, 0.99]: the vector relevance ``(sim - chance) / (1 - chance)`` is defined.
    The SQL path; ``ChanceLevel`` keeps the sample in memory when numpy is there."""
    found: Any
    try:
        found = conn.execute(_SAMPLED_SQL.format(source=_CALIBRATION_SOURCE), {"v": vector}).fetchall()
    except apsw.SQLError:  # a read-only store written before the calibration table existed
        found = conn.execute(_SAMPLED_SQL.format(source=_FIRST_ROWS_SOURCE), {"v": vector}).fetchall()
    return chance_level([float(r[0]) for r in found], rows)


def chance_level(sims: Sequence[float], rows: int) -> float:
    """The chance level from a query's cosine similarities to a sample of stored vectors, for a
    store of ``rows`` vectors (see above): any backend measures its sample and calls this, so a
    vector relevance means the same on every store. 0.0 below ``MIN_CALIBRATION`` samples."""
    if len(sims) < MIN_CALIBRATION:
        return 0.0
    centre = statistics.median(sims)
    mad = statistics.median([abs(s - centre) for s in sims])
    return _ceiling(centre, _MAD_SIGMA * mad or statistics.pstdev(sims), rows)


def _ceiling(centre: float, sigma: float, rows: int) -> float:
    """The expected best of ``rows`` draws: the median plus sqrt(2 ln rows) deviations. The
    deviation is the MAD's, or, when more than half the sample scores alike (templated rows
    sharing the query's words: a MAD of 0), the standard deviation."""
    chance = centre + sigma * math.sqrt(2.0 * math.log(max(rows, 2)))
    return min(max(chance, 0.0), 0.99)


def vector_relevance(similarity: float, chance: float) -> float:
    """A cosine similarity as a relevance: its share of the way from ``chance`` to 1 (0 at or
    below chance)."""
    return (similarity - chance) / (1.0 - chance) if similarity > chance else 0.0


def median(np: Any, values: Any) -> float:
    """``float(np.median(values))``, the same value, at a quarter of its cost (~5 against ~20 µs
    at 1,000 values: ``np.median``'s generic machinery dominates at these sizes, and the chance
    level takes two medians on every vector search). Even length: the mean of the two middle
    values, added and halved in the array's own dtype as ``np.median`` does."""
    n = len(values)
    k = n // 2
    if n % 2:
        return float(np.partition(values, k)[k])
    part = np.partition(values, (k - 1, k))
    return float((part[k - 1] + part[k]) / 2)


class ChanceLevel:
    """``chance_similarity`` with the kept sample held as a numpy matrix (thread-safe): one
    matrix-vector product a query instead of ``CALIBRATION_SAMPLE`` SQL distance calls. The
    sample is re-read when ``train`` or ``clear`` replaced it; a store with no kept sample yet
    (never trained) measures on its first rows in SQL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: Any = None
        self._matrix: Any = None

    def of(self, conn: apsw.Connection, vector: bytes, rows: int, *, first_rows: Any = None) -> float:
        """The chance level for ``vector`` in a store of ``rows`` vectors. ``first_rows``: the
        query's similarities to every stored vector in chunk id order (``vector_matrix``), used
        for a store with no kept sample: its first ``CALIBRATION_SAMPLE`` are the SQL path's
        sample, without a distance call per row."""
        np = _numpy()
        try:
            key = conn.execute(_SAMPLE_KEY_SQL).fetchone()
        except apsw.SQLError:
            key = None
        if np is not None and first_rows is not None and (key is None or key[0] is None):
            sample = first_rows[:CALIBRATION_SAMPLE]
            if len(sample) < MIN_CALIBRATION:
                return 0.0
            centre = median(np, sample)
            mad = median(np, np.abs(sample - centre))
            return _ceiling(centre, _MAD_SIGMA * mad or float(np.std(sample)), rows)
        if np is None or key is None or key[0] is None:
            return chance_similarity(conn, vector, rows)
        dims = len(vector) // 4
        with self._lock:
            if key != self._key or self._matrix is None or self._matrix.shape[1] != dims:
                blobs = b"".join(bytes(r[0]) for r in conn.execute("SELECT embedding FROM _vec_calibration"))
                self._matrix = np.frombuffer(blobs, dtype=np.float32).reshape(-1, dims)
                self._key = key
            matrix = self._matrix
        query = np.frombuffer(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        sims = matrix @ (query / norm if norm > 0 else query)
        if len(sims) < MIN_CALIBRATION:
            return 0.0
        centre = median(np, sims)
        mad = median(np, np.abs(sims - centre))
        return _ceiling(centre, _MAD_SIGMA * mad or float(np.std(sims)), rows)


def _keep_calibration(conn: apsw.Connection, ids: Sequence[int], rng: random.Random) -> None:
    """Replace the calibration sample with ``CALIBRATION_SAMPLE`` of ``ids`` (caller holds the
    write transaction)."""
    chosen = sorted(rng.sample(list(ids), min(len(ids), CALIBRATION_SAMPLE)))
    conn.execute("DELETE FROM _vec_calibration")
    conn.execute(
        "INSERT INTO _vec_calibration(chunk_id, embedding) SELECT chunk_id, embedding FROM chunks_vec "
        "WHERE chunk_id IN (SELECT value FROM json_each(?))",
        (json.dumps(chosen),),
    )
