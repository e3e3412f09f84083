"""Fixtures of the shipped embedders' tests: one real OpenAI-compatible server per module (a
fresh behaviour per test), and a tiny sentence-transformers model built and saved once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .server import Behaviour, EmbeddingServer, serving


@pytest.fixture(scope="module")
def _server() -> Iterator[EmbeddingServer]:
    yield from serving()


@pytest.fixture
def server(_server: EmbeddingServer) -> EmbeddingServer:
    _server.behaviour = Behaviour()
    return _server


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from .tiny_model import build

    return build(tmp_path_factory.mktemp("tiny-model"))
