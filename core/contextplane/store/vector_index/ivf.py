"""The inverted file itself: its tables, loading sqlite-vec, the embedder's vector space, writing
vectors into their nearest list, and the vector leg a search runs.

Why these together: they share the key layout (``(list << LIST_SHIFT) | chunk_id``, each list one
contiguous rowid range) and run on every write and every search; training and the chance level
read the same tables but run rarely, so they live beside this, not in it.
"""

from __future__ import annotations

import math
import struct
import warnings
from collections.abc import Iterable, Sequence
from typing import Any, Final

import apsw

from contextplane.embedding import Embedder
from contextplane.errors import StoreError
from contextplane.store import migrate, vector_space
from contextplane.store.migrate import write_transaction

LIST_SHIFT: Final[int] = 40  # chunk ids stay below 2**40; the list number sits above them
_LIST_SPAN: Final[int] = (1 << LIST_SHIFT) - 1

_VECTOR_TABLES_SQL: Final[str] = """
CREATE TABLE IF NOT EXISTS chunks_vec (
    key INTEGER PRIMARY KEY,
    chunk_id INTEGER NOT NULL UNIQUE,
    embedding BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS _vec_centroids (list INTEGER PRIMARY KEY, centroid BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS _vec_calibration (chunk_id INTEGER PRIMARY KEY, embedding BLOB NOT NULL);
CREATE TRIGGER IF NOT EXISTS chunks_vec_ad AFTER DELETE ON chunks BEGIN
    DELETE FROM chunks_vec WHERE chunk_id = old.id;
END;
CREATE TRIGGER IF NOT EXISTS chunks_vec_calibration_ad AFTER DELETE ON chunks BEGIN
    DELETE FROM _vec_calibration WHERE chunk_id = old.id;
END;
"""
_NEAREST_LIST_SQL: Final[str] = (
    "coalesce((SELECT list FROM _vec_centroids ORDER BY vec_distance_l2(centroid, {v}) LIMIT 1), 0)"
)
_INSERT_VECTOR_SQL: Final[str] = (
    "INSERT OR REPLACE INTO chunks_vec(key, chunk_id, embedding) "
    f"SELECT ({_NEAREST_LIST_SQL.format(v='e.v')} << {LIST_SHIFT}) | :id, :id, e.v "
    "FROM (SELECT vec_normalize(:v) AS v) AS e"
)


class VectorSearchUnavailableWarning(RuntimeWarning):
    """sqlite-vec could not be loaded: the store works, but search is full-text only."""


# ---------------------------------------------------------------------- setup


def load_sqlite_vec(conn: apsw.Connection, path: str, explicit_path: str | None) -> bool:
    """Load sqlite-vec into ``conn`` (from the ``sqlite_vec`` package unless a path is given);
    on failure warn once and return False. ``path`` names the store in the warning.
    ``stacklevel=4`` skips this function, the store's constructor and its caller (usually
    ``open_store``), so the warning names the code that opened the store."""
    try:
        if explicit_path is None:
            import sqlite_vec

            explicit_path = str(sqlite_vec.loadable_path())
        conn.enable_load_extension(True)
        conn.load_extension(explicit_path)
        return True
    except (ImportError, apsw.Error, OSError) as exc:
        warnings.warn(
            f"{path}: sqlite-vec could not be loaded ({exc}); vector search is disabled and "
            "search uses full-text (FTS5) only. Install a working sqlite-vec to get hybrid search.",
            VectorSearchUnavailableWarning,
            stacklevel=4,
        )
        return False


def attach(conn: apsw.Connection, path: str, embedder: Embedder) -> None:
    """Create the index tables if missing and record the vector space (the embedder's name and
    dimensions) the first time; refuse an embedder of another space (``vector_space.check``:
    a different width could not be compared at all, a different model only meaninglessly)."""
    dims = _positive_dims(embedder)
    with write_transaction(conn):
        conn.execute(_VECTOR_TABLES_SQL)
        vector_space.check(
            path,
            migrate.meta_get(conn, "vector_embedder"),
            migrate.meta_get(conn, "vector_dimensions"),
            embedder.name,
            dims,
        )
        record_space(conn, embedder.name, dims)


