"""The turn after a matching turn (``context.retrieved_follow``, ``store.followers``): in a stored
conversation the reply to the turn that matches a question is offered beside it; facts are not
followed; the ranking's bounds hold for any hits; explain and replay say what happened."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextplane import compose_projected_context
from contextplane.config import structure
from contextplane.explain import explain, replay
from contextplane.memory.model import MemoryChunk
from contextplane.plugins import plugin_host_with
from contextplane.store.followers import FOLLOW_C, reach, to_follow, with_followers
from contextplane.store.protocol import SearchHit
from contextplane.store.sqlite import SQLiteKnowledgeStore
from contextplane_sections import retrieved
from tests.explain.helpers import backend_at, config, host_with, turn

SCOPE = "project:web"
TOPICS = ["deploy", "billing", "hiring", "roadmap"]


def _conversation(store: Any, pairs: int = 60, seed: int = 3) -> dict[str, list[str]]:
    """Question turns naming a topic, each answered by a reply that never names it. Returns
    ``{topic: [ids of its question turns and their replies]}``."""
    rng = random.Random(seed)
    filler = [f"w{i}" for i in range(200)]
    rows, topics = [], []
    for _ in range(pairs):
        topic = rng.choice(TOPICS)
        rows.append(f"Ana: what did we settle about the {topic} plan, {' '.join(rng.sample(filler, 3))}?")
        rows.append(f"Ben: {' '.join(rng.sample(filler, 12))}, that was the outcome.")
        topics += [topic, topic]
    ids = store.add_chunks(
        {"content": text, "namespace": SCOPE, "source_type": "conversation"} for text in rows
    )
    out: dict[str, list[str]] = {t: [] for t in TOPICS}
    for chunk_id, topic in zip(ids, topics, strict=True):
        out[topic].append(chunk_id)
    return out


def _project(store: Any, query: str, tokens: int, **context: Any) -> Any:
    cfg = structure({"context": {"context_window": 200_000, **context}})
    return compose_projected_context(
        query,
        store,
        None,
        {},
        session_id="s",
        budget_tokens=tokens,
        project="web",
        host=plugin_host_with([retrieved], cfg),
        record=False,
    )


def test_the_reply_after_a_matching_turn_is_delivered_beside_it(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        store.add_chunks(
            [
                {
                    "content": "Ana: when does the deploy window open?",
                    "namespace": SCOPE,
                    "source_type": "conversation",
                },
                {
                    "content": "Ben: Tuesday at two, after standup.",
                    "namespace": SCOPE,
                    "source_type": "conversation",
                },
                {
                    "content": "Ana: and the billing freeze?",
                    "namespace": SCOPE,
                    "source_type": "conversation",
                },
            ]
        )
        # the reply shares no word with the question: full-text search alone never finds it
        assert [h.chunk.id for h in store.search("when is the deploy window?", 10, namespaces=[SCOPE])] == [
            "1"
        ]
        off = _project(store, "when is the deploy window?", 2000, retrieved_follow=0).section("retrieved")
        assert off.item_ids == ("1",)
        on = _project(store, "when is the deploy window?", 2000).section("retrieved")
        assert on.item_ids == ("1", "2")  # ranked after the turn it follows
        assert on.meta["followers"] == 1
        assert [r.meta.get("follows") for r in on.drafted] == [None, "1"]


def test_the_async_composition_offers_the_same_followers(tmp_path: Path) -> None:
    """``adraft`` asks ``afollowing`` (the store's own when it has one, else a worker thread)."""
    import asyncio

    from contextplane import acompose_projected_context

    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        _conversation(store)
        cfg = structure({"context": {"context_window": 200_000}})
        host = plugin_host_with([retrieved], cfg)
        for query in ("what about the deploy plan?", "and the billing plan?"):
            kw: dict[str, Any] = {
                "session_id": "s",
                "budget_tokens": 800,
                "project": "web",
                "host": host,
                "record": False,
            }
            sync = compose_projected_context(query, store, None, {}, **kw)
            done = asyncio.run(acompose_projected_context(query, store, None, {}, **kw))
            assert sync.section("retrieved").meta["followers"] > 0
            assert done.text == sync.text


def test_facts_are_not_followed(tmp_path: Path) -> None:
    """A fact written after a fact is not its answer: only conversation turns are followed."""
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        store.add_chunk("Priya approves deploys", "fact", "operator", namespace=SCOPE)
        store.add_chunk("lunch is at noon", "fact", "operator", namespace=SCOPE)
        report = _project(store, "who approves deploys?", 2000).section("retrieved")
        assert report.item_ids == ("1",) and "followers" not in report.meta


def test_a_turn_of_another_conversation_or_scope_is_not_the_reply(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        first = store.add_chunk(
            "Ana: when does the deploy window open?",
            source_type="conversation",
            namespace=SCOPE,
            source="chat-1",
        )
        store.add_chunk(
            "Zoe: unrelated chatter", source_type="conversation", namespace="project:other", source="chat-1"
        )
        store.add_chunk(
            "Max: another chat's turn", source_type="conversation", namespace=SCOPE, source="chat-2"
        )
        reply = store.add_chunk(
            "Ben: Tuesday at two.", source_type="conversation", namespace=SCOPE, source="chat-1"
        )
        assert {k: v.id for k, v in store.following([first]).items()} == {first: reply}
        assert _project(store, "when is the deploy window?", 2000).section("retrieved").item_ids == (
            first,
            reply,
        )


def test_a_larger_budget_never_delivers_fewer_relevant_rows_with_followers(tmp_path: Path) -> None:
    with SQLiteKnowledgeStore(tmp_path / "m.sqlite3") as store:
        relevant_of = _conversation(store)
        grew = False
        for topic in TOPICS:
            relevant = set(relevant_of[topic])
            previous = -1
            for tokens in (100, 200, 400, 800, 1600, 3200, 6400):
                got = _project(store, f"what about the {topic} plan?", tokens).section("retrieved").item_ids
                found = len(relevant & set(got))
                assert found >= previous, (topic, tokens, found, previous)
                grew |= 0 <= previous < found
                previous = found
            # the replies came with their questions: every question turn and its reply, at 6,400
            assert previous == len(relevant), (topic, previous, len(relevant))
        assert grew


def _hit(i: int, rank: int, relevance: float | None = None, source_type: str = "conversation") -> SearchHit:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    chunk = MemoryChunk(
        id=str(i), content=f"row {i}", created_at=now, updated_at=now, source_type=source_type
    )
    return SearchHit(chunk=chunk, score=1.0 / rank, rank=rank, relevance=relevance)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 30),
    links=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 80)), max_size=40),
    weight=st.sampled_from([0.0, 0.1, 0.2, 0.5, 1.0]),
    limit=st.one_of(st.none(), st.integers(1, 40)),
)
def test_the_ranking_with_followers_keeps_its_bounds(
    n: int, links: list[tuple[int, int]], weight: float, limit: int | None
) -> None:
    hits = [_hit(i, i + 1, relevance=1.0 - i / 40) for i in range(n)]
    # as in a store: each hit has one follower, and no two hits the same one (the row after a
    # hit is the first later row of its scope and source, so an earlier hit of the same scope
    # and source is followed by that hit, not by the same row)
    following: dict[str, MemoryChunk] = {}
    for a, b in links:
        if a < n and str(a) not in following and all(c.id != str(b) for c in following.values()):
            following[str(a)] = _hit(b, 1).chunk
    ranked = with_followers(hits, following, weight, limit=limit)
    ids = [h.chunk.id for h in ranked.hits]
    standing = [ranked.standing[i] for i in ids]
    assert standing == sorted(standing)  # what the section ranks rows by, best first
    assert len(set(ids)) == len(ids)
    assert limit is None or len(ids) <= limit
    if weight == 0 or not following:
        assert ids == [h.chunk.id for h in hits][:limit]
        return
    position = {i: p for p, i in enumerate(ids)}
    for hit in hits:
        key = hit.chunk.id
        if key in position:
            # followers go in at most one beside each better hit: a hit drops at most that far
            assert position[key] + 1 <= 2 * hit.rank - 1
    for follower, followed in ranked.after.items():
        # never above the best hit it follows, and it carries that hit's relevance or better
        best = min(
            (h for h in hits if str(h.chunk.id) in following and following[str(h.chunk.id)].id == follower),
            key=lambda h: h.rank,
        )
        assert followed == str(best.chunk.id)
        if best.chunk.id in position:
            assert position[follower] > position[best.chunk.id]
        assert ranked.hits[position[follower]].relevance == best.relevance
        assert ranked.hits[position[follower]].score <= 1.0 / (FOLLOW_C + best.rank) + 1e-12
        assert ranked.standing[follower] >= best.rank
    for hit in hits:  # a hit no follower lifted stands at its search rank: its row is reused
        if hit.chunk.id in position and hit.chunk.id not in {f.id for f in following.values()}:
            assert ranked.standing[hit.chunk.id] == hit.rank
    # every hit is kept when nothing limits the ranking
    if limit is None:
        assert {h.chunk.id for h in hits} <= set(ids)
    # with as many hits as the depth, no follower of a hit deeper than ``reach`` makes the cut:
    # the section need not ask for those
    full = with_followers(hits, following, weight, limit=n)
    deepest = reach(weight, n, n)
    assert deepest is not None
    rank_of = {str(h.chunk.id): h.rank for h in hits}
    assert all(rank_of[followed] <= deepest for followed in full.after.values())
    assert reach(weight, n + 1, n) is None  # fewer hits than the depth: every follower has room


def test_only_retrieved_conversation_hits_are_followed() -> None:
    hits = [_hit(1, 1), _hit(2, 2, source_type="operator"), _hit(3, 3)]
    assert to_follow(hits) == ["1", "3"]


# --------------------------------------------------------------------------- explain, replay


def _recorded_store(backend: Any) -> tuple[str, str]:
    store = backend.memories
    asked = store.add_chunk(
        "Ana: when does the deploy window open?", source_type="conversation", namespace="project:web"
    )
    answer = store.add_chunk(
        "Ben: Tuesday at two, after standup.", source_type="conversation", namespace="project:web"
    )
    return asked, answer


def test_explain_says_a_follower_was_delivered_for_the_turn_it_follows(tmp_path: Path) -> None:
    cfg = config()
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        asked, answer = _recorded_store(backend)
        turn(host, backend, "when is the deploy window?")
        got = explain(answer, backend=backend, host=host, session_id="s1", turn_index=1)
        assert got.verdict == "delivered" and got.evidence["follows"] == asked
        assert f"as the memory written right after {asked}" in got.summary
        # and its replay is identical
        assert replay(backend, "s1", 1, host=host).identical


def test_a_turn_recorded_before_followers_existed_replays_as_it_ran(tmp_path: Path) -> None:
    """Its recorded configuration has no ``retrieved_follow``: replayed with today's default it
    would gain the reply; it is replayed with the value that behaves as before (0)."""
    cfg = config(retrieved_follow=0)
    host = host_with(cfg)
    with backend_at(tmp_path / "m.sqlite3", cfg) as backend:
        asked, answer = _recorded_store(backend)
        projection = turn(host, backend, "when is the deploy window?")
        assert projection.section("retrieved").item_ids == (asked,)  # type: ignore[union-attr]
        conn = backend.snapshots._conn  # the record as contextplane 0.2 wrote it: no such key
        conn.execute("UPDATE turn_inputs SET config = json_remove(config, '$.context.retrieved_follow')")
        today = host_with(config())
        report = replay(backend, "s1", 1, host=today)
        assert report.identical, [(d.label, d.reasons) for d in report.changed]
        assert not any("configuration other than" in note for note in report.notes)
        # composed now, the same question gets the reply
        now = replay(backend, "s1", 1, host=today, now=True)
        assert not now.identical
        assert any("retrieved_follow" in note for note in now.notes)
        assert (
            explain(answer, backend=backend, host=today, session_id="s1", turn_index=1).verdict != "delivered"
        )


