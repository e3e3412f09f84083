"""Relevance on PostgreSQL means what it means on the embedded store, so the relevance floor
(``context.min_relevance``) applies here too: an off-corpus question injects nothing through
the standard sections, a question the store can answer delivers its memory, frequent words
score nothing, the plan is cached per corpus version (a replay scores exactly), and a turn
recorded on SQLite replays on PostgreSQL after ``store copy``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextplane import PluginHost, compose_projected_context
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.explain.replay import replay
from contextplane_postgres import PostgresBackend
from contextplane_postgres.copy import copy_store

from .corpus import NOTES, OFF_CORPUS, ON_CORPUS
from .helpers import HashEmbedder

#: The off-corpus question whose nearest hashed-bag-of-words neighbour is below the floor on
#: both stores (the other two share "the"/"you"/"for" buckets with a note closely enough to
#: pass 0.3 by cosine alone: the chance similarity issue 11's successor calibrates).
UNANSWERABLE = OFF_CORPUS[0]


def standard_host() -> PluginHost:
    return PluginHost.from_entry_points(structure({"context": {"context_window": 200_000}}))


def turn(
    backend: Any, host: PluginHost, query: str, index: int = 1, *, record: bool = True, budget: int | None = None
) -> Any:
    return compose_projected_context(
        query, backend, None, {}, session_id="s1", turn_index=index, host=host, record=record,
        budget_tokens=budget,
    )


@pytest.mark.parametrize("hybrid", [False, True], ids=["full-text", "hybrid"])
def test_an_off_corpus_question_injects_nothing_and_an_answerable_one_its_memory(
    pg_backend_factory: Any, tmp_path: Path, hybrid: bool
) -> None:
    embedder = HashEmbedder() if hybrid else None
    pg = pg_backend_factory(embedder=embedder)
    pg.memories.add_chunks({"content": c} for c in NOTES)
    host = standard_host()

    off = turn(pg, host, UNANSWERABLE)
    assert off.delivered_ids == {}, off.delivered_ids
    report = off.section("retrieved")
    assert report is not None and report.item_ids == ()
    if hybrid:  # the vector leg always has neighbours: found, and every one below the floor
        hits = pg.memories.search(UNANSWERABLE, 5)
        assert hits and all(h.relevance is not None and h.relevance < 0.3 for h in hits)
        assert report.meta["below_min_relevance"] == report.meta["hits"] > 0
    # the same question on the embedded store with the same rows: nothing either
    sqlite = SQLiteBackend(tmp_path / "m.sqlite3", embedder=embedder)
    try:
        sqlite.memories.add_chunks({"content": c} for c in NOTES)
        assert turn(sqlite, host, UNANSWERABLE).delivered_ids == {}
    finally:
        sqlite.close()

    for index, (question, target) in enumerate(ON_CORPUS, start=2):
        answered = turn(pg, host, question, index).section("retrieved")
        assert answered is not None and answered.item_ids[:1] == (str(target),), (question, answered.item_ids)
    # the floor is the operator's: at 0 the off-corpus question gets its nearest noise again
    if hybrid:
        zero = PluginHost.from_entry_points(
            structure({"context": {"context_window": 200_000, "min_relevance": 0}})
        )
        assert turn(pg, zero, UNANSWERABLE, 99).section("retrieved").item_ids


def test_function_words_and_frequent_terms_are_not_scored(pg_backend_factory: Any) -> None:
    store = pg_backend_factory().memories
    # 1,500 rows hold "common" (every row: past the frequency cap), three hold "zebra"
    store.add_chunks(
        {"content": f"common note number {i}" + (" about the zebra" if i % 500 == 0 else "")}
        for i in range(1_500)
    )
    # only function words: no full-text leg at all (no row matched on "the" or "me")
    assert store.search("tell me about the thing", 10) == []
    hits = store.search("the common zebra", 10)
    assert [h.chunk.content for h in hits] == [f"common note number {i} about the zebra" for i in (0, 500, 1000)]
    assert all(h.relevance == pytest.approx(1.0) for h in hits)  # "common" carries no IDF
    with store.db.connection() as conn:
        plan = store._term_stats.plan(conn, "the common zebra", ("test", 0))
    assert plan.terms == ("'zebra'",), "a term in every row was scored"
    # a question whose only known word is too common: the rarest (here the only) one is kept
    assert len(store.search("what about common", 5)) == 5


def test_relevance_is_a_share_of_the_query_and_the_plan_follows_the_corpus(pg_backend_factory: Any) -> None:
    store = pg_backend_factory().memories
    store.add_chunks({"content": c} for c in NOTES)
    hits = {h.chunk.id: h.relevance for h in store.search("checkout latency budget", 10)}
    assert hits["3"] == pytest.approx(1.0)  # holds every scored term
    assert 0.0 < hits["1"] < 0.5  # "checkout" only: less than half of the question's IDF
    assert all(0.0 <= r <= 1.0 for r in hits.values() if r is not None)
    with store.consistent_read() as view:
        position = view.history_position()
        before = [(h.chunk.id, h.relevance) for h in view.search("checkout latency budget", 10)]
    # many new rows about checkout: "checkout" is worth less now, so row 1 drops
    store.add_chunks({"content": f"checkout note {i}"} for i in range(40))
    now = {h.chunk.id: h.relevance for h in store.search("checkout latency budget", 50)}
    assert now["1"] is not None and now["1"] < hits["1"]
    # ... and the store as of the first read scores exactly as that read did
    with store.as_of(position) as past:
        assert [(h.chunk.id, h.relevance) for h in past.search("checkout latency budget", 10)] == before


def test_a_turn_recorded_on_sqlite_replays_on_postgresql(tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    """Turns composed on the embedded store, copied (``store copy``) and replayed on PostgreSQL
    as of their history positions: byte-identical wherever PostgreSQL ranks the retrieved rows
    as SQLite did. What still differs is stemming (the embedded index stems, "deploys" matches
    "deploy"; PostgreSQL's ``simple`` configuration does not) and BM25's term-frequency and
    length factor, which the IDF share lacks; each differing turn is checked to be one where
    the two stores' searches disagree, never one where they agree."""
    embedder = HashEmbedder()
    source = tmp_path / "m.sqlite3"
    host = standard_host()
    questions = [UNANSWERABLE, *(q for q, _ in ON_CORPUS)]
    recorded: dict[int, list[str]] = {}
    depths: dict[int, int] = {}
    sqlite = SQLiteBackend(source, embedder=embedder)
    try:
        sqlite.memories.add_chunks({"content": c} for c in NOTES)
        for index, question in enumerate(questions, start=1):
            # a budget of a few rows: depth follows the budget, and the question is whether the
            # two stores agree on what the model is shown (their tails may order apart)
            projection = turn(sqlite, host, question, index, budget=100)
            recorded[index] = list(projection.delivered_ids.get("retrieved", ()))
            depths[index] = projection.section("retrieved").meta["depth"]
    finally:
        sqlite.close()
    pg = PostgresBackend(pg_url, schema=pg_schema, embedder=embedder)
    try:
        copy_store(source, pg.db)
        identical = []
        for index, question in enumerate(questions, start=1):
            report = replay(pg, "s1", index, host=host)
            assert report.mode == "as_of"
            with pg.memories.as_of(report.history_position) as past:
                # what the retrieved section would inject from PostgreSQL's own search: the
                # question's hits in rank order when its best one reaches the floor, else none
                floor, k = host.config.context.min_relevance, depths[index]
                hits = past.search(question, k)
                best = max((h.relevance for h in hits if h.relevance is not None), default=None)
                ranked = [h.chunk.id for h in hits] if best is None or best >= floor else []
                ranked = ranked[: len(recorded[index])]  # the budget holds the recorded turn's rows
            if ranked == recorded[index]:
                assert report.identical, (question, report.text_diff)
                identical.append(index)
            else:
                assert not report.identical
        # the off-corpus turn (nothing injected on either) and the turns whose rankings agree
        assert 1 in identical
        assert len(identical) >= 4, f"only turns {identical} of {len(questions)} replayed byte-identical"
    finally:
        pg.close()


def test_an_off_corpus_question_in_a_calibrated_store_injects_nothing(pg_backend_factory: Any) -> None:
    pg = pg_backend_factory(embedder=HashEmbedder())
    pg.memories.add_chunks(
        [{"content": c} for c in NOTES]
        + [{"content": f"{NOTES[i % len(NOTES)]} (copy {i}, revision {i * 7})"} for i in range(200)]
    )
    host = standard_host()
    for index, question in enumerate(OFF_CORPUS, start=1):
        assert turn(pg, host, question, index).delivered_ids == {}, question
