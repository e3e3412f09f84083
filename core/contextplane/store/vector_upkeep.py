"""Vector upkeep: embedding text, and keeping the IVF index trained as rows arrive.

The index itself (its layout, training, and why IVF rather than sqlite-vec's ``vec0`` KNN) is
``vector_index``; this is the store's side of it: when to train, how to reindex rows written
before an embedder was configured, and embedding in batches with the embedder's promises
(one vector per text, the declared dimensions) checked.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any, Final

import apsw

from contextplane.embedding import Embedder, aembed, embedder_failed, refused_write
from contextplane.errors import EmbedderError, StoreError
from contextplane.notices import log_once
from contextplane.store import migrate, vector_index
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
            try:
                vectors = embedder.embed(batch)
            except Exception as exc:
                raise embedder_failed(embedder, exc) from exc
            out.extend(self._packed(batch, vectors, dims))
        return out

    async def _aembed(self, embedder: Embedder, texts: Sequence[str], *, writing: bool = False) -> Any:
        """``aembed`` with its failures as ``EmbedderError`` (a refused write says so)."""
        with refused_write() if writing else contextlib.nullcontext():
            try:
                return await aembed(embedder, texts)
            except Exception as exc:
                raise embedder_failed(embedder, exc) from exc

    def _packed(self, batch: Sequence[str], vectors: Sequence[Sequence[float]], dims: int) -> list[bytes]:
        """The embedder's vectors for ``batch``, its promises checked (one per text, the declared
        width), packed for the index; shared by ``_embed`` and the async search's ``aembed``."""
        embedder = self._embedder
        assert embedder is not None
        if len(vectors) != len(batch):
            raise EmbedderError(
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
                raise EmbedderError(
                    f"embedder {embedder.name!r}: returned a {len(vector)}-dimension vector, declared {dims}"
                )
            out.append(vector_index.pack(vector))
        return out

    def vectorless_count(self) -> int:
        """Rows without a vector: written before an embedder was configured, or left by an
        interrupted rebuild; ``reindex_vectors`` embeds them."""
        with self._lock:
            return vector_index.missing_count(self.conn)

    def vector_space(self) -> tuple[str | None, int | None]:
        """(embedder name, dimensions) the stored vectors were made with, or (None, None)."""
        with self._lock:
            dims = migrate.meta_get(self.conn, "vector_dimensions")
            return migrate.meta_get(self.conn, "vector_embedder"), None if dims is None else int(dims)

    def rebuild_vectors(self, embedder: Embedder) -> int:
        """Embed every row again with ``embedder`` and make its space the store's: the way out
        of a ``VectorSpaceError`` (open the store without an embedder, then call this). One row
        is embedded first, so an embedder that fails outright leaves the old vectors in place;
        then every vector is dropped and the new space recorded in one transaction, and the
        rows are embedded in batches (``reindex_vectors``): interrupted, the store holds vectors
        of the new space only, and ``reindex_vectors`` (``memory reindex``) finishes the job.
        Returns rows embedded."""
        if self._read_only:
            raise StoreError(f"{self.path}: cannot rebuild vectors: {self._read_only_reason}")
        if not vector_index.load_sqlite_vec(self.conn, self.path, self._sqlite_vec_path):
            raise StoreError(
                f"{self.path}: sqlite-vec could not be loaded, so there is no vector index to build"
            )
        with self._lock:
            first = self.conn.execute("SELECT content FROM chunks ORDER BY id LIMIT 1").fetchone()
            previous, self._embedder = self._embedder, embedder
            try:
                if first is not None:
                    self._embed([str(first[0])])
                vector_index.start_rebuild(self.conn, embedder)
            except BaseException:
                self._embedder = previous
                raise
            self._chance = vector_index.ChanceLevel()
        return self.reindex_vectors()

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
                    vector_index.require_space(conn, self.path, self._embedder)
                    vector_index.add_vectors(conn, ((r[0], v) for r, v in zip(batch, vectors, strict=True)))
        self._maybe_train()
        return len(missing)
