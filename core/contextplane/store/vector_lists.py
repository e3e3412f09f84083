"""The IVF index's lists held in memory: the vector leg's index form in numpy, not in SQL.

Why: the index form scans the nearest ``probes`` lists with one ``vec_distance_l2`` call per
stored vector, ~1.3 µs a row: at 100k memories (316 lists, 10 probed) that was ~4.5 ms, the
largest part of a turn, while numpy takes ~0.2 ms for the same 3,500 cosines once the lists are
in memory. A store whose vectors fit in ``store.vector_memory_mb`` (256 MB by default: about
170k vectors of 384 dimensions) reads every list on its first vector search (one pass, ~0.25 s
at 100k: an in-memory index is loaded once, as an HNSW file is) and keeps them; a bigger one,
or one without numpy, scans in SQL as before (``legs.vector_statements``). The rule is the store's size, not
the cache's state, so a given store always ranks through the same arithmetic.

What a held list is valid for: a list changes only when a vector is written into it (content is
never rewritten in place: a new text is a new row), deleted from it, or when the index is
retrained (every vector may move). So each list is held with the corpus version it was read at
(``query_terms.corpus_version``: the history's last position); when the version has moved, its
fingerprint (count, sum and largest of its keys: one range read of the list's rowids) is
compared before use, and only a list whose fingerprint changed is read again. An agent that
writes a memory every turn re-reads the one or two lists it wrote to, not the index. Retraining
or clearing the index (``vector_index.bump_generation``) drops everything.

The numbers: similarities are the dot products of unit vectors (``vector_matrix.similarities``),
the same values the SQL form derives from its L2 distances up to float32 rounding; ties rank by
chunk id, as there.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any, Final

import apsw

from contextplane.errors import StoreError
from contextplane.store import migrate, vector_index

#: The default bound on the vectors held (``store.vector_memory_mb``).
DEFAULT_MEMORY_MB: Final[int] = 256

_LIST_ROWS = "SELECT key, embedding FROM chunks_vec WHERE key BETWEEN ? AND ? ORDER BY key"
_FINGERPRINT = "SELECT count(*), sum(key & ?), max(key) FROM chunks_vec WHERE key BETWEEN ? AND ?"
_ALL_ROWS = "SELECT key, embedding FROM chunks_vec ORDER BY key"


#: No generation read yet (a store's generation may itself be None: trained before it was kept).
_UNREAD: Final = object()


def _bounds(number: int) -> tuple[int, int]:
    low = number << vector_index.LIST_SHIFT
    return low, low + vector_index._LIST_SPAN


def _matrix(np: Any, rows: list[Any]) -> Any:
    """The float32 matrix of the vectors in column 1 of ``rows``; a row of another length (a
    damaged file) is refused by name instead of reshaping into a wrong matrix."""
    blobs = [bytes(r[1]) for r in rows]
    lengths = [len(b) for b in blobs]
    width = max(set(lengths), key=lengths.count)  # the others' length: the odd one is damaged
    for row, blob in zip(rows, blobs, strict=True):
        if len(blob) != width or width % 4:
            raise StoreError(_DAMAGED.format(key=f"key {int(row[0])}", got=len(blob), want=width))
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(rows), -1)


_DAMAGED = (
    "the vector index holds a vector of {got} bytes ({key}) where {want} are expected: the "
    "store's vectors are damaged; run `contextplane memory check`, then `contextplane memory "
    "reindex` to rebuild them from the memories' text"
)


class _List:
    """One held list: its chunk ids (ascending), their unit vectors, the version it was last
    known current at, and the fingerprint it was read with."""

    __slots__ = ("fingerprint", "ids", "matrix", "version")

    def __init__(self, ids: Any, matrix: Any, version: Hashable, fingerprint: tuple[Any, ...]) -> None:
        self.ids = ids
        self.matrix = matrix
        self.version = version
        self.fingerprint = fingerprint


class HeldLists:
    """Thread-safe cache of one store's IVF lists (see the module docstring)."""

    def __init__(self, memory_mb: int = DEFAULT_MEMORY_MB) -> None:
        if memory_mb < 0:
            raise ValueError(f"vector_memory_mb must be 0 or more, got {memory_mb}")
        self._max_bytes = memory_mb * 1024 * 1024
        self._lock = threading.Lock()
        self._generation: object = _UNREAD
        self._centroids: tuple[Any, Any] | None = None
        self._lists: dict[int, _List] = {}
        self._loading = threading.Lock()

    def holds(self, vectors: int, dims: int) -> bool:
        """Whether a store of about ``vectors`` vectors of ``dims`` dimensions is searched here
        (numpy present and the vectors within the bound)."""
        return (
            self._max_bytes > 0
            and vector_index._numpy() is not None
            and vectors * dims * 4 <= self._max_bytes
        )

    def candidates(
        self, conn: apsw.Connection, vector: bytes, probes: int, version: Hashable
    ) -> tuple[Any, Any] | None:
        """(chunk ids ascending, their cosine similarity to ``vector``) over list 0 and the
        ``probes`` lists whose centroids are nearest, as ``conn`` reads them; None when the
        index has no centroids (untrained: the SQL form handles list 0 alone)."""
        np = vector_index._numpy()
        centroids = self._current_centroids(conn)
        if centroids is None:
            return None
        if not self._lists:
            self._load_all(conn, version)
        numbers, matrix = centroids
        query = np.frombuffer(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        unit = query / norm if norm > 0 else query
        nearest = np.argsort(-np.einsum("ij,j->i", matrix, unit), kind="stable")[:probes]
        ids_parts: list[Any] = []
        sims_parts: list[Any] = []
        for number in [0, *numbers[nearest].tolist()]:
            held = self._list(conn, int(number), version)
            if held.ids.size and held.matrix.shape[1] != unit.shape[0]:
                got, key = held.matrix.shape[1] * 4, int(held.ids[0])
                raise StoreError(_DAMAGED.format(key=f"chunk {key}", got=got, want=len(vector)))
            if held.ids.size:
                ids_parts.append(held.ids)
                sims_parts.append(np.einsum("ij,j->i", held.matrix, unit))
        if not ids_parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        ids = np.concatenate(ids_parts)
        sims = np.concatenate(sims_parts)
        order = np.argsort(ids, kind="stable")
        return ids[order], sims[order]

    def clear(self) -> None:
        with self._lock:
            self._generation = _UNREAD
            self._centroids = None
            self._lists = {}

    # ------------------------------------------------------------------ internals

    def _current_centroids(self, conn: apsw.Connection) -> tuple[Any, Any] | None:
        generation = migrate.meta_get(conn, "vector_index_generation")
        with self._lock:
            if generation == self._generation:
                return self._centroids
        np = vector_index._numpy()
        rows: list[Any] = conn.execute("SELECT list, centroid FROM _vec_centroids ORDER BY list").fetchall()
        centroids = None
        if rows:
            numbers = np.array([int(r[0]) for r in rows], dtype=np.int64)
            centroids = (numbers, _matrix(np, rows))
        with self._lock:
            self._generation, self._centroids, self._lists = generation, centroids, {}
        return centroids

    def _load_all(self, conn: apsw.Connection, version: Hashable) -> None:
        """Read every list in one pass (the first search after the store opened or the index was
        retrained): ~2 µs a vector, 0.2-0.3 s at 100k, once, instead of a cold list (~0.7 ms) in
        most searches of the first few hundred. One list's rows at a time are held as Python
        objects, so the peak is the matrices plus one list."""
        np = vector_index._numpy()
        with self._loading:
            if self._lists:  # another thread loaded them while this one waited
                return
            loaded: dict[int, _List] = {}
            current = -1
            rows: list[Any] = []
            for key, blob in conn.execute(_ALL_ROWS):
                number = int(key) >> vector_index.LIST_SHIFT
                if number != current and rows:
                    loaded[current] = self._from_rows(np, rows, version)
                    rows = []
                current = number
                rows.append((key, blob))
            if rows:
                loaded[current] = self._from_rows(np, rows, version)
            with self._lock:
                for number, held in loaded.items():
                    self._lists.setdefault(number, held)

    @staticmethod
    def _from_rows(np: Any, rows: list[Any], version: Hashable) -> _List:
        """A held list of ``rows`` (key, vector) in key order, with the fingerprint SQL gives it."""
        span = vector_index._LIST_SPAN
        ids = np.array([int(r[0]) & span for r in rows], dtype=np.int64)
        fingerprint = (len(rows), int(ids.sum()), int(rows[-1][0]))
        return _List(ids, _matrix(np, rows), version, fingerprint)

    def _list(self, conn: apsw.Connection, number: int, version: Hashable) -> _List:
        with self._lock:
            held = self._lists.get(number)
        if held is not None and held.version == version:
            return held
        low, high = _bounds(number)
        fingerprint = tuple(conn.execute(_FINGERPRINT, (vector_index._LIST_SPAN, low, high)).fetchone() or ())
        if held is not None and held.fingerprint == fingerprint:
            held.version = version
            return held
        np = vector_index._numpy()
        rows: list[Any] = conn.execute(_LIST_ROWS, (low, high)).fetchall()
        if rows:
            ids = np.array([int(r[0]) & vector_index._LIST_SPAN for r in rows], dtype=np.int64)
            matrix = _matrix(np, rows)
        else:
            ids, matrix = np.zeros(0, dtype=np.int64), np.zeros((0, 1), dtype=np.float32)
        fresh = _List(ids, matrix, version, fingerprint)
        with self._lock:
            self._lists[number] = fresh
        return fresh
