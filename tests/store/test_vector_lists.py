"""The IVF lists held in memory (``store/vector_lists.py``): the same neighbours as the SQL form,
and never a stale list after a write, a deletion or a retrain."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from contextplane.config import ConfigError, structure
from contextplane.store import legs, vector_lists, vector_matrix
from contextplane.store.sqlite import SQLiteKnowledgeStore


class GaussEmbedder:
    """A random unit-free vector per text, seeded by the text: no two rows tie, so the numpy and
    SQL forms (float32 dot products against L2 distances) must give one order, not one up to
    swaps of equal similarities."""

    dimensions = 32
    name = "test-gauss"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            rng = random.Random(hashlib.blake2b(text.encode(), digest_size=8).digest())
            out.append([rng.gauss(0.0, 1.0) for _ in range(self.dimensions)])
        return out


WORDS = [f"w{i}" for i in range(400)]
QUERIES = [" ".join(random.Random(q).sample(WORDS, 5)) for q in range(12)]


@pytest.fixture
def small_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store of 2,000 rows searched through the index form (not the whole-matrix or scan
    forms, which take every store this small)."""
    monkeypatch.setattr(vector_matrix, "MATRIX_MAX", 0)
    monkeypatch.setattr(legs, "EXACT_VECTOR_MAX", 50)


@pytest.fixture
def path(tmp_path: Path, small_bounds: None) -> Path:
    rng = random.Random(3)
    file = tmp_path / "m.sqlite3"
    with SQLiteKnowledgeStore(file, embedder=GaussEmbedder()) as store:
        store.add_chunks(
            {"content": " ".join(rng.sample(WORDS, 6)), "namespace": "project:a" if i % 5 else "project:b"}
            for i in range(2000)
        )
        store.train_vector_index()
    return file


def _open(path: Path, memory_mb: int) -> SQLiteKnowledgeStore:
    return SQLiteKnowledgeStore(path, embedder=GaussEmbedder(), vector_memory_mb=memory_mb)


def _ranked(store: SQLiteKnowledgeStore, query: str) -> list[tuple[str, float]]:
    return [(h.chunk.id, round(h.relevance, 5)) for h in store.search(query, 15, namespaces=["project:a"])]


@pytest.fixture
def forms(path: Path) -> Iterator[tuple[SQLiteKnowledgeStore, SQLiteKnowledgeStore]]:
    held, in_sql = _open(path, 256), _open(path, 0)
    try:
        yield held, in_sql
    finally:
        held.close()
        in_sql.close()


