"""Retrieval that follows the budget (issue 21): the vector leg is exact in a small scope, a
larger budget never delivers fewer relevant rows, an off-corpus question still injects none."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from contextplane import compose_projected_context
from contextplane.config import structure
from contextplane.plugins import plugin_host_with
from contextplane.store.sqlite import SQLiteKnowledgeStore
from contextplane_sections import retrieved
from tests.store.helpers import HashEmbedder

TOPICS = ["deploy", "billing", "hiring", "roadmap", "security", "oncall", "design", "budget"]


def _corpus(rng: random.Random, rows: int) -> list[tuple[str, str]]:
    """(topic, text) rows: each names its topic twice among filler words."""
    filler = [f"w{i}" for i in range(300)]
    out = []
    for _ in range(rows):
        topic = rng.choice(TOPICS)
        words = rng.sample(filler, 8)
        out.append((topic, f"{topic} note: {' '.join(words[:4])} {topic} {' '.join(words[4:])}"))
    return out


def test_a_small_scope_vector_search_returns_the_exact_neighbours(tmp_path: Path) -> None:
    rng = random.Random(5)
    embedder = HashEmbedder(dimensions=48)
    rows = _corpus(rng, 1200)
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3", embedder=embedder) as store:
        ids = store.add_chunks(
            {"content": text, "namespace": f"project:p{i % 4}"} for i, (_, text) in enumerate(rows)
        )
        store.train_vector_index()  # the index form exists; a small scope must not depend on it
        vectors = dict(zip(ids, embedder.embed([text for _, text in rows]), strict=True))
        scope = "project:p2"
        in_scope = [i for n, i in enumerate(ids) if n % 4 == 2]
        for probe in range(15):
            # words no row holds: the full-text leg is empty, the ranking is the vector leg's own
            query = " ".join(f"zz{probe}x{j}" for j in range(4))
            hits = store.search(query, 10, namespaces=[scope])
            qv = embedder.embed([query])[0]
            exact = sorted(
                in_scope, key=lambda i: (-sum(a * b for a, b in zip(qv, vectors[i], strict=True)), int(i))
            )
            got = [h.chunk.id for h in hits]
            sims = {i: sum(a * b for a, b in zip(qv, vectors[i], strict=True)) for i in in_scope}
            # the same rows as exact cosine (equal similarities may swap places)
            assert [round(sims[i], 5) for i in got] == [round(sims[i], 5) for i in exact[:10]]
            assert all(h.chunk.namespace == scope for h in hits)


def _delivered(store: SQLiteKnowledgeStore, query: str, tokens: int) -> tuple[str, ...]:
    config = structure({"context": {"context_window": 200_000}})
    host = plugin_host_with([retrieved], config)
    projection = compose_projected_context(
        query, store, None, {}, session_id="s", budget_tokens=tokens, host=host, record=False
    )
    report = projection.section("retrieved")
    assert report is not None and projection.used_chars <= tokens * 4
    return report.item_ids


@pytest.mark.parametrize("hybrid", [False, True], ids=["fts", "hybrid"])
def test_a_budget_twice_as_large_delivers_at_least_as_many_relevant_rows(
    tmp_path: Path, hybrid: bool
) -> None:
    rng = random.Random(11)
    rows = _corpus(rng, 600)
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3", embedder=HashEmbedder() if hybrid else None) as store:
        ids = store.add_chunks({"content": text} for _, text in rows)
        topic_of = {i: topic for i, (topic, _) in zip(ids, rows, strict=True)}
        seen_growth = False
        for topic in TOPICS[:4]:
            query = f"what did the {topic} notes say about w3 and w17?"
            previous = -1
            for tokens in (250, 500, 1000, 2000, 4000):
                got = _delivered(store, query, tokens)
                relevant = sum(topic_of[i] == topic for i in got)
                assert relevant >= previous, (topic, tokens, relevant, previous)
                seen_growth |= previous >= 0 and relevant > previous
                previous = relevant
            # the budget binds: 4,000 tokens holds far more than the old fixed depth of 8
            assert previous > 8
        assert seen_growth


def test_the_section_searches_as_deep_as_the_budget_could_hold(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        store.add_chunks({"content": f"deploy note {i}"} for i in range(400))
        config = structure({"context": {"context_window": 200_000, "retrieved_max": 120}})
        host = plugin_host_with([retrieved], config)
        for tokens, depth in ((1000, 4000 // retrieved.MIN_ROW_CHARS), (16000, 120)):
            p = compose_projected_context(
                "deploy note", store, None, {}, budget_tokens=tokens, host=host, record=False
            )
            report = p.section("retrieved")
            assert report is not None and report.meta["depth"] == min(depth, 120)
            assert p.used_chars <= tokens * 4
        # a deprecated retrieved_k is read as the cap, with one warning naming the new key
        old = structure({"context": {"context_window": 200_000, "retrieved_k": 8}})
        with pytest.warns(UserWarning, match="context.retrieved_max"):
            p = compose_projected_context(
                "deploy note",
                store,
                None,
                {},
                budget_tokens=16000,
                host=plugin_host_with([retrieved], old),
                record=False,
            )
        assert len(p.section("retrieved").item_ids) == 8  # type: ignore[union-attr]
        assert math.isclose(p.section("retrieved").meta["depth"], 8)  # type: ignore[union-attr]


def test_an_always_on_match_does_not_open_the_gate_for_retrieved_rows(tmp_path: Path) -> None:
    """The gate asks whether the store can answer the question from the rows the retrieved
    section could deliver: an always-on row that matches it (delivered by its own section) must
    not let the weakly related retrieved rows in behind it (the scale bench's off-corpus
    questions got 1.1 rows each that way)."""
    from contextplane_sections import always_on

    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3", embedder=HashEmbedder()) as store:
        store.add_chunk(
            "Standing rule: no deploy freeze exceptions tomorrow without the on-call lead",
            source_type="operator",
            delivery_policy="always",
        )
        rng = random.Random(7)
        syllables = [a + b for a in "bdfgklmnprstvz" for b in "aeiou"]
        store.add_chunks(
            {"content": " ".join("".join(rng.sample(syllables, 3)) for _ in range(6))} for _ in range(300)
        )
        config = structure({"context": {"context_window": 200_000}})
        host = plugin_host_with([retrieved, always_on], config)
        p = compose_projected_context(
            "any deploy freeze exceptions tomorrow?", store, None, {}, budget_tokens=4000, host=host, record=False
        )
        assert p.section("always_on").item_ids  # type: ignore[union-attr]
        report = p.section("retrieved")
        assert report is not None and report.item_ids == ()
        assert report.meta["best_relevance"] < 0.3


def test_the_scope_size_is_counted_once_per_corpus_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vector leg counts the rows in scope to choose its form (every row compared, or the
    index): counted once per scope set while nothing is written, and again after a write, so
    a scope that grew past the scan bound is searched through the index."""
    from contextplane.store import legs, vector_matrix

    monkeypatch.setattr(vector_matrix, "MATRIX_MAX", 0)  # no in-memory matrix: the count decides
    monkeypatch.setattr(legs, "EXACT_VECTOR_MAX", 3)
    counted: list[int] = []
    real = legs.scope_rows

    def counting(*args: object, **kw: object) -> int:
        counted.append(real(*args, **kw))  # type: ignore[arg-type]
        return counted[-1]

    monkeypatch.setattr(legs, "scope_rows", counting)
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3", embedder=HashEmbedder()) as store:
        for i in range(3):
            store.add_chunk(f"deploy note {i}", namespace="project:a")
        store.add_chunk("other scope", namespace="project:b")
        scope = {"namespaces": ["project:a"]}
        for _ in range(3):
            store.search("deploy", 5, **scope)
        assert counted == [3]
        store.add_chunk("deploy note 4", namespace="project:a")
        hits = store.search("deploy", 5, **scope)
        assert counted == [3, 4] and len(hits) == 4
