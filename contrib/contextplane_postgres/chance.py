"""The vector leg's chance level on PostgreSQL: what the best unrelated row reaches for a query.

Why: a cosine similarity is not a relevance on a fixed scale (the embedded store's
``contextplane.store.vector_index`` says why at length: the best of many unrelated rows is the
far tail of the query's similarity to the corpus). The embedded store measures a query against
a sample of its stored vectors and calls ``vector_index.chance_level``; so does this one, so a
vector relevance, and with it the relevance floor, means the same on both.

The sample is the first ``CALIBRATION_SAMPLE`` stored vectors by id, read once per corpus
version (the term plan's key: the history position the read sees), so it is a function of the
corpus: an as-of view measures on the corpus of then, and a replay scores as the turn did.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Final

import numpy as np
import psycopg

from contextplane.store.vector_index import CALIBRATION_SAMPLE, MIN_CALIBRATION, chance_level

#: Corpus versions whose samples are kept at once (the present and a few as-of views).
_VERSIONS_KEPT: Final[int] = 4
_SAMPLE_SQL: Final[str] = (
    f"SELECT embedding FROM chunks WHERE embedding IS NOT NULL ORDER BY id LIMIT {CALIBRATION_SAMPLE}"
)


def _array(value: Any) -> Any:
    """A stored vector as a float32 array (pgvector's ``Vector``, or a sequence)."""
    raw = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(raw, dtype=np.float32)


class PgChance:
    """Samples of stored vectors (unit-normalised, as one matrix) per corpus version."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._versions: dict[Hashable, Any] = {}

    def of(
        self, conn: psycopg.Connection[Any], vector: Any, version: Hashable, rows: Callable[[], int]
    ) -> float:
        """The chance level for ``vector`` on the corpus ``conn`` reads (named by ``version``);
        ``rows()`` gives the corpus's row count (the term plan's, cached per version)."""
        with self._lock:
            matrix = self._versions.get(version)
        if matrix is None:
            found = [_array(r[0]) for r in conn.execute(_SAMPLE_SQL)]
            matrix = np.vstack(found) if found else np.zeros((0, len(vector)), dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            matrix = matrix / np.where(norms > 0, norms, 1.0)
            with self._lock:
                self._versions.pop(version, None)
                self._versions[version] = matrix  # newest last
                while len(self._versions) > _VERSIONS_KEPT:
                    del self._versions[next(iter(self._versions))]
        if len(matrix) < MIN_CALIBRATION:
            return 0.0
        query = _array(vector)
        norm = float(np.linalg.norm(query))
        sims = matrix @ (query / norm if norm > 0 else query)
        return chance_level([float(s) for s in sims], max(rows(), len(matrix)))
