"""The neighbour-expansion harness (bench/locomo_experiments.py), on made-up conversations: given
only the +1 weight it must rank exactly as the product's followers do (its figures are compared
with the bench's), its neighbour read keeps to the hit's scope and source, and its split keeps the
dev and held-out conversations apart. No LoCoMo data is read."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextplane.store.followers import to_follow, with_followers
from contextplane.store.sqlite import SQLiteKnowledgeStore

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import locomo_experiments as exp

SCOPE = "project:web"
WORDS = [f"w{i}" for i in range(40)]


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteKnowledgeStore]:
    """120 turns: two speakers, some questions, another scope and another chat interleaved, and
    an operator fact now and then (never followed)."""
    rng = random.Random(5)
    rows: list[dict[str, Any]] = []
    for i in range(120):
        end = "?" if i % 3 == 0 else "."
        rows.append(
            {
                "content": f"{'Ana' if i % 2 else 'Ben'}: {' '.join(rng.sample(WORDS, 6))}{end}",
                "namespace": SCOPE if i % 7 else "project:other",
                "source_type": "operator" if i % 11 == 0 else "conversation",
                "source": "chat-2" if i % 5 == 0 else "chat-1",
            }
        )
    with SQLiteKnowledgeStore(tmp_path_factory.mktemp("chat") / "m.sqlite3") as store:
        store.add_chunks(rows)
        exp.NEIGHBOURS.reset()
        yield store


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    k=st.integers(1, 60),
    weight=st.sampled_from([0.0, 0.1, 0.2, 0.5]),
    limit=st.integers(1, 60),
)
def test_the_plus_one_weight_alone_ranks_as_the_products_followers(
    chat: SQLiteKnowledgeStore, words: list[str], k: int, weight: float, limit: int
) -> None:
    hits = chat.search(" ".join(words), k, namespaces=[SCOPE])
    ids = to_follow(hits)
    product = with_followers(hits, chat.following(ids) if ids else {}, weight, limit=limit)
    harness = exp.with_neighbours(hits, chat, {"+1": weight}, limit)
    assert [h.chunk.id for h in harness.hits] == [h.chunk.id for h in product.hits]
    # the section ranks rows by standing (a hit no follower lifted keeps its search rank)
    ids = [h.chunk.id for h in product.hits]
    assert [harness.standing[i] for i in ids] == pytest.approx([product.standing[i] for i in ids])
    assert [h.relevance for h in harness.hits] == [h.relevance for h in product.hits]
    assert harness.after == product.after


def test_neighbours_keep_to_the_scope_and_the_source(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:

        def turn(text: str, namespace: str = SCOPE, source: str = "chat-1") -> Any:
            chunk_id = store.add_chunk(text, source_type="conversation", namespace=namespace, source=source)
            return store.get(chunk_id)

        first = turn("Ana: when is the deploy?")
        turn("Zed: another chat", source="chat-2")
        second = turn("Ben: Tuesday.")
        turn("Max: another scope", namespace="project:other")
        third = turn("Ana: thanks")
        got = exp.Neighbours()
        assert got.of(store, second, -1).id == first.id  # the other chat's turn is stepped over
        assert got.of(store, first, +1).id == second.id == store.following([first.id])[first.id].id
        assert got.of(store, first, +2).id == third.id  # the other scope's turn is not in the list
        assert got.of(store, third, +1) is None
        assert got.of(store, first, -1) is None


def test_weights_parse_by_offset_and_kind() -> None:
    assert exp.parse_weights("+1=0.2, -1s=0.1,2=0.05,+1q=0.3") == {
        "+1": 0.2,
        "-1s": 0.1,
        "+2": 0.05,
        "+1q": 0.3,
    }


def test_the_split_keeps_dev_and_held_out_apart() -> None:
    dev, held = exp.DEV[0], exp.HELD_OUT[0]
    report = {
        "per_question": {
            "questions": [[dev, 0, 4], [dev, 1, 1], [held, 0, 4]],
            "evidence_recall": {
                "contextplane hybrid": {"2k": [1.0, 0.0, 0.25]},
                "BM25, packed": {"2k": [0, 0, 0]},
            },
        }
    }
    figures = exp.split_figures(report)
    assert set(figures) == {"contextplane hybrid"}  # the baselines are not split
    hybrid = figures["contextplane hybrid"]
    assert hybrid["dev"]["2k"] == 0.5 and hybrid["held-out"]["2k"] == 0.25
    assert hybrid["all"]["2k"] == pytest.approx(1.25 / 3)
    assert hybrid["dev single-hop"]["2k"] == 1.0 and hybrid["held-out single-hop"]["2k"] == 0.25
