"""The OpenAI-compatible embedder against a real HTTP server on 127.0.0.1: batching, retries
with backoff and Retry-After, timeouts, the async path, and the API key kept out of every
message. The server (tests/embedders/server.py) is Starlette on uvicorn in a thread."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from contextplane.config import load_config
from contextplane.errors import ConfigError, EmbedderError
from contextplane_embedders import openai_compat
from contextplane_embedders.openai_compat import OpenAIEmbedder

from .server import EmbeddingServer, vector

SECRET = "sk-test-9f8e7d6c5b4a-DO-NOT-LEAK"


def make(server: EmbeddingServer, **kw: Any) -> OpenAIEmbedder:
    kw.setdefault("model", "test-embed")
    kw.setdefault("dimensions", 16)
    kw.setdefault("timeout_s", 2.0)
    embedder = OpenAIEmbedder(base_url=server.base_url, **kw)
    embedder._sleep = lambda s: None  # type: ignore[method-assign]  # pauses are checked apart
    return embedder


def test_texts_go_in_batches_and_come_back_in_order(server: EmbeddingServer) -> None:
    texts = [f"text number {i} about the deploy window" for i in range(7)]
    embedder = make(server, batch_size=3)
    vectors = embedder.embed(texts)
    assert [len(s.batch) for s in server.behaviour.seen] == [3, 3, 1]
    # the server answers each batch in reverse order; the client sorts by index
    assert vectors == [pytest.approx(vector(t, 16)) for t in texts]
    assert {s.model for s in server.behaviour.seen} == {"test-embed"}
    assert {s.dimensions for s in server.behaviour.seen} == {16}


def test_the_width_is_asked_of_the_server_when_not_configured(server: EmbeddingServer) -> None:
    server.behaviour.dims = 24
    embedder = make(server, dimensions=None)
    assert server.behaviour.seen == []  # nothing asked before the width is needed
    assert embedder.dimensions == 24
    assert server.behaviour.seen[0].dimensions is None  # not asked to shorten
    assert len(embedder.embed(["x"])[0]) == 24


def test_429_and_5xx_are_retried_with_growing_backoff(server: EmbeddingServer) -> None:
    server.behaviour.script = ["429", "500", "503", "ok"]
    embedder = make(server, max_retries=3)
    pauses: list[float] = []
    embedder._sleep = pauses.append  # type: ignore[method-assign]
    assert embedder.embed(["retry me"]) == [pytest.approx(vector("retry me", 16))]
    assert len(server.behaviour.seen) == 4
    base = openai_compat.BACKOFF_BASE_S
    assert [
        base <= pauses[0] <= base * 1.5,
        2 * base <= pauses[1] <= 3 * base,
        4 * base <= pauses[2] <= 6 * base,
    ] == [
        True,
        True,
        True,
    ]


def test_retry_after_is_honoured_within_the_cap(server: EmbeddingServer) -> None:
    server.behaviour.script = ["429:1.5", "ok"]
    embedder = make(server)
    pauses: list[float] = []
    embedder._sleep = pauses.append  # type: ignore[method-assign]
    embedder.embed(["a"])
    assert pauses == [1.5]


def test_retry_after_past_the_cap_fails_at_once(server: EmbeddingServer) -> None:
    server.behaviour.script = ["429:60"]
    with pytest.raises(
        EmbedderError, match=r"HTTP 429.*asked to retry after 60s, longer than the 10s a call may wait"
    ):
        make(server).embed(["a"])
    assert len(server.behaviour.seen) == 1


def test_retries_run_out_with_an_error_naming_the_embedder_and_the_count(server: EmbeddingServer) -> None:
    server.behaviour.default = "500"
    with pytest.raises(EmbedderError) as err:
        make(server, max_retries=2).embed(["a"])
    assert str(err.value).startswith(f"embedder openai:test-embed at {server.base_url}: HTTP 500: ")
    assert str(err.value).endswith("(gave up after 3 attempts)")
    assert len(server.behaviour.seen) == 3


def test_a_client_error_is_not_retried(server: EmbeddingServer) -> None:
    server.behaviour.script = ["400"]
    with pytest.raises(
        EmbedderError, match=r"HTTP 400: .*unknown model.*check the model name, the key and the URL"
    ):
        make(server, max_retries=3).embed(["a"])
    assert len(server.behaviour.seen) == 1


def test_a_hanging_server_times_out(server: EmbeddingServer) -> None:
    server.behaviour.script = ["hang"]
    with pytest.raises(
        EmbedderError, match=r"no answer within 0.3s \(embedder.timeout_s\) \(gave up after 1 attempt\)"
    ):
        make(server, timeout_s=0.3, max_retries=0).embed(["a"])


def test_wrong_dimensions_are_refused(server: EmbeddingServer) -> None:
    server.behaviour.script = ["wrong_dims"]
    with pytest.raises(EmbedderError, match=r"returned a 19-dimension vector, expected 16"):
        make(server).embed(["a"])


def test_the_async_path_batches_retries_and_matches_the_sync_one(server: EmbeddingServer) -> None:
    server.behaviour.latency_s = 0.05
    embedder = make(server, batch_size=2)
    texts = ["one deploy", "two backup", "three restore"]

    async def run() -> tuple[list[list[float]], list[list[float]], list[list[float]]]:
        # two turns at once on one loop: neither blocks the other, both get their vectors
        first, second = await asyncio.gather(embedder.aembed(texts), embedder.aembed(texts[:1]))
        server.behaviour.script = ["500", "ok"]
        retried = await embedder.aembed(["after a crash"])
        await embedder.aclose()
        return first, second, retried

    first, second, retried = asyncio.run(run())
    assert first == [pytest.approx(vector(t, 16)) for t in texts]
    assert second == [pytest.approx(vector(texts[0], 16))]
    assert retried == [pytest.approx(vector("after a crash", 16))]
    assert sorted(len(s.batch) for s in server.behaviour.seen[:3]) == [1, 1, 2]
    assert [s.batch for s in server.behaviour.seen[3:]] == [["after a crash"], ["after a crash"]]
    assert embedder.embed(texts) == first


def test_the_async_path_times_out_too(server: EmbeddingServer) -> None:
    server.behaviour.script = ["hang"]
    embedder = make(server, timeout_s=0.3, max_retries=0)
    with pytest.raises(EmbedderError, match=r"no answer within 0.3s"):
        asyncio.run(embedder.aembed(["a"]))


# --- the API key --------------------------------------------------------------------------


def test_the_key_is_sent_and_never_shown(server: EmbeddingServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    embedder = make(server, api_key_env="TEST_EMBED_KEY", environ={"TEST_EMBED_KEY": SECRET}, max_retries=1)
    embedder.embed(["hello"])
    assert server.behaviour.seen[0].authorization == f"Bearer {SECRET}"
    server.behaviour.default = "echo_key"  # a server that echoes the header back in its error
    with pytest.raises(EmbedderError) as err:
        embedder.embed(["hello"])
    assert "you sent Bearer ***" in str(err.value)
    assert SECRET not in str(err.value) and SECRET not in repr(err.value)
    assert SECRET not in repr(embedder) and SECRET not in embedder.name
    assert "you sent Bearer ***" in caplog.text  # the retry was logged, masked
    assert SECRET not in caplog.text


def test_a_missing_key_variable_is_a_config_error_naming_the_variable(server: EmbeddingServer) -> None:
    with pytest.raises(ConfigError, match=r"^embedder.api_key_env names MISSING_KEY, which is not set"):
        make(server, api_key_env="MISSING_KEY", environ={})


def test_from_config_needs_base_url_and_model(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text('[embedder]\nprovider = "openai"\nmodel = "m"\n')
    with pytest.raises(
        ConfigError, match=r'needs embedder.base_url \(e.g. base_url = "http://localhost:11434/v1"'
    ):
        OpenAIEmbedder.from_config(load_config(tmp_path / "c.toml", environ={}))
