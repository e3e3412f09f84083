"""Ingest that stays fast as the store grows (issue 11): bulk list assignment, embedders that
return arrays, and retraining off the write path."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from contextplane.plugins import PluginHost
from contextplane.store import SQLiteKnowledgeStore, cli, vector_index
from contextplane.store import migrate as m
from tests.store.helpers import HashEmbedder


def misplaced(store: SQLiteKnowledgeStore) -> int:
    """Vectors not in their nearest list (by sqlite-vec's own distance)."""
    return int(
        store.conn.execute(
            "SELECT count(*) FROM chunks_vec AS cv WHERE (cv.key >> 40) != (SELECT list FROM _vec_centroids "
            "ORDER BY vec_distance_l2(centroid, cv.embedding), list LIMIT 1)"
        ).fetchone()[0]
    )


@pytest.mark.parametrize("with_numpy", [True, False], ids=["numpy", "sql"])
def test_every_vector_lands_in_its_nearest_list(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, with_numpy: bool
) -> None:
    if not with_numpy:
        monkeypatch.setattr(vector_index, "_numpy", lambda: None)
    with SQLiteKnowledgeStore(db_path, embedder=HashEmbedder(), vector_index_min_rows=64) as store:
        store.add_chunks({"content": f"note {i} on topic {i % 13} and {i % 7}"} for i in range(64))
        assert m.meta_get(store.conn, "vector_index_trained_on") == "64"
        for start in range(64, 120, 8):  # written after training, in batches
            store.add_chunks({"content": f"note {i} on topic {i % 13} and {i % 7}"} for i in range(start, start + 8))
        assert store.conn.execute("SELECT count(*) FROM chunks_vec WHERE key >> 40 = 0").fetchone() == (0,)
        assert misplaced(store) == 0
        assert store.vector_neighbours("note 99 on topic 8 and 1", 1) == ["100"]


class ArrayEmbedder(HashEmbedder):
    """The same vectors as a 2-D numpy array."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:  # type: ignore[override]
        return np.array(super().embed(texts), dtype=np.float64)


def test_an_embedder_may_return_a_two_dimensional_array(tmp_path: Path) -> None:
    texts = [f"row {i} about deploys" for i in range(20)]
    blobs = []
    for name, embedder in (("lists", HashEmbedder()), ("array", ArrayEmbedder())):
        with SQLiteKnowledgeStore(tmp_path / f"{name}.sqlite3", embedder=embedder) as store:
            store.add_chunks({"content": t} for t in texts)
            blobs.append(store.conn.execute("SELECT embedding FROM chunks_vec ORDER BY chunk_id").fetchall())
    assert blobs[0] == blobs[1]


def test_a_large_index_is_retrained_by_reindex_not_inside_a_write(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(vector_index, "INLINE_TRAINING_MAX_VECTORS", 100)
    with SQLiteKnowledgeStore(db_path, embedder=HashEmbedder(), vector_index_min_rows=40) as store:
        store.add_chunks({"content": f"note {i} on topic {i % 11}"} for i in range(40))
        store.add_chunks({"content": f"note {i} on topic {i % 11}"} for i in range(40, 80))
        assert m.meta_get(store.conn, "vector_index_trained_on") == "80"  # small: retrained inline
        with caplog.at_level(logging.INFO, "contextplane.store"):
            store.add_chunks({"content": f"note {i} on topic {i % 11}"} for i in range(80, 170))
        assert m.meta_get(store.conn, "vector_index_trained_on") == "80"  # due, but not inside add
        assert "has doubled to 170 vectors since it was trained; run `contextplane memory reindex`" in caplog.text
        assert misplaced(store) == 0  # new vectors joined their nearest trained list meanwhile

    @click.group()
    def root() -> None:
        pass

    cli.register(root)
    # the command opens the store a runtime would, with the plugins' embedder
    monkeypatch.setattr(PluginHost, "embedder", lambda self: HashEmbedder())
    result = CliRunner().invoke(root, ["memory", "reindex", "--db", str(db_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "embedded": 0,
        "lists": 13,
        "without_vector": 0,
        "vector_space": {"embedder": "test-hash-bow", "dimensions": 64},
    }
    with SQLiteKnowledgeStore(db_path, embedder=HashEmbedder()) as store:
        assert m.meta_get(store.conn, "vector_index_trained_on") == "170"


def test_reindex_without_an_embedder_says_what_to_do(db_path: Path) -> None:
    SQLiteKnowledgeStore(db_path).close()

    @click.group()
    def root() -> None:
        pass

    cli.register(root)
    result = CliRunner().invoke(root, ["memory", "reindex", "--db", str(db_path)])
    assert result.exit_code == 2  # the CLI's usage and store errors: one `error: ...` line, exit 2
    assert result.output == (
        f"error: {db_path}: no embedder is configured ([embedder] provider in the configuration, or a "
        "plugin's `embedder` hook), so there are no vectors to build\n"
    )
