"""Fixtures for the standard sections: a host of exactly our plugins, a fixed fake store."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from contextplane import Config, PluginHost, plugin_host_with
from contextplane.config import structure
from contextplane.memory.model import MemoryChunk
from contextplane.store.protocol import SearchHit
from contextplane_sections import (
    always_on,
    delegation,
    guidelines,
    identity,
    operating_model,
    prior_sessions,
    retrieved,
    skills,
    tool_guidance,
    working_state,
)

STANDARD = [
    identity,
    operating_model,
    delegation,
    tool_guidance,
    guidelines,
    working_state,
    always_on,
    skills,
    prior_sessions,
    retrieved,
]


def standard_host(config: Config | None = None, extra: Sequence[object] = ()) -> PluginHost:
    return plugin_host_with([*STANDARD, *extra], config or Config())


T0 = dt.datetime(2026, 11, 2, 9, 30, tzinfo=dt.UTC)


def chunk(id: str, content: str, **kw: Any) -> MemoryChunk:
    kw.setdefault("created_at", T0)
    kw.setdefault("updated_at", kw["created_at"])
    return MemoryChunk(id=id, content=content, **kw)


class FakeStore:
    """A fixed, in-memory store: list_chunks and search over fixed chunks, deliverable only.

    Enough of the store protocol for the sections; the real SQLite store is used where the
    store's own filtering is what a test is about.
    """

    def __init__(self, chunks: Sequence[MemoryChunk], search_order: Sequence[str] = ()) -> None:
        self.chunks = {c.id: c for c in chunks}
        self.search_order = list(search_order)
        self.calls: list[tuple[str, Any]] = []

    def _visible(self, c: MemoryChunk, namespaces: Sequence[str] | None) -> bool:
        now = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
        return (namespaces is None or c.namespace in namespaces) and c.is_deliverable(now)

    def list_chunks(
        self,
        *,
        deliverable: bool = False,
        delivery_policy: str | None = None,
        namespaces: Sequence[str] | None = None,
        **_: Any,
    ) -> list[MemoryChunk]:
        self.calls.append(("list_chunks", delivery_policy))
        return [
            c
            for c in self.chunks.values()
            if (delivery_policy is None or c.effective_delivery_policy == delivery_policy)
            and self._visible(c, namespaces)
        ]

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        deliverable: bool = True,
        namespaces: Sequence[str] | None = None,
        **_: Any,
    ) -> list[SearchHit]:
        self.calls.append(("search", query))
        hits = [self.chunks[i] for i in self.search_order if self._visible(self.chunks[i], namespaces)]
        return [SearchHit(c, 1.0 / (r + 1), r + 1) for r, c in enumerate(hits[:k])]


@pytest.fixture
def tmp_config(tmp_path: Path):
    def make(**tables: Any) -> Config:
        return structure(tables, origin="test", base_dir=str(tmp_path))

    return make


@pytest.fixture(autouse=True)
def _fresh_digest_cache():
    prior_sessions.clear_cache()
    yield
    prior_sessions.clear_cache()
