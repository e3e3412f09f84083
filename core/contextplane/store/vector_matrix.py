"""A small store's vectors held as one numpy matrix: the vector leg's scan form and the chance
level in one matrix-vector product each.

Why: a scan in SQL pays a row lookup, an index seek and a ``vec_distance_l2`` call per row in
scope; over 1,000 memories that was most of a hybrid search (~10 ms under load), while numpy
computes the same 1,000 cosines in about 0.02 ms. Up to ``MATRIX_MAX`` vectors (~30 MB at 384
dimensions) the store keeps them in memory, re-read when the corpus version (the history's last
position) changes, so every read of one version sees the same matrix. Past it, or without numpy
(an optional dependency, the ``vectors`` extra), the leg scans in SQL (``legs``).

The matrix holds every stored vector, normalised as the store stores them (``vec_normalize``),
ordered by chunk id; a scan ranks by similarity then id, and only rows the search's filters
admit (scope, deliverable, the view's point in time) are kept, asked of SQL for the candidates
alone, so the filters mean exactly what they mean everywhere else.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Hashable
from typing import Any, Final

import apsw

from contextplane.store import query_terms, vector_index

#: The most vectors held in memory (see the module docstring).
MATRIX_MAX: Final[int] = 20_000


class VectorMatrix:
    """Thread-safe cache of one store's vectors (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: Hashable | None = None
        self._ids: Any = None
        self._matrix: Any = None

    def get(self, conn: apsw.Connection, vectors: int) -> tuple[Any, Any] | None:
        """(ids, matrix) of every stored vector as ``conn`` reads them, or None when numpy is
        missing or the store holds more than ``MATRIX_MAX`` (``vectors``: about how many)."""
        np = vector_index._numpy()
        if np is None or vectors > MATRIX_MAX:
            return None
        key = query_terms.corpus_version(conn)
        with self._lock:
            if key == self._key and self._matrix is not None:
                return self._ids, self._matrix
        statement = "SELECT chunk_id, embedding FROM chunks_vec ORDER BY chunk_id"
        rows: list[Any] = conn.execute(statement).fetchall()
        if len(rows) > MATRIX_MAX:
            return None
        if not rows:
            ids, matrix = np.zeros(0, dtype=np.int64), np.zeros((0, 1), dtype=np.float32)
        else:
            ids = np.array([int(r[0]) for r in rows], dtype=np.int64)
            matrix = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float32).reshape(
                len(rows), -1
            )
        with self._lock:
            self._key, self._ids, self._matrix = key, ids, matrix
        return ids, matrix

    def clear(self) -> None:
        with self._lock:
            self._key = self._ids = self._matrix = None


def similarities(matrix: Any, vector: bytes) -> Any:
    """Cosine similarity of every (unit) row of ``matrix`` to ``vector`` (normalised here).

    ``einsum``, not ``matrix @ query``: the ``@`` goes to the BLAS, whose threads wait on each
    other when the machine is busy; measured at 2,601 x 384 with the load at 5 on 2 cores, ``@``
    took 0.07 ms median but 12 ms at p95 (19 ms mean under a profile), ``einsum`` (numpy's own
    single-threaded loop) 0.17 ms median and 2.9 ms at p95; at 20,000 rows 1.3 against 0.6 ms
    median, 1.7 against 9.2 ms at p95. A turn's latency is its tail."""
    np = vector_index._numpy()
    query = np.frombuffer(vector, dtype=np.float32)
    norm = float(np.linalg.norm(query))
    return np.einsum("ij,j->i", matrix, query / norm if norm > 0 else query)


def best_first(np: Any, sims: Any, take: int) -> Any:
    """The positions of the ``take`` highest similarities, best first, equal ones by position
    (ids are sorted, so by id): exactly ``np.argsort(-sims, kind="stable")[:take]``, without
    sorting every row. Why: a search wants the best ``4n`` of up to 20,000 held rows, and a full
    stable sort of them cost more than the product that scored them (~1 ms at 20,000)."""
    total = len(sims)
    if take >= total:
        return np.argsort(-sims, kind="stable")
    negated = -sims
    kth = negated[np.argpartition(negated, take - 1)[take - 1]]  # the take-th best value
    if not np.isfinite(kth):  # NaN or infinities: leave the ordering to the full sort
        return np.argsort(negated, kind="stable")[:take]
    better = np.flatnonzero(negated < kth)
    tied = np.flatnonzero(negated == kth)[: take - len(better)]
    chosen = np.concatenate((better, tied))
    return chosen[np.lexsort((chosen, negated[chosen]))]


