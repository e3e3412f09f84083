"""The relevance floor (``context.min_relevance``): a question the store cannot answer injects
nothing rather than its nearest noise."""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from contextplane import compose_projected_context, plugin_host_with
from contextplane.config import structure
from contextplane.memory.model import MemoryChunk
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store.protocol import SearchHit
from contextplane.store.query_terms import STOP_WORDS
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
    return compose_projected_context(
        query, store, None, {}, session_id="s", host=plugin_host_with([retrieved], config)
    )


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


class ConceptEmbedder:
    """Each content word stands for a concept with a fixed random direction (synonyms share
    one); a text is the normalised sum of its concepts, function words left out. Unrelated
    texts are near 0 +- 1/8 (64 dimensions), so among a few hundred rows the best unrelated
    one clears a raw cosine of 0.3 by chance, while a paraphrase is far above it."""

    name = "test-concepts-64"
    dimensions = 64
    SYNONYMS: ClassVar[dict[str, str]] = {
        "shipping": "deploy",
        "cutoff": "window",
        "weekend": "friday",
        "payments": "checkout",
    }

    def _direction(self, word: str) -> list[float]:
        rng = random.Random(hashlib.blake2b(self.SYNONYMS.get(word, word).encode(), digest_size=8).digest())
        return [rng.gauss(0.0, 1.0) for _ in range(self.dimensions)]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            total = [0.0] * self.dimensions
            for word in re.findall(r"[a-z]+", text.lower()):
                if word not in STOP_WORDS:
                    total = [a + b for a, b in zip(total, self._direction(word), strict=True)]
            norm = math.sqrt(sum(x * x for x in total)) or 1.0
            out.append([x / norm for x in total])
        return out


def _pseudo_words(rng: random.Random, count: int) -> list[str]:
    return [
        "".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(3)) for _ in range(count)
    ]


def test_a_vector_hit_at_chance_level_is_not_injected_and_a_paraphrase_is(tmp_path: Path) -> None:
    """The vector leg's similarity counts only above what the best unrelated row reaches by
    chance in this corpus (``vector_index.chance_similarity``): a near-noise neighbour whose raw
    cosine clears ``min_relevance`` is not injected; a paraphrase sharing no word with its
    memory is."""
    rng = random.Random(3)
    rows = [" ".join(_pseudo_words(rng, 6)) + "." for _ in range(300)]
    target = "Deploy window closes on Friday for checkout."
    embedder = ConceptEmbedder()
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3", embedder=embedder) as store:
        store.add_chunks({"content": c} for c in [*rows, target])
        off_corpus = "what did we say about the lisbon umbrella forecast?"
        query_vector = embedder.embed([off_corpus])[0]
        raw = max(
            sum(a * b for a, b in zip(query_vector, v, strict=True)) for v in embedder.embed([*rows, target])
        )
        assert raw > 0.3  # the nearest noise would pass a raw-cosine floor of 0.3
        hits = store.search(off_corpus, 5)
        assert hits and all(h.relevance is not None and h.relevance < 0.3 for h in hits)
        report = project(store, off_corpus).section("retrieved")
        assert report.item_ids == ()
        assert report.meta["below_min_relevance"] == report.meta["hits"] > 0
        # no word of the paraphrase is in the memory (nor in any other row): the vector leg alone
        paraphrase = "what is the shipping cutoff before the weekend for payments?"
        assert store.search(paraphrase, 5)[0].chunk.content == target
        answered = project(store, paraphrase).section("retrieved")
        # the question passes the gate, so the section offers its ranked rows, the paraphrase's
        # memory first; context.min_row_relevance keeps the weak ones out when asked to
        assert answered.item_ids[0] == "301"
        strict = project(store, paraphrase, min_row_relevance=0.3).section("retrieved")
        assert strict.item_ids == ("301",)
