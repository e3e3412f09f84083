"""The store's vector index: an inverted file (IVF) in plain tables, over sqlite-vec distances.

Vectors are L2-normalised and stored under the key ``(list << 40) | chunk_id``, so each list is
one contiguous rowid range. A query ranks the centroids, scans only the nearest ``probes`` lists
(plus list 0, vectors not yet assigned) with exact distances, and so needs no rescoring step.
sqlite-vec's own ``vec0`` KNN was measured first: its top-k cost grows with k times the row
count, so a quantised prefilter deep enough for good recall was slower than this (see
bench/store_bench.py). Centroids are trained by k-means on a sample when the vector count first
reaches the store's ``vector_index_min_rows`` and again each time it doubles.

sqlite-vec is a loadable extension that may be missing or broken; ``load_sqlite_vec`` then warns
once (``VectorSearchUnavailableWarning``) and the store searches with full text only.

Every function here works on a connection the caller (the store) has open and locked. Writes
run inside the caller's write transaction, except ``train``, which takes its own read snapshot
and then its own write transaction so that training does not block other writers.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
import struct
import threading
import warnings
from array import array
from collections.abc import Callable, Iterable, Sequence
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

#: One Lloyd iteration of the SQL training path: (connection, sample, centroids) -> centroids.
KMeansStep = Callable[[apsw.Connection, list[bytes], list[bytes]], list[bytes]]


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
    transaction): what holds them in memory (``vector_lists``) reads them again. The trained-on
    count alone cannot say so: a retrain on as many vectors writes the same count."""
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
            centre = float(np.median(sample))
            mad = float(np.median(np.abs(sample - centre)))
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
        centre = float(np.median(sims))
        mad = float(np.median(np.abs(sims - centre)))
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


# ---------------------------------------------------------------------- training


#: Retraining inside a write stops here: past it a retrain (k-means on ~100 sqrt(n) vectors,
#: then rewriting every key) takes seconds to tens of seconds (39 s at 1M), which no ``add``
#: call should stall for. Larger indexes are retrained by ``contextplane memory reindex`` (or
#: ``train_vector_index()``); until then new vectors join their nearest trained list, so
#: search stays correct and lists grow past sqrt(n).
INLINE_TRAINING_MAX_VECTORS: Final[int] = 65_536


def training_due(conn: apsw.Connection, min_rows: int) -> bool:
    """True when the vector count first reaches ``min_rows`` and each time it doubles after the
    last training, so list sizes stay near sqrt(n)."""
    return _training_due(conn, min_rows)[0]


def _training_due(conn: apsw.Connection, min_rows: int) -> tuple[bool, int, int]:
    # max(chunk_id) bounds the count from above and costs one index seek, not a scan
    upper = int(migrate.scalar(conn, "SELECT coalesce(max(chunk_id), 0) FROM chunks_vec"))
    trained_on = int(migrate.meta_get(conn, "vector_index_trained_on") or 0)
    if upper < max(min_rows, 2 * trained_on):
        return False, upper, trained_on
    count = int(migrate.scalar(conn, "SELECT count(*) FROM chunks_vec"))
    return count >= max(min_rows, 2 * trained_on), count, trained_on


def inline_training_due(conn: apsw.Connection, min_rows: int) -> tuple[bool, int]:
    """(train now, vector count): due, and either never trained or small enough to retrain
    inside a write (``INLINE_TRAINING_MAX_VECTORS``)."""
    due, count, trained_on = _training_due(conn, min_rows)
    return due and (trained_on == 0 or count <= INLINE_TRAINING_MAX_VECTORS), count


def _numpy() -> Any:
    """numpy if importable: an optional accelerator for index training only."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def training_numpy(use_numpy: bool | None) -> Any:
    """The numpy module training should use, or None for the SQL path. ``use_numpy=None`` means
    "if importable"; ``True`` without numpy is an error rather than a silent slow path."""
    np = _numpy() if use_numpy is not False else None
    if use_numpy and np is None:
        raise StoreError("train_vector_index: use_numpy=True but numpy is not importable")
    return np


def _kmeans_numpy(np: Any, sample: list[bytes], lists: int, iterations: int, seed: int) -> list[bytes]:
    """Spherical k-means (Lloyd) on unit vectors; an empty list keeps its centroid."""
    dims = len(sample[0]) // 4
    data = np.frombuffer(b"".join(sample), dtype=np.float32).reshape(-1, dims)
    generator = np.random.default_rng(seed)
    centroids = data[generator.choice(len(data), size=min(lists, len(data)), replace=False)].copy()
    for _ in range(iterations):
        labels = np.concatenate(
            [np.argmax(data[i : i + 8192] @ centroids.T, axis=1) for i in range(0, len(data), 8192)]
        )
        sums = np.zeros_like(centroids)
        np.add.at(sums, labels, data)
        norms = np.linalg.norm(sums, axis=1)
        filled = norms > 0
        centroids[filled] = sums[filled] / norms[filled, None]
    return [row.tobytes() for row in centroids.astype(np.float32)]


def _assign_numpy(np: Any, conn: apsw.Connection, centroids: list[bytes]) -> list[tuple[int, int]]:
    """(list, chunk_id) for every stored vector: nearest centroid by inner product (unit vectors)."""
    dims = len(centroids[0]) // 4
    matrix = np.frombuffer(b"".join(centroids), dtype=np.float32).reshape(-1, dims)
    out: list[tuple[int, int]] = []
    cursor = conn.execute("SELECT chunk_id, embedding FROM chunks_vec")
    while True:
        rows = list(itertools.islice(cursor, 8192))
        if not rows:
            return out
        block = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float32).reshape(-1, dims)
        labels = np.argmax(block @ matrix.T, axis=1) + 1
        out.extend(zip(labels.tolist(), (int(r[0]) for r in rows), strict=True))


def _load_training_centroids(conn: apsw.Connection, centroids: list[bytes], first_list: int) -> None:
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS _vec_train (list INTEGER PRIMARY KEY, centroid BLOB)")
    conn.execute("DELETE FROM temp._vec_train")
    conn.executemany(
        "INSERT INTO temp._vec_train VALUES (?, vec_normalize(?))",
        ((first_list + i, c) for i, c in enumerate(centroids)),
    )


def kmeans_step(conn: apsw.Connection, sample: list[bytes], centroids: list[bytes]) -> list[bytes]:
    """One Lloyd iteration: assign with sqlite-vec distances, average in Python."""
    _load_training_centroids(conn, centroids, first_list=0)
    dims = len(centroids[0]) // 4
    sums = [array("d", bytes(8 * dims)) for _ in centroids]
    counts = [0] * len(centroids)
    for blob in sample:
        row = conn.execute(
            "SELECT list FROM temp._vec_train ORDER BY vec_distance_l2(centroid, vec_normalize(?)) LIMIT 1",
            (blob,),
        ).fetchone()
        index = int(row[0]) if row is not None else 0
        values = array("f", blob)
        acc = sums[index]
        for j in range(dims):
            acc[j] += values[j]
        counts[index] += 1
    out: list[bytes] = []
    for index, centroid in enumerate(centroids):
        if counts[index] == 0:
            out.append(centroid)  # an empty list keeps its centroid
            continue
        norm = math.sqrt(sum(x * x for x in sums[index])) or 1.0
        out.append(array("f", [x / norm for x in sums[index]]).tobytes())
    return out


def train(
    conn: apsw.Connection,
    np: Any,
    *,
    iterations: int | None,
    seed: int,
    step: KMeansStep = kmeans_step,
) -> int:
    """(Re)train the centroids and reassign every vector; return the number of lists (0 when
    there are no vectors). ``np`` is numpy (see ``training_numpy``) or None for the SQL path,
    whose iterations go through ``step``.

    The slow part (k-means, then the nearest centroid of every vector) runs in a read snapshot,
    so other writers are not blocked; only the swap of centroids and keys takes the write lock,
    and vectors added meanwhile are assigned inside it. Searches never see a half-built index.
    The caller must not be inside a transaction."""
    rng = random.Random(seed)
    conn.execute("BEGIN")  # a read snapshot: WAL lets writers commit meanwhile
    try:
        ids = [int(r[0]) for r in conn.execute("SELECT chunk_id FROM chunks_vec ORDER BY chunk_id")]
        if not ids:
            return 0
        lists = max(1, min(4096, round(math.sqrt(len(ids)))))
        per_list, default_iterations = (100, 10) if np is not None else (32, 4)
        chosen = sorted(rng.sample(ids, min(len(ids), lists * per_list)))
        sample = [
            bytes(r[0])
            for r in conn.execute(
                "SELECT embedding FROM chunks_vec WHERE chunk_id IN (SELECT value FROM json_each(?))",
                (json.dumps(chosen),),
            )
        ]
        rng.shuffle(sample)
        rounds = default_iterations if iterations is None else iterations
        assignment: Sequence[tuple[Any, ...]]
        if np is not None:
            centroids = _kmeans_numpy(np, sample, lists, rounds, seed)
            assignment = _assign_numpy(np, conn, centroids)
            _load_training_centroids(conn, centroids, first_list=1)
        else:
            centroids = sample[:lists]
            for _ in range(rounds):
                centroids = step(conn, sample, centroids)
            _load_training_centroids(conn, centroids, first_list=1)
            assignment = conn.execute(
                "SELECT (SELECT list FROM temp._vec_train "
                "ORDER BY vec_distance_l2(centroid, cv.embedding) LIMIT 1), cv.chunk_id "
                "FROM chunks_vec AS cv"
            ).fetchall()
    finally:
        conn.execute("COMMIT")
    with write_transaction(conn):
        conn.execute("DELETE FROM _vec_centroids")
        conn.execute("INSERT INTO _vec_centroids(list, centroid) SELECT list, centroid FROM temp._vec_train")
        conn.executemany(
            f"UPDATE chunks_vec SET key = (? << {LIST_SHIFT}) | chunk_id WHERE chunk_id = ?",
            assignment,
        )
        conn.execute(  # vectors written by others while we trained
            f"UPDATE chunks_vec SET key = ({_NEAREST_LIST_SQL.format(v='chunks_vec.embedding')} "
            f"<< {LIST_SHIFT}) | chunk_id WHERE chunk_id > ?",
            (ids[-1],),
        )
        conn.execute(
            "INSERT OR REPLACE INTO _kb_meta(key, value) VALUES ('vector_index_trained_on', ?), "
            "('vector_index_lists', ?)",
            (str(len(ids)), str(len(centroids))),
        )
        bump_generation(conn)
        _keep_calibration(conn, ids, rng)
    return len(centroids)
