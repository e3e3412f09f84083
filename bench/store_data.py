"""Data generators for the store benchmark. Deterministic (seeded numpy), documented, no network.

- ``text_corpus``: rows of 20-40 words drawn from a 5,000-word vocabulary with Zipf(1.1) weights,
  which gives FTS5 the skewed term frequencies of real prose (a few very common words, a long tail).
- ``clustered_vectors``: a Gaussian mixture, the stand-in for real sentence embeddings. 64 cluster
  centres ~ N(0, I); each cluster gets its own per-dimension standard deviation drawn from
  U(0.05, 1.0) (anisotropic: some directions tight, some loose); a point is centre + scaled noise;
  every vector is L2-normalised. Queries come from the same mixture but are not data points.
- ``clustered_vectors(clusters=1024, spread=0.5)``: the same with 1,024 clusters whose centres
  are half as far apart, so neighbouring clusters overlap: a harder case for IVF.
- ``gaussian_vectors``: i.i.d. N(0, I), normalised: no structure at all, the worst case for any
  partitioned (IVF) or quantised index, and unlike real embeddings.
- ``build_v1_store``: a version-1 store (the migration's input) with the D4 domains and sources.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import numpy as np

from contextplane.store.migrate import V1_SCHEMA_SQL

VOCABULARY = 5_000
CLUSTERS = 64


def _words(rng: np.random.Generator) -> np.ndarray:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 10, VOCABULARY)
    return np.array(["".join(rng.choice(letters, n)) for n in lengths])


def _zipf_weights() -> np.ndarray:
    ranks = np.arange(1, VOCABULARY + 1)
    weights = 1.0 / ranks**1.1
    return weights / weights.sum()


def text_corpus(rows: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    words = _words(rng)
    weights = _zipf_weights()
    lengths = rng.integers(20, 41, rows)
    picks = rng.choice(VOCABULARY, size=int(lengths.sum()), p=weights)
    out, at = [], 0
    for n in lengths:
        out.append(" ".join(words[picks[at : at + n]]))
        at += n
    return out


def text_queries(count: int, seed: int = 2) -> list[str]:
    """2-3 word queries from ranks 20-2000: neither stop-word-like nor absent."""
    rng = np.random.default_rng(1)
    words = _words(rng)  # same vocabulary as the corpus (same seed)
    qrng = np.random.default_rng(seed)
    return [" ".join(words[qrng.integers(20, 2000, qrng.integers(2, 4))]) for _ in range(count)]


def clustered_vectors(
    rows: int, queries: int, dims: int = 384, seed: int = 3, clusters: int = CLUSTERS, spread: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian mixture (see module docstring). ``spread`` scales the centres: below 1 the clusters
    overlap more, which is harder for a partitioned index."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dims)).astype(np.float32) * spread
    scales = rng.uniform(0.05, 1.0, size=(clusters, dims)).astype(np.float32)

    def draw(n: int) -> np.ndarray:
        labels = rng.integers(0, clusters, n)
        points = centres[labels] + rng.normal(size=(n, dims)).astype(np.float32) * scales[labels]
        return points / np.linalg.norm(points, axis=1, keepdims=True)

    return draw(rows), draw(queries)


def gaussian_vectors(
    rows: int, queries: int, dims: int = 384, seed: int = 4
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)

    def draw(n: int) -> np.ndarray:
        points = rng.normal(size=(n, dims)).astype(np.float32)
        return points / np.linalg.norm(points, axis=1, keepdims=True)

    return draw(rows), draw(queries)


V1_DOMAINS = [
    "hot",
    "preferences",
    "general",
    "general",
    "finding",
    "fact",
    "conversation",
    "loop-lessons",
    "notes",
]
V1_SOURCES = [
    "operator",
    "manual",
    "extracted",
    "harvest",
    "conversation",
    "chat",
    "ingest",
    "",
    "background_report",
]


def build_v1_store(path: Path, rows: int, seed: int = 5) -> None:
    """A version-1 store with ``rows`` rows, its FTS index and its every-update FTS trigger."""
    rng = np.random.default_rng(seed)
    domains = rng.integers(0, len(V1_DOMAINS), rows)
    sources = rng.integers(0, len(V1_SOURCES), rows)
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(V1_SCHEMA_SQL)
    stamp = "2025-01-01T00:00:00.000000Z"
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO chunks(content, domain, source_type, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
        (
            (f"legacy memory {i} about topic {i % 997}", V1_DOMAINS[d], V1_SOURCES[s], stamp, stamp)
            for i, d, s in zip(range(rows), domains.tolist(), sources.tolist(), strict=True)
        ),
    )
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
