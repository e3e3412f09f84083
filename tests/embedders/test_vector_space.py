"""The store knows its vector space: changing the configured embedder (another model, another
width) is refused with an error naming both and the fix, on the embedded store and on
PostgreSQL, and ``contextplane memory reindex --rebuild`` fixes it; an interrupted rebuild
leaves one space, never two, and ``memory reindex`` finishes it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from contextplane.cli import main
from contextplane.errors import EmbedderError, VectorSpaceError
from contextplane.store import vector_upkeep
from contextplane.store.sqlite import SQLiteKnowledgeStore
from tests.store.helpers import HashEmbedder

from .server import EmbeddingServer

ROWS = ["the deploy window is on Tuesday", "coffee machine in the kitchen", "nightly database backup"]


def run(*args: str, ok: bool = True) -> Any:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def http_config(path: Path, server: EmbeddingServer, store: str, model: str, dims: int) -> str:
    path.write_text(
        store
        + f'[embedder]\nprovider = "openai"\nbase_url = "{server.base_url}"\nmodel = "{model}"\n'
        + f"dimensions = {dims}\nmax_retries = 0\n"
    )
    return str(path)


def last_line(output: str) -> str:
    """The error line, without the configuration file open_backend names for a server backend."""
    return re.sub(r" \(in \S+contextplane\.toml\)$", "", output.rstrip("\n").rsplit("\n", 1)[-1])


def switching(tmp_path: Path, server: EmbeddingServer, store: str, where: str) -> None:
    """``where`` is how the error line starts: the store's name, after what the backend adds."""
    cfg = tmp_path / "contextplane.toml"
    c = http_config(cfg, server, store, "model-a", 16)
    for row in ROWS:
        run("memory", "add", row, "--config", c)

    # another model, the same width: comparable numbers, meaningless comparisons
    c = http_config(cfg, server, store, "model-b", 16)
    res = run("memory", "search", "deploy", "--config", c, ok=False)
    assert res.exit_code == 2
    assert last_line(res.output) == (
        f"error: {where}: stored vectors are from embedder 'openai:model-a' (16 dimensions), but the "
        "configured embedder is 'openai:model-b' (16 dimensions); vectors of two models cannot be compared "
        "even at the same width: run `contextplane memory reindex --rebuild` to embed every memory again "
        "with the configured one, or configure 'openai:model-a' again"
    )
    assert run("memory", "add", "refused too", "--config", c, ok=False).exit_code == 2
    assert run("memory", "reindex", "--rebuild", "--config", c).output == (
        "embedded 3 memories with openai:model-b (16 dimensions); 0 without a vector\n"
    )
    assert "the deploy window is on Tuesday" in run("memory", "search", "deploy", "--config", c).output
    assert server.behaviour.seen[-1].model == "model-b"

    # another width
    c = http_config(cfg, server, store, "model-b", 24)
    res = run("memory", "search", "deploy", "--config", c, ok=False)
    assert last_line(res.output) == (
        f"error: {where}: stored vectors have 16 dimensions from embedder 'openai:model-b', but the configured "
        "embedder 'openai:model-b' produces 24; vectors of two embedders cannot be compared: run "
        "`contextplane memory reindex --rebuild` to embed every memory again with the configured one, or "
        "configure 'openai:model-b' again"
    )
    out = run("memory", "reindex", "--rebuild", "--config", c, "--json").output
    assert (
        '"embedded": 3' in out and '"vector_space": {"embedder": "openai:model-b", "dimensions": 24}' in out
    )
    assert "the deploy window is on Tuesday" in run("memory", "search", "deploy", "--config", c).output
    assert server.behaviour.seen[-1].dimensions == 24
    # the old configuration is now the one refused
    c = http_config(cfg, server, store, "model-a", 16)
    assert "vectors have 24 dimensions" in run("memory", "search", "deploy", "--config", c, ok=False).output


def test_switching_embedders_on_the_embedded_store(tmp_path: Path, server: EmbeddingServer) -> None:
    switching(tmp_path, server, '[store]\npath = "agent.sqlite3"\n', str(tmp_path / "agent.sqlite3"))


