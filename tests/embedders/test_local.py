"""The local sentence-transformers provider's real loading code, against a tiny model the tests
build and save (tiny_model.py; no download), configured through ``[embedder]``, end to end:
``memory add``, ``memory search``, ``preview``, a composed turn, and the PostgreSQL backend.

These need sentence-transformers and torch (the ``test`` extra brings both): a missing install
fails here, it does not skip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from contextplane import PluginHost, open_backend
from contextplane.cli import main
from contextplane.config import load_config
from contextplane.errors import ConfigError
from contextplane.projection import compose_projected_context
from contextplane_embedders.local import SentenceTransformerEmbedder

from .tiny_model import DIMENSIONS

ROWS = ["the deploy window is on Tuesday", "coffee machine in the kitchen", "nightly database backup at cron"]


def run(*args: str, ok: bool = True) -> Any:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def local_config(where: Path, model: Path, store: str = '[store]\npath = "agent.sqlite3"\n') -> str:
    path = where / "contextplane.toml"
    path.write_text(
        store
        + "[context]\ncontext_window = 200000\nmin_relevance = 0.0\n"
        + f'[embedder]\nprovider = "sentence-transformers"\nmodel = "{model}"\nbatch_size = 2\n'
    )
    return str(path)


def test_the_provider_loads_a_saved_model_from_its_directory(tiny_model: Path) -> None:
    embedder = SentenceTransformerEmbedder(str(tiny_model), batch_size=2)
    assert embedder.name == f"sentence-transformers:{tiny_model}" and embedder.dimensions == DIMENSIONS
    matrix = embedder.embed(ROWS)
    assert matrix.shape == (3, DIMENSIONS) and str(matrix.dtype) == "float32"
    assert abs(float((matrix[0] ** 2).sum()) - 1.0) < 1e-5  # unit length: cosine is a dot product
    assert (embedder.embed(ROWS[:1])[0] == matrix[0]).all()  # deterministic, batch-independent


def test_a_wrong_width_or_a_missing_model_is_a_config_error(tiny_model: Path, tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=rf"embedder.dimensions = 64, but the model .* produces {DIMENSIONS}-dimension"
    ):
        SentenceTransformerEmbedder(str(tiny_model), dimensions=64)
    with pytest.raises(
        ConfigError, match=r"embedder.model = .*could not be loaded .*give a directory holding a saved model"
    ):
        SentenceTransformerEmbedder(str(tmp_path / "no-such-model"))


def test_memory_add_search_preview_and_a_turn_through_the_configuration(
    tiny_model: Path, tmp_path: Path
) -> None:
    cfg = local_config(tmp_path, tiny_model)
    for row in ROWS:
        run("memory", "add", row, "--config", cfg)
    found = run("memory", "search", "coffee machine", "--config", cfg).output
    assert "coffee machine in the kitchen" in found and "full-text search only" not in found
    preview = run("preview", "where is the coffee machine", "--config", cfg).output
    assert "coffee machine in the kitchen" in preview and "full-text search only" not in preview

    host = PluginHost.from_entry_points(load_config(cfg))
    backend = open_backend(host)
    try:
        store = backend.memories
        assert store.vector_space() == (f"sentence-transformers:{tiny_model}", DIMENSIONS)
        assert store.vectorless_count() == 0
        ids = {c.content: c.id for c in store.list_chunks()}
        # the vector leg works: a row's own text is its nearest neighbour
        assert store.vector_neighbours(ROWS[1], 1) == [ids[ROWS[1]]]
        p = compose_projected_context("coffee machine", backend, None, {}, host=host, session_id="t")
        assert ids[ROWS[1]] in p.section("retrieved").item_ids and "search" not in p.section("retrieved").meta
    finally:
        backend.close()


def test_the_postgres_backend_embeds_with_the_configured_local_model(
    tiny_model: Path, tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    cfg = local_config(
        tmp_path,
        tiny_model,
        store=f'[store]\nbackend = "postgres"\nurl = "{pg_url}"\n[plugin.postgres]\nschema = "{pg_schema}"\n',
    )
    for row in ROWS:
        run("memory", "add", row, "--config", cfg)
    assert (
        "coffee machine in the kitchen" in run("memory", "search", "coffee machine", "--config", cfg).output
    )
    assert "coffee machine in the kitchen" in run("preview", "coffee machine", "--config", cfg).output
    host = PluginHost.from_entry_points(load_config(cfg))
    backend = open_backend(host)
    try:
        store = backend.memories
        assert type(store).__name__ == "PostgresKnowledgeStore"
        assert store.vector_space() == (f"sentence-transformers:{tiny_model}", DIMENSIONS)
        assert store.vectorless_count() == 0
        ids = {c.content: c.id for c in store.list_chunks()}
        assert store.vector_neighbours(ROWS[2], 1, exact=True) == [ids[ROWS[2]]]
        p = compose_projected_context("coffee machine", backend, None, {}, host=host, session_id="t")
        assert ids[ROWS[1]] in p.section("retrieved").item_ids
    finally:
        backend.close()
    assert not (tmp_path / "agent.sqlite3").exists()
