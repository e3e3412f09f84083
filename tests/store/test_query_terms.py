"""Which words of a natural-language query the full-text leg scores, stemming, and relevance."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextplane.store import SQLiteKnowledgeStore
from contextplane.store import query_terms as qt
from tests.store.helpers import HashEmbedder


def test_function_words_never_take_part() -> None:
    assert qt.meaningful_words("What did we decide about the deploy window for checkout?") == [
        '"decide"', '"deploy"', '"window"', '"checkout"'
    ]
    assert qt.meaningful_words("what is it to me?") == []
    assert qt.meaningful_words("deploy* the window") == ['"deploy"*', '"window"']


def test_a_question_of_function_words_only_searches_nothing(store: SQLiteKnowledgeStore) -> None:
    store.add_chunk("it is what it is, to me")
    assert store.search("what is it to me?") == []


def test_stemming_matches_other_inflections(store: SQLiteKnowledgeStore) -> None:
    target = store.add_chunk("We deploy the checkout service on Tuesdays.")
    store.add_chunk("Lunch is at noon.")
    for question in ("when do we deploy?", "which deploys happened", "deploying checkout", "the deployed services"):
        assert [h.chunk.id for h in store.search(question, 5)] == [target], question


def test_frequent_terms_are_left_out_of_the_match(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qt, "MIN_DOC_CAP", 3)
    with SQLiteKnowledgeStore(db_path) as store:
        store.add_chunks([{"content": f"common filler row {i}"} for i in range(40)])
        rare = store.add_chunk("common but also zanzibar")
        plan = store._term_stats.plan(store.conn, "common zanzibar")
        assert plan.expression == '"zanzibar"'  # "common" is in 41 of 41 rows: no information
        assert plan.postings == 1
        # the ideal still counts the dropped term (IDF near zero) and the kept one
        assert plan.ideal == pytest.approx(qt.fts5_idf(41, 4) + qt.fts5_idf(41, 1), rel=0.5)
        assert [h.chunk.id for h in store.search("common zanzibar", 3)] == [rare]
        # alone, the rarest present term is kept: the question still finds something, but
        # matching only a word in every row is never a full answer (the ideal is at least the
        # IDF of a term at the frequency cap)
        plan = store._term_stats.plan(store.conn, "common volcano")
        # (the unseen "volcano" counts in part: UNSEEN_SHARE of the question's two words, each
        # weighing as the known one, counted to the cap + 1)
        assert plan.expression == '"common"' and plan.ideal == pytest.approx(
            max(qt.fts5_idf(41, 4), qt.UNSEEN_SHARE * 2 * qt.fts5_idf(41, 5))
        )
        hits = store.search("common volcano", 5)
        assert hits and max(h.relevance or 0 for h in hits) < 0.01


def test_document_frequencies_are_cached_and_bounded(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qt, "MIN_DOC_CAP", 3)
    with SQLiteKnowledgeStore(db_path) as store:
        store.add_chunks([{"content": f"common row {i}"} for i in range(50)])
        stats = qt.TermStats()
        stats.plan(store.conn, "common")
        assert stats._df == {'"common"': 6}  # counted up to the cap (10% of 50 = 5) plus one


def test_frequencies_are_cached_per_corpus_version_so_a_plan_is_a_function_of_the_corpus(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(qt, "MIN_DOC_CAP", 3)
    with SQLiteKnowledgeStore(db_path) as store:
        store.add_chunks([{"content": f"filler row {i}"} for i in range(100)])
        rare = store.add_chunk("the kiwi orchard")
        stats = qt.TermStats()
        before = stats.plan(store.conn, "kiwi orchard")
        counted: list[str] = []
        store.conn.exec_trace = lambda _c, sql, _b: counted.append(sql) or True
        assert stats.plan(store.conn, "kiwi orchard") == before  # same corpus: from the cache
        assert not [q for q in counted if "MATCH" in q]
        store.conn.exec_trace = None
        # one more row with "kiwi" and the row count moves by 1% (an approximate cache would
        # keep the old frequency): the plan must be the one a fresh count gives
        store.add_chunk("kiwi jam recipe")
        after = stats.plan(store.conn, "kiwi orchard")
        assert after == qt.TermStats().plan(store.conn, "kiwi orchard") and after != before
        assert store.get(rare) is not None


def test_indexed_rows_reads_the_fts_averages_record(store: SQLiteKnowledgeStore) -> None:
    assert qt.indexed_rows(store.conn) == 0
    store.add_chunks([{"content": f"row {i}"} for i in range(300)])
    assert qt.indexed_rows(store.conn) == 300


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**21 + 5, 2**35 + 7])
def test_varint(value: int) -> None:
    # SQLite's varint: 7 bits per byte, high bit set on all but the last
    groups = []
    v = value
    while True:
        groups.append(v & 0x7F)
        v >>= 7
        if not v:
            break
    encoded = bytes([g | 0x80 for g in reversed(groups[1:])] + [groups[0]])
    assert qt._varint(encoded + b"\xff") == value


def test_relevance_is_the_idf_weighted_share_of_the_query(store: SQLiteKnowledgeStore) -> None:
    store.add_chunks([{"content": f"filler note {i} about lunch"} for i in range(30)])
    both = store.add_chunk("the zanzibar ferry timetable")
    one = store.add_chunk("a zanzibar postcard")
    hits = {h.chunk.id: h for h in store.search("zanzibar ferry", 5)}
    assert hits[both].relevance == pytest.approx(1.0, abs=0.05)
    # "zanzibar" (in 2 rows) is worth less than "ferry" (in 1); BM25's length normalisation
    # lifts this short row a little above its share
    n = 32
    expected = qt.fts5_idf(n, 2) / (qt.fts5_idf(n, 2) + qt.fts5_idf(n, 1))
    assert hits[one].relevance == pytest.approx(expected, abs=0.1)
    assert hits[one].score < hits[both].score
    # a term no row contains counts only in part: "continue", "finish" in a question are not a
    # reason to drop the memory that answers the rest of it (the ideal is at least UNSEEN_SHARE
    # of the whole question's, each unseen word weighing as the known ones on average)
    partial = store.search("zanzibar ferry volcano", 5)[0]
    assert partial.chunk.id == both
    assert partial.relevance == pytest.approx(min(1.0, 1 / max(1.0, qt.UNSEEN_SHARE * 3 / 2)), abs=0.1)
    # a question mostly about what the store never heard of is not answered by one shared word
    stray = store.search("zanzibar volcano earthquake tsunami lava glacier avalanche monsoon typhoon", 5)
    assert max(h.relevance or 0 for h in stray) < 0.3



def test_hybrid_relevance_is_at_most_one_and_ranks_the_full_match_first(db_path: Path) -> None:
    with SQLiteKnowledgeStore(db_path, embedder=HashEmbedder()) as store:
        store.add_chunks([{"content": f"filler note {i} about lunch"} for i in range(30)])
        both = store.add_chunk("the zanzibar ferry timetable")
        store.add_chunk("a zanzibar postcard")
        hits = store.search("zanzibar ferry", 5)
        assert hits[0].chunk.id == both
        assert all(h.relevance is not None and 0 <= h.relevance <= 1 for h in hits)
        assert all(0 <= h.score <= 2 for h in hits)


@pytest.mark.parametrize("hybrid", [False, True], ids=["fts", "hybrid"])
def test_a_small_scope_widens_in_steps_and_remembers_the_width(db_path: Path, hybrid: bool) -> None:
    with SQLiteKnowledgeStore(db_path, embedder=HashEmbedder() if hybrid else None) as store:
        store.add_chunks(
            {"content": f"deploy window note {i}", "namespace": f"project:p{i % 20}"} for i in range(600)
        )
        scope = ["project:p3"]
        hits = store.search("deploy window", 10, namespaces=scope)
        # the full-text leg ranks 40 rows deep (store.legs.depth(10)) from 80 unfiltered
        # candidates: they hold ~4 of this scope's 30 rows, so it widened 4x (320: ~16), then
        # 16x (1,280 candidates: every one of the 600 matches)
        assert len(hits) == 10 and {h.chunk.namespace for h in hits} == {"project:p3"}
        assert store._widths[("fts", ("project:p3",))] == 16
        # the next search in the same scopes starts at that width and finds the same rows
        assert [h.chunk.id for h in store.search("deploy window", 10, namespaces=scope)] == [
            h.chunk.id for h in hits
        ]
        # a scope of one row is found however few of the unfiltered candidates it holds
        store.add_chunk("deploy window note lone", namespace="project:lone")
        assert [h.chunk.content for h in store.search("deploy window", 10, namespaces=["project:lone"])] == [
            "deploy window note lone"
        ]
        assert store._widths[("fts", ("project:lone",))] == 16