def test_switching_embedders_on_postgres(
    tmp_path: Path, server: EmbeddingServer, pg_url: str, pg_schema: str
) -> None:
    from contextplane_postgres.url import redact

    store = f'[store]\nbackend = "postgres"\nurl = "{pg_url}"\n[plugin.postgres]\nschema = "{pg_schema}"\n'
    # a backend the hook could not open is reported by open_backend, with the hook's error
    where = (
        "store.backend = 'postgres', but no plugin offered that backend: VectorSpaceError: "
        f"{redact(pg_url)} (schema {pg_schema})"
    )
    switching(tmp_path, server, store, where)


class Flaky(HashEmbedder):
    """Fails on the n-th call (an embedder that dies mid-rebuild)."""

    def __init__(self, fail_on: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.fail_on = fail_on

    def embed(self, texts: Any) -> Any:
        if self.calls + 1 == self.fail_on:
            self.calls += 1
            raise ConnectionError("the embedding server went away")
        return super().embed(texts)


def test_an_interrupted_rebuild_leaves_one_space_and_reindex_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.sqlite3"
    old = HashEmbedder(dimensions=16, name="old")
    with SQLiteKnowledgeStore(path, embedder=old) as store:
        for row in ROWS:
            store.add_chunk(row)
    monkeypatch.setattr(vector_upkeep, "EMBED_BATCH", 1)
    # fails on its first call (the probe): the old vectors stay, untouched
    with SQLiteKnowledgeStore(path) as store:
        with pytest.raises(EmbedderError, match="went away"):
            store.rebuild_vectors(Flaky(1, dimensions=8, name="new"))
        assert store.vector_space() == ("old", 16) and store.vectorless_count() == 0
    # fails mid-way: the new space only, some rows without a vector
    with SQLiteKnowledgeStore(path) as store:
        with pytest.raises(EmbedderError, match="went away"):
            store.rebuild_vectors(Flaky(3, dimensions=8, name="new"))
        assert store.vector_space() == ("new", 8)
        assert store.vectorless_count() == 2
    with pytest.raises(VectorSpaceError, match=r"stored vectors have 8 dimensions from embedder 'new'"):
        SQLiteKnowledgeStore(path, embedder=old)
    with SQLiteKnowledgeStore(path, embedder=HashEmbedder(dimensions=8, name="new")) as store:
        assert store.reindex_vectors() == 2
        assert store.vectorless_count() == 0
        hits = store.search("coffee machine", 3)
        assert hits[0].chunk.content == "coffee machine in the kitchen"


def test_rows_written_without_an_embedder_are_counted_and_reindexed(
    tmp_path: Path, server: EmbeddingServer
) -> None:
    cfg = tmp_path / "contextplane.toml"
    cfg.write_text('[store]\npath = "agent.sqlite3"\n')
    for row in ROWS[:2]:
        run("memory", "add", row, "--config", str(cfg))
    c = http_config(cfg, server, '[store]\npath = "agent.sqlite3"\n', "model-a", 16)
    with SQLiteKnowledgeStore(tmp_path / "agent.sqlite3") as store:
        assert store.vectorless_count() == 2
    assert run("memory", "reindex", "--config", c).output == (
        "embedded 2 memories with openai:model-a (16 dimensions); 0 without a vector\n"
    )


def test_store_status_reports_the_space_and_the_rows_without_a_vector(pg_url: str, pg_schema: str) -> None:
    import json

    from contextplane_postgres import PostgresBackend

    backend = PostgresBackend(pg_url, schema=pg_schema)
    backend.memories.add_chunk("written before any embedder")
    backend.close()
    status = json.loads(run("store", "status", pg_url, "--schema", pg_schema).output)
    assert (
        status["vector_space"] == {"embedder": None, "dimensions": None}
        and status["rows_without_vector"] == 1
    )
    backend = PostgresBackend(pg_url, schema=pg_schema, embedder=HashEmbedder(dimensions=8, name="kit"))
    backend.memories.add_chunk("written with one")
    backend.close()
    status = json.loads(run("store", "status", pg_url, "--schema", pg_schema).output)
    assert (
        status["vector_space"] == {"embedder": "kit", "dimensions": 8} and status["rows_without_vector"] == 1
    )


def test_an_interrupted_rebuild_on_postgres_leaves_one_space(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextplane_postgres import PostgresBackend
    from contextplane_postgres import store as pg_store

    def open_with(embedder: Any) -> Any:
        return PostgresBackend(pg_url, schema=pg_schema, embedder=embedder, pool_max_size=2)

    backend = open_with(HashEmbedder(dimensions=16, name="old"))
    for row in ROWS:
        backend.memories.add_chunk(row)
    backend.close()
    monkeypatch.setattr(pg_store, "EMBED_BATCH", 1)
    backend = open_with(None)
    try:
        with pytest.raises(EmbedderError, match="went away"):
            backend.memories.rebuild_vectors(Flaky(1, dimensions=8, name="new"))
        assert backend.memories.vector_space() == ("old", 16) and backend.memories.vectorless_count() == 0
        with pytest.raises(EmbedderError, match="went away"):
            backend.memories.rebuild_vectors(Flaky(3, dimensions=8, name="new"))
        assert backend.memories.vector_space() == ("new", 8) and backend.memories.vectorless_count() == 2
    finally:
        backend.close()
    with pytest.raises(VectorSpaceError, match=r"stored vectors have 8 dimensions from embedder 'new'"):
        open_with(HashEmbedder(dimensions=16, name="old"))
    backend = open_with(HashEmbedder(dimensions=8, name="new"))
    try:
        assert backend.memories.reindex_vectors() == 2 and backend.memories.vectorless_count() == 0
        assert (
            backend.memories.search("coffee machine", 3)[0].chunk.content == "coffee machine in the kitchen"
        )
    finally:
        backend.close()


def test_a_process_still_on_the_old_embedder_cannot_write_into_the_rebuilt_space(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    from contextplane_postgres import PostgresBackend

    old, new = HashEmbedder(dimensions=16, name="old"), HashEmbedder(dimensions=16, name="new")
    sqlite_agent = SQLiteKnowledgeStore(tmp_path / "m.sqlite3", embedder=old)
    pg_agent = PostgresBackend(pg_url, schema=pg_schema, embedder=old, pool_max_size=2)
    try:
        for agent in (sqlite_agent, pg_agent.memories):
            agent.add_chunk("written before the rebuild")
        with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as operator:
            operator.rebuild_vectors(new)
        operator_pg = PostgresBackend(pg_url, schema=pg_schema, pool_max_size=2)
        try:
            operator_pg.memories.rebuild_vectors(new)
        finally:
            operator_pg.close()
        for agent in (sqlite_agent, pg_agent.memories):
            with pytest.raises(
                VectorSpaceError,
                match=r"stored vectors are from embedder 'new'.*configured embedder is 'old'",
            ):
                agent.add_chunk("written by a process that missed the rebuild")
            assert [c.content for c in agent.list_chunks()] == ["written before the rebuild"]
    finally:
        sqlite_agent.close()
        pg_agent.close()


def test_memory_status_reports_the_space_the_embedder_and_the_rows_without_a_vector(
    tmp_path: Path, server: EmbeddingServer
) -> None:
    import json

    cfg = tmp_path / "contextplane.toml"
    store = '[store]\npath = "agent.sqlite3"\n'
    cfg.write_text(store)
    run("memory", "add", "written before any embedder", "--config", str(cfg))
    assert run("memory", "status", "--config", str(cfg)).output == (
        f"store: {tmp_path / 'agent.sqlite3'}\nvector space: none yet\n"
        "embedder: none configured; full-text search only: no embedder is configured (set [embedder] provider "
        "and model for semantic retrieval; see README, 'Semantic retrieval')\nrows without a vector: 1\n"
    )
    c = http_config(cfg, server, store, "model-a", 16)
    run("memory", "add", "written with one", "--config", c)
    out = run("memory", "status", "--config", c).output
    assert (
        "vector space: openai:model-a (16 dimensions)\nembedder: openai:model-a (16 dimensions), matches\n"
        in out
    )
    assert out.endswith("rows without a vector: 1\n")
    c = http_config(cfg, server, store, "model-b", 16)
    status = json.loads(run("memory", "status", "--config", c, "--json").output)  # a mismatch is reported
    assert status["matches"] is False and status["embedder"] == {
        "embedder": "openai:model-b",
        "dimensions": 16,
    }
    assert (
        "differs, run `contextplane memory reindex --rebuild`"
        in run("memory", "status", "--config", c).output
    )
