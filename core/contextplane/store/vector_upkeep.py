"""Vector upkeep: embedding text, and keeping the IVF index trained as rows arrive.

The index itself (its layout, training, and why IVF rather than sqlite-vec's ``vec0`` KNN) is
``vector_index``; this is the store's side of it: when to train, how to reindex rows written
before an embedder was configured, and embedding in batches with the embedder's promises
(one vector per text, the declared dimensions) checked.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

import apsw

from contextplane.errors import StoreError
from contextplane.notices import log_once
from contextplane.store import vector_index
from contextplane.store.base import StoreBase
from contextplane.store.migrate import write_transaction

EMBED_BATCH: Final[int] = 256

log = logging.getLogger("contextplane.store")


class VectorUpkeep(StoreBase):
    """Embedding and the vector index's upkeep (a no-op without an embedder)."""

    @property
    def vectors_enabled(self) -> bool:
        """True when searches use the vector leg (an embedder is set and sqlite-vec loaded)."""
        return self._embedder is not None

    def _embed(self, texts: Sequence[str]) -> list[bytes]:
        embedder = self._embedder
        assert embedder is not None
        dims = embedder.dimensions
        out: list[bytes] = []
        for start in range(0, len(texts), EMBED_BATCH):
            batch = texts[start : start + EMBED_BATCH]
            out.extend(self._packed(batch, embedder.embed(batch), dims))
        return out

    def _packed(self, batch: Sequence[str], vectors: Sequence[Sequence[float]], dims: int) -> list[bytes]:
        """The embedder's vectors for ``batch``, its promises checked (one per text, the declared
        width), packed for the index; shared by ``_embed`` and the async search's ``aembed``."""
        embedder = self._embedder
        assert embedder is not None
        if len(vectors) != len(batch):
            raise StoreError(
                f"embedder {embedder.name!r}: returned {len(vectors)} vectors for {len(batch)} texts"
            )
        shape = getattr(vectors, "shape", None)
        if shape is not None and len(shape) == 2 and shape[1] == dims:
            # a 2-D array (numpy or alike): packed in one call, not float by float
            matrix = vector_index.as_float32(vectors)
            return [matrix[i].tobytes() for i in range(len(batch))]
        out: list[bytes] = []
        for vector in vectors:
            if len(vector) != dims:
                raise StoreError(
                    f"embedder {embedder.name!r}: returned a {len(vector)}-dimension vector, declared {dims}"
                )
            out.append(vector_index.pack(vector))
        return out

    def _probes(self, conn: apsw.Connection) -> int:
        return vector_index.probes(conn, self._vector_probes)

    def vector_neighbours(self, query: str, n: int = 10, *, probes: int | None = None) -> list[str]:
        """The vector leg alone, unfiltered: ids of the ``n`` rows nearest to ``query`` as the IVF
        index finds them (``probes`` overrides the list count; a large value makes it exact).
        For diagnostics, tests and the benchmark; callers want ``search``."""
        if self._embedder is None:
            raise StoreError(f"{self.path}: no embedder configured, so there is no vector leg")
        with self._lock:
            conn = self.conn
            return vector_index.neighbours(conn, self._embed([query])[0], n, probes or self._probes(conn))

    def _maybe_train(self) -> None:
        """Train the IVF centroids when the vector count first reaches the threshold, and again
        each time it doubles while the index is small enough to retrain inside a write
        (``vector_index.INLINE_TRAINING_MAX_VECTORS``); past that, say once that a reindex is
        due instead of stalling the write."""
        if self._embedder is None:
            return
        with self._lock:
            inline, count = vector_index.inline_training_due(self.conn, self._vector_index_min_rows)
            if inline:
                self.train_vector_index()
            elif vector_index.training_due(self.conn, self._vector_index_min_rows):
                log_once(
                    log,
                    ("retrain due", self.path),
                    logging.INFO,
                    "%s: the vector index has doubled to %d vectors since it was trained; run "
                    "`contextplane memory reindex` to retrain it (searches stay correct meanwhile)",
                    self.path,
                    count,
                )

    def train_vector_index(
        self, *, iterations: int | None = None, seed: int = 0, use_numpy: bool | None = None
    ) -> int:
        """(Re)train the IVF centroids by k-means on a sample and reassign every vector; return the
        number of lists (about sqrt(n)).

        The slow part (k-means, then the nearest centroid of every vector) runs in a read
        snapshot, so other writers are not blocked; only the swap of centroids and keys takes the
        write lock, and vectors added meanwhile are assigned inside it. Searches never see a
        half-built index.

        Training quality decides recall: on an overlapping 1,024-cluster mixture, 10 iterations
        on 100 points per list reach recall@10 0.99 at 10 probes where 4 iterations on 32 per
        list reach 0.87. With numpy importable (``use_numpy=None`` means "if available") that is
        the default and takes seconds at 100k x 384. Without numpy the same arithmetic runs in
        SQL and Python, about 0.65 us per distance, so the cheaper schedule is used and 100k
        vectors take ~30 s."""
        if self._embedder is None:
            raise StoreError(f"{self.path}: no embedder configured, so there is no vector index to train")
        np = vector_index.training_numpy(use_numpy)
        with self._lock:
            return vector_index.train(self.conn, np, iterations=iterations, seed=seed, step=self._kmeans_step)

    @staticmethod
    def _kmeans_step(conn: apsw.Connection, sample: list[bytes], centroids: list[bytes]) -> list[bytes]:
        """One Lloyd iteration of SQL-path training, looked up on the instance so a test can
        interleave another writer with training."""
        return vector_index.kmeans_step(conn, sample, centroids)

    def reindex_vectors(self, *, rebuild: bool = False) -> int:
        """Embed rows that have no vector (written before an embedder was configured), or every
        row with ``rebuild=True`` (after switching embedders). Returns rows embedded."""
        if self._embedder is None:
            raise StoreError(f"{self.path}: no embedder configured; open the store with embedder=...")
        with self._lock:
            conn = self.conn
            if rebuild:
                with write_transaction(conn):
                    vector_index.clear(conn)
            missing = conn.execute(
                "SELECT id, content FROM chunks WHERE id NOT IN (SELECT chunk_id FROM chunks_vec) ORDER BY id"
            ).fetchall()
            for start in range(0, len(missing), EMBED_BATCH):
                batch = missing[start : start + EMBED_BATCH]
                vectors = self._embed([str(r[1]) for r in batch])
                with write_transaction(conn):
                    vector_index.add_vectors(conn, ((r[0], v) for r, v in zip(batch, vectors, strict=True)))
        self._maybe_train()
        return len(missing)