def _positive_dims(embedder: Embedder) -> int:
    dims = int(embedder.dimensions)
    if dims < 1:
        raise StoreError(f"embedder {embedder.name!r}: dimensions must be positive, got {dims}")
    return dims


def require_space(conn: apsw.Connection, path: str, embedder: Embedder) -> None:
    """Inside a write transaction that adds vectors: refuse them when the recorded space is no
    longer ``embedder``'s (another process rebuilt the store since this one opened it)."""
    vector_space.check(
        path,
        migrate.meta_get(conn, "vector_embedder"),
        migrate.meta_get(conn, "vector_dimensions"),
        embedder.name,
        int(embedder.dimensions),
    )


def record_space(conn: apsw.Connection, name: str, dims: int) -> None:
    """Record the vector space (caller holds the write transaction)."""
    conn.execute(
        "INSERT OR REPLACE INTO _kb_meta(key, value) VALUES ('vector_dimensions', ?), ('vector_embedder', ?)",
        (str(dims), name),
    )


def start_rebuild(conn: apsw.Connection, embedder: Embedder) -> None:
    """Drop every vector and record ``embedder``'s space, in one transaction: from here on the
    store holds vectors of one space only (none yet), and ``reindex_vectors`` fills them,
    resumably."""
    dims = _positive_dims(embedder)
    with write_transaction(conn):
        conn.execute(_VECTOR_TABLES_SQL)
        clear(conn)
        record_space(conn, embedder.name, dims)


def missing_count(conn: apsw.Connection) -> int:
    """Rows without a vector (written before an embedder was configured, or mid-rebuild)."""
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunks_vec'"
    ).fetchone()
    sql = "SELECT count(*) FROM chunks" + (
        " WHERE id NOT IN (SELECT chunk_id FROM chunks_vec)" if has_table else ""
    )
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


# ---------------------------------------------------------------------- writes


def as_float32(matrix: Any) -> Any:
    """A 2-D array-like as a C-contiguous float32 numpy array (numpy is present: the caller
    holds an array)."""
    np = _numpy()
    assert np is not None
    return np.ascontiguousarray(matrix, dtype=np.float32)


def pack(vector: Sequence[float]) -> bytes:
    """A vector as the float32 blob sqlite-vec reads."""
    return struct.pack(f"{len(vector)}f", *vector)


