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

Split by job: ``ivf`` (the tables, setup, writes and the vector leg: every write and search),
``chance`` (the chance level a similarity must clear) and ``training`` (k-means and reassignment,
rare and slow). This package is the import path the code had as one module and re-exports every
name it had; a name set here (``monkeypatch.setattr(vector_index, "_numpy", ...)``) is set too in
each module that reads it (``contextplane.shims``). The store reads ``vector_index.X`` as before:
a module attribute, no added call on the search path.
"""

from __future__ import annotations

from contextplane.shims import patch_through
from contextplane.store.vector_index import chance, ivf, training
from contextplane.store.vector_index.chance import (
    _CALIBRATION_SOURCE,
    _FIRST_ROWS_SOURCE,
    _MAD_SIGMA,
    _SAMPLE_KEY_SQL,
    _SAMPLED_SQL,
    CALIBRATION_SAMPLE,
    MIN_CALIBRATION,
    ChanceLevel,
    _ceiling,
    _keep_calibration,
    chance_level,
    chance_similarity,
    vector_relevance,
)
from contextplane.store.vector_index.ivf import (
    _INSERT_VECTOR_SQL,
    _LIST_SPAN,
    _NEAREST_LIST_SQL,
    _VECTOR_TABLES_SQL,
    LIST_SHIFT,
    VectorSearchUnavailableWarning,
    _numpy,
    _positive_dims,
    add_vectors,
    as_float32,
    attach,
    bump_generation,
    clear,
    load_sqlite_vec,
    missing_count,
    neighbours,
    pack,
    probes,
    record_space,
    require_space,
    start_rebuild,
    vector_leg,
)
from contextplane.store.vector_index.training import (
    INLINE_TRAINING_MAX_VECTORS,
    KMeansStep,
    _assign_numpy,
    _kmeans_numpy,
    _load_training_centroids,
    _training_due,
    inline_training_due,
    kmeans_step,
    train,
    training_due,
    training_numpy,
)

patch_through(__name__, (ivf, chance, training))

__all__ = [
    "CALIBRATION_SAMPLE",
    "INLINE_TRAINING_MAX_VECTORS",
    "LIST_SHIFT",
    "MIN_CALIBRATION",
    "_CALIBRATION_SOURCE",
    "_FIRST_ROWS_SOURCE",
    "_INSERT_VECTOR_SQL",
    "_LIST_SPAN",
    "_MAD_SIGMA",
    "_NEAREST_LIST_SQL",
    "_SAMPLED_SQL",
    "_SAMPLE_KEY_SQL",
    "_VECTOR_TABLES_SQL",
    "ChanceLevel",
    "KMeansStep",
    "VectorSearchUnavailableWarning",
    "_assign_numpy",
    "_ceiling",
    "_keep_calibration",
    "_kmeans_numpy",
    "_load_training_centroids",
    "_numpy",
    "_positive_dims",
    "_training_due",
    "add_vectors",
    "as_float32",
    "attach",
    "bump_generation",
    "chance",
    "chance_level",
    "chance_similarity",
    "clear",
    "inline_training_due",
    "ivf",
    "kmeans_step",
    "load_sqlite_vec",
    "missing_count",
    "neighbours",
    "pack",
    "probes",
    "record_space",
    "require_space",
    "start_rebuild",
    "train",
    "training",
    "training_due",
    "training_numpy",
    "vector_leg",
    "vector_relevance",
]
