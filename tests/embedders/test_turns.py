"""The HTTP embedder through ``[embedder]`` configuration, end to end: hybrid search from the
CLI, the per-turn full-text fallback and its record when the embedder fails (refuses, hangs,
answers with the wrong width), strict mode, a write refused whole, and the API key absent from
logs, snapshots, the trajectory and the console."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from contextplane import PluginHost, open_backend
from contextplane.aprojection import acompose_projected_context
from contextplane.cli import main
from contextplane.config import load_config
from contextplane.errors import ConfigError, EmbedderError, SectionError
from contextplane.projection import compose_projected_context

from .server import EmbeddingServer

SECRET = "sk-test-3c2b1a-NEVER-IN-A-RECORD"


def write_config(where: Path, server: EmbeddingServer, **extra: Any) -> Path:
    lines = [
        "[store]",
        'path = "agent.sqlite3"',
        "[context]",
        "context_window = 200000",
        "min_relevance = 0.0",
        "[embedder]",
        'provider = "openai"',
        f'base_url = "{server.base_url}"',
        'model = "test-embed"',
        "dimensions = 16",
        'api_key_env = "TEST_EMBED_KEY"',
        "timeout_s = 0.5",
        "max_retries = 0",
    ]
    lines += [
        f"{k} = {v!r}".replace("'", '"') if isinstance(v, str) else f"{k} = {v}" for k, v in extra.items()
    ]
    path = where / "contextplane.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def deployment(
    tmp_path: Path, server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[PluginHost, Any]]:
    monkeypatch.setenv("TEST_EMBED_KEY", SECRET)
    config = load_config(write_config(tmp_path, server))
    host = PluginHost.from_entry_points(config)
    backend = open_backend(host)
    backend.memories.add_chunk("the deploy window is on Tuesday", source_type="operator")
    backend.memories.add_chunk("coffee machine in the kitchen", source_type="operator")
    try:
        yield host, backend
    finally:
        backend.close()


def run(*args: str, ok: bool = True) -> Any:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def test_the_configured_embedder_serves_every_backend_and_command(
    tmp_path: Path, server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_EMBED_KEY", SECRET)
    cfg = str(write_config(tmp_path, server))
    run("memory", "add", "the deploy window is on Tuesday", "--config", cfg)
    assert server.behaviour.seen[-1].batch == ["the deploy window is on Tuesday"]
    assert server.behaviour.seen[-1].authorization == f"Bearer {SECRET}"
    found = run("memory", "search", "deploy window", "--config", cfg).output
    assert "the deploy window is on Tuesday" in found and "full-text search only" not in found
    assert server.behaviour.seen[-1].batch == ["deploy window"]  # the query was embedded: hybrid
    preview = run("preview", "deploy window", "--config", cfg).output
    assert "the deploy window is on Tuesday" in preview and "full-text search only" not in preview
    assert SECRET not in found + preview


def test_the_environment_configures_the_embedder_too(
    tmp_path: Path, server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTPLANE_EMBEDDER__PROVIDER", "openai")
    monkeypatch.setenv("CONTEXTPLANE_EMBEDDER__BASE_URL", server.base_url)
    monkeypatch.setenv("CONTEXTPLANE_EMBEDDER__MODEL", "env-model")
    monkeypatch.setenv("CONTEXTPLANE_EMBEDDER__DIMENSIONS", "8")
    embedder = PluginHost.from_entry_points(load_config()).embedder()
    assert embedder.name == "openai:env-model" and embedder.dimensions == 8


def test_without_an_embedder_search_and_preview_say_full_text_once(tmp_path: Path) -> None:
    (tmp_path / "contextplane.toml").write_text('[store]\npath = "agent.sqlite3"\n')
    cfg = str(tmp_path / "contextplane.toml")
    run("memory", "add", "the deploy window is on Tuesday", "--config", cfg)
    found = run("memory", "search", "deploy", "--config", cfg).output
    assert found.count("full-text search only: no embedder is configured") == 1
    assert "the deploy window is on Tuesday" in found
    assert run("preview", "deploy", "--config", cfg).output.count("full-text search only") == 1


def test_an_unknown_provider_or_a_bad_key_is_an_error_not_full_text(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text('[embedder]\nprovider = "nope"\n')
    with pytest.raises(ConfigError, match=r"embedder.provider = 'nope', but no plugin offered that embedder"):
        PluginHost.from_entry_points(load_config(tmp_path / "c.toml")).embedder()
    (tmp_path / "c.toml").write_text(
        '[embedder]\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key_env = "UNSET_KEY_VAR"\n'
    )
    res = run("memory", "search", "x", "--config", str(tmp_path / "c.toml"), ok=False)
    assert res.exit_code == 2
    assert "embedder.api_key_env names UNSET_KEY_VAR, which is not set" in res.output
    with pytest.raises(
        ConfigError, match=r"unknown key embedder.modle: remove it .*did you mean embedder.model"
    ):
        (tmp_path / "d.toml").write_text('[embedder]\nmodle = "m"\n')
        load_config(tmp_path / "d.toml")


@pytest.mark.parametrize("failure", ["500", "wrong_dims", "hang"])
def test_a_failing_embedder_costs_the_turn_its_vectors_not_its_memories(
    deployment: tuple[PluginHost, Any],
    server: EmbeddingServer,
    failure: str,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    host, backend = deployment
    server.behaviour.default = failure
    caplog.set_level(logging.WARNING, logger="contextplane")
    turns = [
        compose_projected_context("deploy window", backend, None, {}, host=host, session_id="s", turn_index=i)
        for i in range(2)
    ]
    for p in turns:
        report = p.section("retrieved")
        assert report.error is None
        assert report.meta["search"] == "full_text"
        assert report.meta["fallback"].startswith("embedder failed, full text this turn: embedder ")
        assert p.injection is not None and p.injection.fallbacks == {"retrieved": report.meta["fallback"]}
        assert "the deploy window is on Tuesday" in p.text  # found by full text
    said = [r for r in caplog.records if "searched full text only" in r.getMessage()]
    assert len(said) == 1 and said[0].exc_info is not None  # logged once, with its traceback
    # the turn's trajectory entry (what snapshots reference) carries the fallback too
    backend.flush()
    logged = "".join(f.read_text() for f in (tmp_path / "trajectories").rglob("*.jsonl"))
    assert logged.count('"fallback":"embedder failed, full text this turn: embedder ') == 2


def test_the_async_turn_falls_back_the_same_way(
    deployment: tuple[PluginHost, Any], server: EmbeddingServer
) -> None:
    host, backend = deployment
    server.behaviour.default = "500"
    p = asyncio.run(acompose_projected_context("deploy window", backend, None, {}, host=host, session_id="a"))
    assert p.section("retrieved").meta["search"] == "full_text"
    assert p.injection is not None and "retrieved" in p.injection.fallbacks
    assert "the deploy window is on Tuesday" in p.text
    server.behaviour.default = "ok"
    p = asyncio.run(acompose_projected_context("deploy window", backend, None, {}, host=host, session_id="a"))
    assert (
        "search" not in p.section("retrieved").meta and p.injection is not None and not p.injection.fallbacks
    )
    assert server.behaviour.seen[-1].batch == ["deploy window"]  # embedded natively on the loop


def test_strict_mode_turns_the_fallback_into_an_error(
    tmp_path: Path, server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_EMBED_KEY", SECRET)
    config = load_config(write_config(tmp_path, server), overrides={"plugins": {"strict": True}})
    host = PluginHost.from_entry_points(config)
    backend = open_backend(host)
    try:
        backend.memories.add_chunk("the deploy window is on Tuesday", source_type="operator")
        server.behaviour.default = "500"
        with pytest.raises((EmbedderError, SectionError), match=r"HTTP 500"):
            compose_projected_context("deploy window", backend, None, {}, host=host, session_id="s")
    finally:
        backend.close()


def test_a_write_whose_embedding_fails_is_refused_whole(
    deployment: tuple[PluginHost, Any], server: EmbeddingServer
) -> None:
    _host, backend = deployment
    store = backend.memories
    before = [c.id for c in store.list_chunks()]
    server.behaviour.default = "500"
    with pytest.raises(EmbedderError, match=r"HTTP 500.*the write was refused and nothing was stored"):
        store.add_chunks([{"content": "first of two"}, {"content": "second of two"}])
    with pytest.raises(EmbedderError, match=r"nothing was stored"):
        store.supersede(before[0], "the deploy window moved to Wednesday")
    with pytest.raises(EmbedderError, match=r"nothing was stored"):
        asyncio.run(store.aadd_chunk("written on the loop"))
    assert [c.id for c in store.list_chunks()] == before
    assert all(c.is_deliverable() for c in store.list_chunks())
    assert store.vectorless_count() == 0


def test_the_key_never_reaches_a_record_a_log_or_the_console(
    deployment: tuple[PluginHost, Any],
    server: EmbeddingServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import httpx

    from contextplane_console import ConsoleServer, create_app

    host, backend = deployment
    caplog.set_level(logging.DEBUG)
    compose_projected_context("deploy window", backend, None, {}, host=host, session_id="k")
    server.behaviour.default = "echo_key"  # the failure's message would hold the key, unmasked
    failed = compose_projected_context(
        "deploy window", backend, None, {}, host=host, session_id="k", turn_index=1
    )
    assert "Bearer ***" in failed.section("retrieved").meta["fallback"]
    backend.flush()
    csrf = "test-csrf-token-0123456789"
    console = ConsoleServer(create_app(backend, host, csrf_token=csrf), "127.0.0.1", 0).start()
    try:
        with httpx.Client(base_url=console.url, timeout=30) as http:
            responses = [http.get(p) for p in ("/memory", "/sessions", "/api/snapshots", "/api/injections")]
            responses.append(
                http.post(
                    "/preview",
                    data={"query": "deploy window"},
                    headers={"X-CSRF-Token": csrf, "Origin": console.url},
                )
            )
    finally:
        console.stop()
    assert [r.status_code for r in responses] == [200] * 5
    assert "the deploy window is on Tuesday" in responses[0].text
    assert "the deploy window is on Tuesday" in responses[-1].text  # the preview fell back, found it
    assert all(SECRET not in r.text for r in responses)
    assert SECRET not in caplog.text
    for root, _dirs, files in os.walk(tmp_path):
        for name in files:
            data = (Path(root) / name).read_bytes()
            assert SECRET.encode() not in data, f"{name} holds the API key"


def test_a_backend_hook_gets_the_configured_embedder_made_once_and_only_when_it_asks() -> None:
    from contextplane import hookimpl
    from contextplane.plugins import plugin_host_with
    from tests.store.helpers import HashEmbedder

    made: list[Any] = []
    seen: list[Any] = []

    class Provider:
        plugin_name = "provider"

        @hookimpl
        def embedder(self, config: Any) -> Any:
            made.append(HashEmbedder())
            return made[-1]

    class Ignores:
        plugin_name = "ignores"

        @hookimpl
        def backend(self, config: Any) -> Any:
            return None

    class Takes:
        plugin_name = "takes"

        @hookimpl
        def backend(self, config: Any, embedder: Any) -> Any:
            seen.append(embedder)

    assert plugin_host_with([Provider(), Ignores()]).backend() is None
    assert made == []  # no backend asked for it: no model loaded
    host = plugin_host_with([Provider(), Takes()])
    host.backend()
    host.backend()
    assert len(made) == 1 and seen == [made[0], made[0]]
    host.backend(embedder=None)  # what memory reindex --rebuild opens
    assert seen[-1] is None