def add_vectors(conn: apsw.Connection, rows: Iterable[tuple[Any, bytes]]) -> None:
    """Store ``(chunk_id, packed vector)`` pairs (ids as read from ``chunks.id``), normalised, each
    in its nearest trained list (list 0 before any training). The caller holds the write
    transaction.

    With numpy the whole batch is normalised and assigned in one matrix product (the nearest
    centroid of a unit vector is the one with the largest inner product); without it each
    vector's list is found by SQL, about 0.2 ms a vector against a thousand centroids."""
    np = _numpy()
    if np is None:
        conn.executemany(_INSERT_VECTOR_SQL, ({"id": i, "v": v} for i, v in rows))
        return
    batch = list(rows)
    if not batch:
        return
    dims = len(batch[0][1]) // 4
    block = np.frombuffer(b"".join(v for _, v in batch), dtype=np.float32).reshape(len(batch), dims)
    norms = np.linalg.norm(block, axis=1, keepdims=True)
    block = (block / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    trained: list[Any] = conn.execute("SELECT list, centroid FROM _vec_centroids ORDER BY list").fetchall()
    if trained:
        lists = np.array([int(r[0]) for r in trained], dtype=np.int64)
        blobs = b"".join(bytes(r[1]) for r in trained)
        matrix = np.frombuffer(blobs, dtype=np.float32).reshape(-1, dims)
        labels = lists[np.argmax(block @ matrix.T, axis=1)].tolist()
    else:
        labels = [0] * len(batch)
    # In key order: each list's new vectors are appended at its end in one visit, instead of
    # one random B-tree leaf per vector (which made vector inserts most of an ingest).
    keyed = sorted(
        ((label << LIST_SHIFT) | int(chunk_id), index)
        for index, (label, (chunk_id, _)) in enumerate(zip(labels, batch, strict=True))
    )
    conn.executemany(
        "INSERT OR REPLACE INTO chunks_vec(key, chunk_id, embedding) VALUES (?, ?, ?)",
        ((key, key & _LIST_SPAN, block[index].tobytes()) for key, index in keyed),
    )


def clear(conn: apsw.Connection) -> None:
    """Drop every vector, the centroids and the training record (caller holds the write
    transaction): the next vectors start an untrained index."""
    conn.execute("DELETE FROM chunks_vec")
    conn.execute("DELETE FROM _vec_centroids")
    conn.execute("DELETE FROM _vec_calibration")
    conn.execute("DELETE FROM _kb_meta WHERE key IN ('vector_index_trained_on', 'vector_index_lists')")
    bump_generation(conn)


def bump_generation(conn: apsw.Connection) -> None:
    """Mark the centroids and every vector's list as replaced (caller holds the write
    transaction): what holds them in memory (``store/vector_lists.py``) reads them again. The
    trained-on count alone cannot say so: a retrain on as many vectors writes the same count."""
    conn.execute(
        "INSERT OR REPLACE INTO _kb_meta(key, value) VALUES ('vector_index_generation', CAST(coalesce("
        "(SELECT value FROM _kb_meta WHERE key = 'vector_index_generation'), 0) AS INTEGER) + 1)"
    )


# ---------------------------------------------------------------------- queries


def probes(conn: apsw.Connection, configured: int | None) -> int:
    """Lists a query scans: the configured count (at least 1), else one in 32 of the trained
    lists and at least 8. With about sqrt(n) lists that scans roughly 3% of the vectors."""
    if configured is not None:
        return max(1, configured)
    lists = int(migrate.meta_get(conn, "vector_index_lists") or 0)
    return max(8, math.ceil(lists / 32))


def vector_leg(where: str, *, exact: bool) -> list[str]:
    """CTEs ``qv``, ``probe`` and ``vec`` (id, r, sim): the IVF vector leg, exact distances over
    the nearest ``:probes`` lists plus list 0 (unassigned vectors); ``sim`` is the cosine
    similarity (unit vectors: 1 - d^2 / 2). Fast form filters the best ``:nc`` vectors; exact
    form filters every scanned vector. ``where`` filters ``chunks AS c``, joined with ``CROSS
    JOIN`` so the planner cannot drive the leg from the scope index. A fresh list on each call:
    the store appends its other legs to it."""
    scan = (
        "SELECT cv.chunk_id AS id, vec_distance_l2(cv.embedding, (SELECT v FROM qv)) AS d "
        f"FROM probe CROSS JOIN chunks_vec AS cv ON cv.key BETWEEN (probe.list << {LIST_SHIFT}) "
        f"AND (probe.list << {LIST_SHIFT}) + {_LIST_SPAN}"
    )
    if exact:
        ranked = f"{scan} CROSS JOIN chunks AS c ON c.id = cv.chunk_id WHERE {where} ORDER BY d, id LIMIT :n"
    elif where == "1":
        ranked = f"{scan} ORDER BY d, id LIMIT :n"
    else:
        ranked = (
            f"SELECT t.id AS id, t.d AS d FROM ({scan} ORDER BY d LIMIT :nc) AS t "
            f"CROSS JOIN chunks AS c ON c.id = t.id WHERE {where} ORDER BY t.d, t.id LIMIT :n"
        )
    return [
        "qv AS (SELECT vec_normalize(:v) AS v)",
        "probe AS (SELECT 0 AS list UNION ALL SELECT * FROM (SELECT list FROM _vec_centroids "
        "ORDER BY vec_distance_l2(centroid, (SELECT v FROM qv)) LIMIT :probes))",
        "vec AS (SELECT id, row_number() OVER (ORDER BY d, id) AS r, 1.0 - d * d / 2.0 AS sim "
        f"FROM ({ranked}))",
    ]


def neighbours(conn: apsw.Connection, vector: bytes, n: int, probe_count: int) -> list[str]:
    """Ids of the ``n`` stored vectors nearest to ``vector`` as the index finds them, unfiltered."""
    params = {"v": vector, "n": n, "probes": probe_count}
    sql = "WITH " + ", ".join(vector_leg("1", exact=False)) + " SELECT id FROM vec ORDER BY r"
    return [str(r[0]) for r in conn.execute(sql, params)]


def _numpy() -> Any:
    """numpy if importable: an optional accelerator for index training only."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy
