"""Training the index: k-means on a sample (numpy, or one SQL Lloyd step at a time), then every
vector reassigned to its nearest centroid, and when a write may do that inline.

Why apart from the index: training is rare and slow (seconds at 1M vectors) and runs in its own
read snapshot and write transaction; the hot path (``ivf``) never imports numpy's k-means or
waits on it.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from array import array
from collections.abc import Callable, Sequence
from typing import Any, Final

import apsw

from contextplane.errors import StoreError
from contextplane.store import migrate
from contextplane.store.migrate import write_transaction
from contextplane.store.vector_index.chance import _keep_calibration
from contextplane.store.vector_index.ivf import _NEAREST_LIST_SQL, LIST_SHIFT, _numpy, bump_generation

#: One Lloyd iteration of the SQL training path: (connection, sample, centroids) -> centroids.
KMeansStep = Callable[[apsw.Connection, list[bytes], list[bytes]], list[bytes]]


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