def _lists_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the lists read from the file (a list held and still current is not read)."""
    reads: list[int] = []
    real = vector_lists._List.__init__

    def counting(self: vector_lists._List, *args: object) -> None:
        reads.append(1)
        real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(vector_lists._List, "__init__", counting)
    return reads


def test_held_lists_rank_the_same_neighbours_as_sql(
    forms: tuple[SQLiteKnowledgeStore, SQLiteKnowledgeStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    held, in_sql = forms
    reads = _lists_read(monkeypatch)
    for query in QUERIES:
        assert _ranked(held, query) == _ranked(in_sql, query)
    assert reads, "the held store never read a list: the test did not exercise the numpy form"
    lists, unassigned = held.conn.execute(
        "SELECT count(DISTINCT key >> 40), count(*) FILTER (WHERE key >> 40 = 0) FROM chunks_vec"
    ).fetchone()
    # every list read once, in one pass on the first search; list 0 (vectors written before any
    # training) is probed by every search, so an empty one is read and held too
    assert len(reads) == lists + (1 if unassigned == 0 else 0)
    first = len(reads)
    for query in QUERIES:  # nothing written: every list is served from memory
        _ranked(held, query)
    assert len(reads) == first


def test_a_write_is_found_at_once_and_only_its_list_is_read_again(
    forms: tuple[SQLiteKnowledgeStore, SQLiteKnowledgeStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    held, in_sql = forms
    query = QUERIES[0]
    _ranked(held, query)
    reads = _lists_read(monkeypatch)
    new = held.add_chunk(query, namespace="project:a")  # its vector is the query's own
    after = _ranked(held, query)
    assert after[0][0] == new
    assert after == _ranked(in_sql, query)
    assert 1 <= len(reads) <= 2  # the list the row went to (and list 0 if it went there)


def test_a_deleted_row_leaves_the_held_list(
    forms: tuple[SQLiteKnowledgeStore, SQLiteKnowledgeStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    held, in_sql = forms
    query = "zz1 zz2 zz3"  # no row holds these words: the ranking is the vector leg's alone
    top = _ranked(held, query)[0][0]
    reads = _lists_read(monkeypatch)
    held.invalidate_chunk(top, reason="wrong")
    assert held.purge(ids=[top]) == 1  # the row and its vector are deleted
    after = _ranked(held, query)
    assert top not in [i for i, _ in after]
    assert after == _ranked(in_sql, query)
    assert len(reads) == 1  # the list it left was read again (the other probed lists were not)


def test_a_retrain_replaces_every_held_list(
    forms: tuple[SQLiteKnowledgeStore, SQLiteKnowledgeStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    held, in_sql = forms
    query = "zz1 zz2 zz3"
    _ranked(held, query)
    generation = held._lists._generation
    held.train_vector_index(seed=7)  # other centroids, on as many vectors (the same trained-on count)
    reads = _lists_read(monkeypatch)
    for q in [query, *QUERIES]:
        assert _ranked(held, q) == _ranked(in_sql, q)
    assert held._lists._generation != generation
    assert len(reads) >= 9  # list 0 and the probed lists, all read afresh


def test_the_bound_decides_and_bad_values_are_refused(path: Path) -> None:
    with _open(path, 0) as store:
        assert not store._lists.holds(10, 32)
    assert vector_lists.HeldLists(1).holds(1000, 32)
    assert not vector_lists.HeldLists(1).holds(10_000, 32)  # 1.2 MB of vectors past a 1 MB bound
    with pytest.raises(ValueError, match="vector_memory_mb must be 0 or more, got -1"):
        vector_lists.HeldLists(-1)
    with pytest.raises(ConfigError, match="vector_memory_mb"):
        structure({"store": {"vector_memory_mb": -5}})
    assert structure({"store": {"vector_memory_mb": 0}}).store.vector_memory_mb == 0


def test_admitted_in_order_is_the_best_n_the_filter_admits(path: Path) -> None:
    """The one-statement filter (SQL stops at the n-th admitted candidate) against filtering
    every candidate: the same rows, best first, for a scope that keeps one in five."""
    import numpy as np

    with _open(path, 256) as store:
        conn = store.conn
        ids = np.array([int(r[0]) for r in conn.execute("SELECT id FROM chunks ORDER BY id")], dtype=np.int64)
        sims = np.random.default_rng(2).standard_normal(len(ids)).astype(np.float32)
        where, params = "c.namespace = :ns", {"ns": "project:b"}
        allowed = {int(r[0]) for r in conn.execute("SELECT id FROM chunks WHERE namespace = 'project:b'")}
        best = [int(i) for i in ids[np.argsort(-sims, kind="stable")] if int(i) in allowed]
        for n in (1, 7, 60, len(allowed) + 5):
            got = vector_matrix.admitted_in_order(conn, ids, sims, where, params, n)
            assert [k for k, _ in got] == best[:n]
        assert vector_matrix.admitted_in_order(conn, ids, sims, where, params, 0) == []


def test_a_damaged_vector_is_refused_by_name_and_loses_nothing(path: Path) -> None:
    """A vector blob of the wrong length (a damaged file) is a clear StoreError naming what to
    run, not a numpy reshape error or a wrong matrix; the memories stay readable."""
    from contextplane.errors import StoreError

    with _open(path, 256) as store:
        key = store.conn.execute("SELECT key FROM chunks_vec WHERE key >> 40 != 0 LIMIT 1").fetchone()[0]
        with store.conn:
            store.conn.execute("UPDATE chunks_vec SET embedding = zeroblob(12) WHERE key = ?", (key,))
        with pytest.raises(StoreError, match=r"12 bytes \(key \d+\).*memory check.*memory reindex"):
            store.search(QUERIES[0], 5, namespaces=["project:a"])
        assert store.count_chunks() == 2000
        assert store.get(str(key & ((1 << 40) - 1))) is not None