def test_a_store_whose_following_fails_still_delivers_its_hits(tmp_path: Path, caplog: Any) -> None:
    """A broken ``following`` (a third-party store, a lost connection) costs the turn its
    followers, not its hits; logged once; strict mode raises."""
    import asyncio
    import logging

    import pytest

    from contextplane import acompose_projected_context

    class Broken(SQLiteKnowledgeStore):
        def following(self, chunk_ids: Any, **options: Any) -> Any:
            raise RuntimeError("replica lost")

    with Broken(tmp_path / "m.sqlite3") as store:
        _conversation(store)
        with caplog.at_level(logging.WARNING, logger="contextplane.sections.retrieved"):
            report = _project(store, "what about the deploy plan?", 800).section("retrieved")
            again = _project(store, "and the billing plan?", 800).section("retrieved")
        assert report.item_ids and again.item_ids  # the hits are delivered
        assert "followers" not in report.meta
        assert "RuntimeError: replica lost" in report.meta["followers_fallback"]
        assert sum("following() failed" in r.getMessage() for r in caplog.records) == 1
        cfg = structure({"context": {"context_window": 200_000}})
        done = asyncio.run(
            acompose_projected_context(
                "what about the deploy plan?",
                store,
                None,
                {},
                session_id="s",
                budget_tokens=800,
                project="web",
                host=plugin_host_with([retrieved], cfg),
                record=False,
            )
        )
        assert done.section("retrieved").item_ids == report.item_ids  # type: ignore[union-attr]
        strict = structure({"context": {"context_window": 200_000}, "plugins": {"strict": True}})
        with pytest.raises(Exception, match="replica lost"):
            compose_projected_context(
                "what about the deploy plan?",
                store,
                None,
                {},
                session_id="s",
                budget_tokens=800,
                project="web",
                host=plugin_host_with([retrieved], strict),
                record=False,
            )


def test_retrieved_follow_is_a_share() -> None:
    import pytest

    from contextplane.errors import ConfigError

    for bad in (1.5, -0.1, "lots"):
        with pytest.raises(ConfigError, match="retrieved_follow"):
            structure({"context": {"retrieved_follow": bad}})
    assert structure({"context": {"retrieved_follow": 0}}).context.retrieved_follow == 0
