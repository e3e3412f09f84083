"""The relevance floor (``context.min_relevance``): a question the store cannot answer injects
nothing rather than its nearest noise."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contextplane import compose_projected_context, plugin_host_with
from contextplane.config import structure
from contextplane.memory.model import MemoryChunk
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store.protocol import SearchHit
from contextplane_sections import retrieved
from tests.store.helpers import HashEmbedder

NOTES = [
    "The deploy window is Tuesday 14:00 UTC.",
    "Deploys need two approvals from the on-call lead.",
    "Checkout latency budget is 300 ms at p95.",
    "The staging database is refreshed every Sunday night.",
]
OFF_CORPUS = "what's the weather like in Lisbon tomorrow, and should I take an umbrella?"


def project(store: Any, query: str, **context: Any) -> Any:
    config = structure({"context": {"context_window": 200_000, **context}})
    return compose_projected_context(query, store, None, {}, session_id="s", host=plugin_host_with([retrieved], config))


def test_an_off_corpus_question_injects_nothing(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3", embedder=HashEmbedder()) as store:
        store.add_chunks({"content": c} for c in NOTES)
        # the vector leg always has nearest neighbours: they are there, and below the floor
        assert store.search(OFF_CORPUS, 5)
        report = project(store, OFF_CORPUS).section("retrieved")
        assert report.item_ids == ()
        assert report.meta["below_min_relevance"] == report.meta["hits"] > 0
        # an answerable question still gets its memories, the best first
        answered = project(store, "when is the deploy window?").section("retrieved")
        assert answered.item_ids[0] == "1"
        # the floor is the operator's: 0 injects every hit
        assert project(store, OFF_CORPUS, min_relevance=0).section("retrieved").item_ids


def test_a_store_that_cannot_say_is_never_filtered() -> None:
    now = datetime.now(UTC)
    chunk = MemoryChunk(id="m1", content="a memory with no relevance figure", created_at=now, updated_at=now)

    class NoRelevance:
        def search(self, query: str, k: int = 10, **_: Any) -> list[SearchHit]:
            return [SearchHit(chunk=chunk, score=0.01, rank=1)]

    report = project(NoRelevance(), "anything at all", min_relevance=1).section("retrieved")
    assert report.item_ids == ("m1",)
    assert report.meta["below_min_relevance"] == 0