def scan(
    conn: apsw.Connection,
    ids: Any,
    sims: Any,
    where: str,
    params: dict[str, Any],
    n: int,
    *,
    first: int | None = None,
) -> list[tuple[int, float]]:
    """The ``n`` rows ``where`` admits (on ``chunks AS c``) with the highest similarity, ties by
    id: the best ``first`` candidates (``4n`` unless given) first, filtered in SQL; when the
    filters leave fewer than ``n`` and more rows exist, 8 times as many, and so on."""
    return scan_widening(conn, ids, sims, where, params, n, first=first)[0]


def scan_widening(
    conn: apsw.Connection,
    ids: Any,
    sims: Any,
    where: str,
    params: dict[str, Any],
    n: int,
    *,
    first: int | None = None,
) -> tuple[list[tuple[int, float]], int]:
    """``scan``, and how many candidates it filtered last (a caller remembers it per scope set,
    so a scope that keeps few of the nearest vectors starts there next time)."""
    np = vector_index._numpy()
    total = len(ids)
    if total == 0:
        return [], 0
    take = min(total, 4 * n if first is None else max(n, first))
    while True:
        chosen = best_first(np, sims, take)
        keys = [int(k) for k in ids[chosen]]
        allowed = {
            int(r[0])
            for r in conn.execute(
                f"SELECT c.id FROM chunks AS c WHERE c.id IN (SELECT value FROM json_each(:ids)) AND {where}",
                {**params, "ids": json.dumps(keys)},
            )
        }
        kept = [(key, float(sims[i])) for key, i in zip(keys, chosen.tolist(), strict=True) if key in allowed]
        if len(kept) >= n or take >= total:
            return kept[:n], take
        take = min(total, take * 8)


def admitted_in_order(
    conn: apsw.Connection,
    ids: Any,
    sims: Any,
    where: str,
    params: dict[str, Any],
    n: int,
) -> list[tuple[int, float]]:
    """The ``n`` rows ``where`` admits with the highest similarity, ties by id, in one statement:
    every candidate is handed to SQL best first and SQL stops at the ``n``-th admitted one.

    Why not ``scan``'s widening: a scope holding a twentieth of the store keeps one candidate
    in twenty, so widening from the first ``2n`` re-filtered the candidates two or three times a
    search (a row lookup each); here each candidate is looked up at most once, and no more of
    them than it takes. ``json_each`` yields the array in order and ``CROSS JOIN`` keeps it the
    outer loop; the order SQL returned (``j.key``) is checked, and a plan that did not keep it
    is answered by filtering every candidate instead."""
    np = vector_index._numpy()
    total = len(ids)
    if total == 0 or n <= 0:
        return []
    # the best 4n first, in the full order (``best_first``): a scope holding most rows admits n
    # of them, and sorting and handing SQL every probed candidate (~3,500 at 100k rows) cost
    # more than the lookups; the rest, in order, only when the prefix admits fewer than n
    take = min(total, 4 * n)
    chosen = best_first(np, sims, take)
    found = _admitted(conn, ids[chosen].tolist(), sims[chosen].tolist(), where, params, n)
    if len(found) < n and take < total:
        rest = np.argsort(-sims, kind="stable")[take:]
        found += _admitted(conn, ids[rest].tolist(), sims[rest].tolist(), where, params, n - len(found))
    return found


def _admitted(
    conn: apsw.Connection, keys: list[int], values: list[float], where: str, params: dict[str, Any], n: int
) -> list[tuple[int, float]]:
    """The first ``n`` of ``keys`` (in their order) that ``where`` admits, with their values."""
    rows: list[Any] = conn.execute(
        "SELECT j.key FROM json_each(:ids) AS j CROSS JOIN chunks AS c ON c.id = j.value "
        f"WHERE {where} LIMIT :n_admitted",
        {**params, "ids": json.dumps(keys), "n_admitted": n},
    ).fetchall()
    positions = [int(r[0]) for r in rows]
    if any(b <= a for a, b in itertools.pairwise(positions)):
        allowed = {
            int(r[0])
            for r in conn.execute(
                f"SELECT c.id FROM chunks AS c WHERE c.id IN (SELECT value FROM json_each(:ids)) AND {where}",
                {**params, "ids": json.dumps(keys)},
            )
        }
        positions = [i for i, key in enumerate(keys) if key in allowed][:n]
    return [(keys[i], values[i]) for i in positions]
