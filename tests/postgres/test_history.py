"""The lifecycle history and consolidation on PostgreSQL, beyond the kit: the history cannot be
rewritten, events are numbered in commit order (a position recorded under concurrent writers
replays exactly), an as-of view leaves nothing on its pooled connection, and consolidation on
write decides the same way under concurrent writers of one subject or one text."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import psycopg
import pytest

from contextplane.errors import StoreError
from contextplane.memory.consolidation import Consolidation

from .helpers import HashEmbedder


def test_the_history_refuses_update_delete_and_truncate(pg_backend_factory: Any) -> None:
    backend = pg_backend_factory()
    a = backend.memories.add_chunk("kiwi history guarded")
    backend.memories.set_review_state(a, "confirmed", by="curator")
    for statement, word in (
        ("UPDATE chunk_history SET actor = 'someone else'", "rewritten"),
        ("DELETE FROM chunk_history", "deleted"),
        ("TRUNCATE chunk_history", "deleted"),
    ):
        with pytest.raises(StoreError) as err, backend.db.connection() as conn:
            conn.execute(statement)
        assert f"chunk_history is append-only: events are never {word}" in str(err.value)
    assert [(e.event, e.actor) for e in backend.memories.history(a)] == [
        ("created", ""),
        ("review", "curator"),
    ]


def test_positions_recorded_under_concurrent_writers_replay_exactly(pg_backend_factory: Any) -> None:
    # Events are numbered in commit order: a composition's position names exactly the state
    # it read, even while other transactions that took earlier numbers are still committing.
    backend = pg_backend_factory(pool_max_size=8)
    m = backend.memories
    seed = m.add_chunks([{"content": f"kiwi seed {i}", "source_type": "extracted"} for i in range(40)])
    stop = time.monotonic() + 2.0
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        rng = random.Random(n)
        i = 0
        try:
            while time.monotonic() < stop:
                i += 1
                step = rng.randrange(4)
                target = rng.choice(seed)
                if step == 0:
                    m.add_chunk(f"kiwi writer {n} row {i}", source_type="extracted")
                elif step in (1, 2):
                    m.set_review_state(target, "confirmed" if step == 1 else "rejected", by=f"w{n}")
                else:
                    m.set_expires_at(target, None if i % 2 else "2000-01-01T00:00:00Z")
        except BaseException as exc:
            errors.append(exc)

    seen: list[tuple[Any, list[Any], list[str]]] = []

    def reader() -> None:
        try:
            while time.monotonic() < stop:
                with m.consistent_read() as view:
                    seen.append(
                        (
                            view.history_position(),
                            view.list_chunks(),
                            [c.id for c in view.list_chunks(deliverable=True)],
                        )
                    )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    threads.append(threading.Thread(target=reader))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(seen) > 10 and len({p.seq for p, _, _ in seen}) > 5  # the writers moved on between reads
    for position, rows, deliverable in seen:
        with m.as_of(position) as past:
            assert past.list_chunks() == rows, position
            assert [c.id for c in past.list_chunks(deliverable=True)] == deliverable, position


def test_an_as_of_view_leaves_its_connection_reading_the_present(pg_backend_factory: Any) -> None:
    backend = pg_backend_factory(pool_min_size=1, pool_max_size=1)  # every read on one connection
    m = backend.memories
    a = m.add_chunk("kiwi present one")
    position = m.history_position()
    b = m.add_chunk("kiwi present two")
    m.set_review_state(a, "rejected")
    gone = m.add_chunk("kiwi present doomed")
    before_gone = m.history_position()
    m.invalidate_chunk(gone, reason="wrong")
    assert m.purge() == 1
    for _ in range(8):  # psycopg prepares a statement from its fifth use on a connection
        assert m.get(b) is not None and m.get(a).review_state == "rejected"
    with m.as_of(position) as past:
        assert past.get(b) is None and past.get(a).review_state == "pending"
        assert [c.id for c in past.list_chunks(deliverable=True)] == [a]
        assert past.overlay.written_after == (b, gone) and past.overlay.purged_after == ()
    with m.as_of(before_gone) as past:
        assert past.overlay.purged_after == (gone,)
        assert past.get(gone) is None  # its row (and text) is gone: what no overlay restores
    assert m.get(b) is not None and m.get(a).review_state == "rejected"
    assert [c.id for c in m.list_chunks()] == [a, b]
    with backend.db.connection() as conn:
        assert conn.execute("SELECT to_regclass('pg_temp.asof_state')").fetchone() == (None,)


def test_as_of_refuses_a_position_from_another_store(pg_backend_factory: Any) -> None:
    m = pg_backend_factory().memories
    m.add_chunk("kiwi one")
    later = m.history_position()
    other = pg_backend_factory().memories
    with (
        pytest.raises(StoreError, match=r"history position 1 is after the latest event \(0\)"),
        other.as_of(later),
    ):
        pass


def test_consolidation_on_write(pg_backend_factory: Any) -> None:
    m = pg_backend_factory().memories
    first = m.add_chunk("The deploy window is  Tuesday", "fact", "operator", namespace="project:web")
    again = m.add_chunk("The deploy window is Tuesday ", "fact", "operator", namespace="project:web")
    assert (again, again.outcome, again.duplicate_of) == (first, "duplicate", first)
    elsewhere = m.add_chunk("The deploy window is Tuesday", "fact", "operator", namespace="project:api")
    agent = m.add_chunk("The deploy window is Tuesday", "fact", "extracted", namespace="project:web")
    assert elsewhere.outcome == "stored"  # another scope
    # another provenance is not the same memory (an agent's copy never borrows operator
    # trust): stored, and reported beside the operator's row for review
    assert (agent.outcome, agent.near_duplicates) == ("near_duplicate", ((first, 1.0),))
    assert [e.event for e in m.history(first)] == ["created", "consolidated"]
    old = m.add_chunk("staging runs on port 8080", "fact", "operator", subject="staging port")
    new = m.add_chunk("staging runs on port 9090", "fact", "operator", subject="staging port")
    assert (new.outcome, new.superseded) == ("superseded", (old,))
    assert m.get(old).superseded_by == new
    assert m.history(old)[-1].event == "superseded" and m.history(old)[-1].detail["by"] == new
    near = m.add_chunk("staging runs on port 9090 today", "fact", "operator")
    assert near.outcome == "near_duplicate" and near.near_duplicates[0][0] == new
    assert m.history(near)[0].detail["outcome"] == "near_duplicate"
    bulk = m.add_chunks([{"content": "bulk kiwi"}, {"content": "bulk  kiwi"}, {"content": "other"}])
    assert bulk[1] == bulk[0] and bulk[1].outcome == "duplicate" and bulk[2].outcome == "stored"


def test_consolidation_can_be_turned_off(pg_backend_factory: Any) -> None:
    backend = pg_backend_factory()
    backend.memories._consolidation = Consolidation(deduplicate=False, auto_supersede=False)
    m = backend.memories
    a = m.add_chunk("same text", subject="s")
    b = m.add_chunk("same text", subject="s")
    assert a != b and m.get(a).invalidated_at is None and b.outcome == "near_duplicate"


@pytest.mark.parametrize("same", ["subject", "text"])
def test_concurrent_writers_of_one_subject_or_text_leave_one_head(pg_backend_factory: Any, same: str) -> None:
    backend = pg_backend_factory(pool_max_size=8)
    m = backend.memories
    start = threading.Barrier(8)
    out: list[Any] = []
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            start.wait()
            if same == "subject":
                out.append(m.add_chunk(f"the release is version {n}", "fact", "operator", subject="release"))
            else:
                out.append(m.add_chunk("the release is version 7", "fact", "operator"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    live = m.list_chunks(deliverable=True)
    assert len(live) == 1
    if same == "subject":
        rows = m.list_chunks()
        assert len(rows) == 8 and sum(1 for c in rows if c.superseded_by is None) == 1
        assert sorted(o.outcome for o in out).count("superseded") == 7
    else:
        assert len(m.list_chunks()) == 1 and {str(o) for o in out} == {live[0].id}


def test_a_write_that_fails_leaves_no_event(pg_backend_factory: Any) -> None:
    m = pg_backend_factory().memories
    a = m.add_chunk("kiwi chain start")
    m.supersede(a, "kiwi chain next")
    position = m.history_position()
    with pytest.raises(StoreError, match="already invalidated"):
        m.supersede(a, "kiwi chain fork")
    assert m.history_position().seq == position.seq
    with psycopg.connect(m.db.url) as conn:
        count = conn.execute(f"SELECT count(*) FROM {m.db.schema}.chunks").fetchone()
    assert count == (2,)


def test_as_of_search_runs_both_legs_on_the_past(pg_backend_factory: Any) -> None:
    m = pg_backend_factory(embedder=HashEmbedder(32)).memories
    a = m.add_chunk("kiwi vector one")
    b = m.add_chunk("kiwi vector two")
    position = m.history_position()
    m.set_review_state(a, "rejected")
    c = m.add_chunk("kiwi vector three")
    with m.as_of(position) as past:
        assert {h.chunk.id for h in past.search("kiwi vector", 10)} == {a, b}
        assert {h.chunk.id for h in past.search("orchard", 10)} == {a, b}  # the vector leg alone
    assert {h.chunk.id for h in m.search("kiwi vector", 10)} == {b, c}
