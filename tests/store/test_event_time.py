"""The event time (``MemoryChunk.occurred_at``) on the embedded store: every write path, the
schema-5 migration of a schema-4 store, the attribution label, the filters, and the replay of a
turn recorded before the change."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest
from click.testing import CliRunner

from contextplane.cli import main as contextplane_main
from contextplane.errors import ValidationError
from contextplane.explain import explain, replay
from contextplane.memory.model import MemoryChunk, parse_occurred_at
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store import migrate as m
from contextplane.store.api import amemory_ingest, memory_ingest
from contextplane_sections.attribution import memory_row
from tests.explain.helpers import backend_at, config, host_with, turn

MAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
JULY = datetime(2023, 7, 14, 9, 30, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with SQLiteKnowledgeStore(tmp_path / "memory.sqlite3") as s:
        yield s


def _occurred(store: SQLiteKnowledgeStore, chunk_id: str) -> datetime | None:
    chunk = store.get(chunk_id)
    assert chunk is not None
    return chunk.occurred_at


# --------------------------------------------------------------------------- the value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2023-05-08", "occurred_at: '2023-05-08' has no timezone; for UTC write '2023-05-08T00:00:00Z'"),
        ("8 May 2023", "occurred_at: '8 May 2023' is not an ISO-8601 timestamp (e.g. 2027-01-31T12:00:00Z)"),
        (datetime(2023, 5, 8), "occurred_at: '2023-05-08T00:00:00' has no timezone; pass an aware datetime"),
        (20230508, "occurred_at: expected a datetime or ISO-8601 text, got int"),
    ],
)
def test_a_bad_event_time_is_refused_by_name(value: object, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_occurred_at(value)
    assert str(caught.value) == message


def test_an_event_time_is_kept_as_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert parse_occurred_at("2023-05-08T15:56:00+02:00") == MAY
    assert parse_occurred_at(MAY.astimezone(plus_two)) == MAY
    assert parse_occurred_at(None) is None


# --------------------------------------------------------------------------- every write path


def test_every_write_path_keeps_the_event_time(store: SQLiteKnowledgeStore) -> None:
    single = store.add_chunk("Caroline: I went to the support group", occurred_at="2023-05-08T13:56:00Z")
    batch = store.add_chunks(
        [
            {"content": "Melanie: I painted a sunrise", "occurred_at": MAY},
            {"content": "Melanie: we went camping", "occurred_at": JULY},
            {"content": "a note with no event time"},
        ]
    )
    through_api = memory_ingest(store, "Caroline: the parade was fun", occurred_at=JULY)
    through_async = asyncio.run(store.aadd_chunk("Melanie: the kids loved it", occurred_at=JULY))
    through_async_api = asyncio.run(amemory_ingest(store, "Caroline: adoption talk", occurred_at=MAY))
    corrected = store.supersede(single, "Caroline: I went to the LGBTQ support group")
    moved = asyncio.run(store.asupersede(batch[1], "Melanie: we went camping by the lake", occurred_at=MAY))
    got = [
        _occurred(store, i)
        for i in (single, *batch, through_api, through_async, through_async_api, corrected, moved)
    ]
    assert got == [MAY, MAY, JULY, None, JULY, JULY, MAY, MAY, MAY]
    chunk = store.get(corrected)
    assert chunk is not None and chunk.created_at > MAY + timedelta(days=365)  # the write time stays
    assert chunk.to_dict()["occurred_at"] == "2023-05-08T13:56:00.000000Z"


def test_a_bad_event_time_writes_nothing(store: SQLiteKnowledgeStore) -> None:
    store.add_chunk("already here")
    with pytest.raises(ValidationError, match=r"^occurred_at: '2023-05-08' has no timezone"):
        store.add_chunk("a turn", occurred_at="2023-05-08")
    with pytest.raises(ValidationError, match=r"^occurred_at: 'soon' is not an ISO-8601 timestamp"):
        store.add_chunks([{"content": "good", "occurred_at": MAY}, {"content": "bad", "occurred_at": "soon"}])
    with pytest.raises(ValidationError, match=r"^occurred_at: "):
        store.supersede("1", "a correction", occurred_at="yesterday")
    assert [c.content for c in store.list_chunks()] == ["already here"]
    assert store.get("1") is not None and store.get("1").invalidated_at is None  # type: ignore[union-attr]


def test_the_same_words_at_another_time_are_another_memory(store: SQLiteKnowledgeStore) -> None:
    first = store.add_chunk("Caroline: thanks!", source_type="conversation", occurred_at=MAY)
    later = store.add_chunk("Caroline: thanks!", source_type="conversation", occurred_at=JULY)
    again = store.add_chunk("Caroline:  thanks!", source_type="conversation", occurred_at=MAY)
    batch = store.add_chunks(
        [
            {"content": "Caroline: thanks!", "source_type": "conversation", "occurred_at": JULY},
            {"content": "Caroline: thanks!", "source_type": "conversation"},
            {"content": "Caroline: thanks!", "source_type": "conversation"},
        ]
    )
    # stored as its own row; the same words are still reported for review (a report, not a merge)
    assert first != later and later.outcome == "near_duplicate"
    assert [i for i, _ in later.near_duplicates] == [first]
    assert (again.outcome, again.duplicate_of) == ("duplicate", first)
    assert batch[0] == later and batch[2] == batch[1] not in (first, later)
    assert [_occurred(store, i) for i in (first, later, batch[1])] == [MAY, JULY, None]


def test_the_filters_apply_to_list_search_and_the_past(store: SQLiteKnowledgeStore) -> None:
    may = store.add_chunk("kiwi picnic in may", occurred_at=MAY)
    july = store.add_chunk("kiwi picnic in july", occurred_at=JULY)
    store.add_chunk("kiwi picnic some day")
    window = {"occurred_after": "2023-06-01T00:00:00Z", "occurred_before": "2023-08-01T00:00:00Z"}
    assert [c.id for c in store.list_chunks(**window)] == [july]
    assert [h.chunk.id for h in store.search("kiwi picnic", 10, **window)] == [july]
    assert [c.id for c in store.list_chunks(occurred_before=JULY)] == [may]
    position = store.history_position()
    later = store.add_chunk("kiwi picnic in july again, later", occurred_at=JULY)
    with store.as_of(position) as past:
        assert [c.id for c in past.list_chunks(**window)] == [july]
        assert [h.chunk.id for h in past.search("kiwi picnic", 10, **window)] == [july]
        assert past.get(july).occurred_at == JULY  # type: ignore[union-attr]
    with store.consistent_read() as view:
        assert [c.id for c in view.list_chunks(**window)] == [july, later]
    with pytest.raises(ValidationError, match=r"^occurred_after: 'June' is not an ISO-8601 timestamp"):
        store.list_chunks(occurred_after="June")
    with pytest.raises(ValidationError, match=r"^occurred_before: '2023-06-01' has no timezone"):
        store.search("kiwi", 5, occurred_before="2023-06-01")


def test_the_time_filter_widens_a_search_it_starves(store: SQLiteKnowledgeStore) -> None:
    """Most matches lie outside the window: the search widens its legs until it finds the few
    inside, as it does for a small scope."""
    store.add_chunks([{"content": f"kiwi harvest note {i}", "occurred_at": MAY} for i in range(400)])
    inside = store.add_chunk("kiwi harvest in july", occurred_at=JULY)
    hits = store.search("kiwi harvest", 5, occurred_after="2023-07-01T00:00:00Z")
    assert [h.chunk.id for h in hits] == [inside]


# --------------------------------------------------------------------------- the label


def _chunk(**kw: Any) -> MemoryChunk:
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    return MemoryChunk(
        id="7", content="we went camping", created_at=at, updated_at=at, memory_kind="note", **kw
    )


def test_the_label_shows_the_event_time_only_when_set() -> None:
    assert (
        memory_row(_chunk(), 1).text == "[7 | note | external | stored 2026-12-01 | global] we went camping"
    )
    dated = memory_row(_chunk(occurred_at=JULY, namespace="project:c1"), 1).text
    assert (
        dated
        == "[7 | note | external | occurred 2023-07-14 | stored 2026-12-01 | project:c1] we went camping"
    )


def test_a_composed_turn_dates_a_memory_by_when_it_happened(tmp_path: Path) -> None:
    cfg = config()
    with backend_at(tmp_path / "memory.sqlite3", cfg) as backend:
        said = backend.memories.add_chunk(
            "Melanie: we went camping at the lake", source_type="operator", occurred_at=JULY
        )
        plain = backend.memories.add_chunk("Melanie: camping gear is in the garage", source_type="operator")
        projected = turn(host_with(cfg), backend, "when did melanie go camping?")
    text = projected.text
    # the retrieved section's compact label: kind, trust and scope said once in its heading,
    # each row its id and the date it happened (else "stored" and when it was written), oldest first
    assert "unless a row says otherwise, its kind is reference, trust operator, scope global:" in text
    assert f"- [{said} | 2023-07-14] Melanie: we went camping" in text
    assert f"- [{plain} | stored {datetime.now(UTC).date().isoformat()}] Melanie: camping gear" in text
    assert text.index(f"[{said} |") < text.index(f"[{plain} |")


# --------------------------------------------------------------------------- the CLI


def _run(*args: str) -> str:
    result = CliRunner().invoke(contextplane_main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_the_cli_writes_shows_lists_and_filters_the_event_time(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    _run(
        "memory",
        "add",
        "Caroline went to the support group",
        "--occurred-at",
        "2023-05-08T13:56:00Z",
        "--db",
        db,
    )
    _run("memory", "add", "a note without an event time", "--db", db)
    _run("memory", "supersede", "1", "Caroline went to the LGBTQ support group", "--db", db)
    _run("memory", "add", "Melanie went camping", "--occurred-at", "2023-07-14T11:30:00+02:00", "--db", db)
    shown = json.loads(_run("memory", "show", "3", "--db", db, "--json"))
    assert shown["occurred_at"] == "2023-05-08T13:56:00.000000Z"
    assert "occurred_at: 2023-05-08T13:56:00.000000Z" in _run("memory", "show", "3", "--db", db)
    listed = _run("memory", "list", "--db", db, "--occurred-after", "2023-06-01T00:00:00Z")
    assert listed.splitlines()[0].split() == [
        "id", "kind", "policy", "review", "tier", "scope", "status", "occurred", "content"
    ]  # fmt: skip
    assert [line.split()[0] for line in listed.splitlines()[2:]] == ["4"]
    assert "2023-07-14T09:30:00.000000Z" in listed
    found = json.loads(
        _run("memory", "search", "went", "--db", db, "--occurred-before", "2023-06-01T00:00Z", "--json")
    )
    assert [h["chunk"]["id"] for h in found] == ["3"]


def test_a_store_without_event_times_lists_as_before(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    _run("memory", "add", "a note", "--db", db)
    assert "occurred" not in _run("memory", "list", "--db", db)
    assert "occurred" not in _run("memory", "search", "note", "--db", db)


def test_a_bad_occurred_at_on_the_command_line_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "new.sqlite3"
    result = CliRunner().invoke(
        contextplane_main, ["memory", "add", "a turn", "--occurred-at", "2023-05-08", "--db", str(db)]
    )
    assert result.exit_code == 2
    assert result.output == (
        "error: occurred_at: '2023-05-08' has no timezone; for UTC write '2023-05-08T00:00:00Z'\n"
    )
    assert not db.exists()
    listed = CliRunner().invoke(
        contextplane_main, ["memory", "list", "--occurred-after", "May", "--db", str(db)]
    )
    assert listed.exit_code == 2 and "occurred_after: 'May' is not an ISO-8601 timestamp" in listed.output
    assert not db.exists()


# --------------------------------------------------------------------------- schema 4 -> 5


def _as_schema_4(path: Path) -> None:
    """Turn a store file into the layout schema 4 wrote: what version 5 adds taken away (its
    column and index), the version stamp put back. Everything else (rows, their history, the
    log, the records) is what the previous release keeps the same way."""
    conn = apsw.Connection(str(path))
    try:
        conn.execute("DROP INDEX chunks_occurred")
        conn.execute("ALTER TABLE chunks DROP COLUMN occurred_at")
        conn.execute("PRAGMA user_version = 4")
        assert "occurred_at" not in m.column_names(conn, "chunks")
    finally:
        conn.close()


def test_a_schema_4_store_migrates_and_every_public_read_and_write_works(tmp_path: Path) -> None:
    path = tmp_path / "v4.sqlite3"
    with SQLiteKnowledgeStore(path) as old:
        a = old.add_chunk("The deploy window is Tuesday", source_type="operator", subject="deploy window")
        b = old.add_chunks([{"content": "kiwi one", "source_type": "extracted"}, {"content": "kiwi two"}])
        old.set_review_state(b[0], "rejected", by="sam")
        before = {i: old.history(i) for i in (a, *b)}
        position = old.history_position()
    _as_schema_4(path)
    conn = apsw.Connection(str(path))
    result = m.ensure_schema(conn, str(path))
    conn.close()
    assert (result.from_version, result.added_columns, result.passes_run) == (4, ("occurred_at",), ())
    with SQLiteKnowledgeStore(path) as store:
        conn = store.conn
        assert m.schema_version(conn) == 5 and "occurred_at" in m.column_names(conn, "chunks")
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks_occurred'").fetchall()
        # reads: the old rows as they were, with no event time; their history and positions kept
        assert [c.occurred_at for c in store.list_chunks()] == [None, None, None]
        assert {i: store.history(i) for i in (a, *b)} == before
        assert store.history_position().seq == position.seq
        assert [h.chunk.id for h in store.search("deploy window", 5)] == [a]
        assert store.list_chunks(occurred_after=MAY) == []
        # writes: every kind, with and without an event time
        c = store.add_chunk("kiwi three", occurred_at=MAY)
        d, e = store.add_chunks([{"content": "kiwi four", "occurred_at": JULY}, {"content": "kiwi one"}])
        assert e.outcome == "stored" and e != b[0]  # b[0] is rejected: not a duplicate target
        newer = store.supersede(a, "The deploy window is Wednesday", occurred_at=JULY)
        store.set_review_state(b[1], "confirmed", by="sam")
        store.set_expires_at(c, "2030-01-01T00:00:00Z")
        store.invalidate_chunk(d, reason="wrong")
        assert store.purge() == 1  # d
        assert [(x.id, x.occurred_at) for x in store.list_chunks(deliverable=True)] == [
            (b[1], None),
            (c, MAY),
            (e, None),
            (newer, JULY),
        ]
        assert [x.id for x in store.list_chunks(occurred_after=MAY)] == [c, newer]
        with store.as_of(position) as past:
            assert sorted(x.id for x in past.list_chunks()) == sorted([a, *b])
            assert past.get(a).invalidated_at is None  # type: ignore[union-attr]
        assert [ev.event for ev in store.history(a)] == ["created", "superseded"]
    conn = apsw.Connection(str(path))
    try:
        assert m.ensure_schema(conn, str(path)).changed is False  # a second open does nothing
    finally:
        conn.close()


def test_a_read_only_schema_4_store_names_the_migration(tmp_path: Path) -> None:
    path = tmp_path / "v4.sqlite3"
    SQLiteKnowledgeStore(path).close()
    _as_schema_4(path)
    with pytest.raises(Exception, match=r"bring it to schema version 5"):
        SQLiteKnowledgeStore(path, read_only=True)


def test_a_turn_recorded_at_schema_4_replays_byte_identical_after_the_migration(tmp_path: Path) -> None:
    """The turn is recorded, the file is put back in schema 4's layout, then opened by this
    release, which migrates it: replaying the turn gives the same bytes (the migration adds the
    event time and changes nothing a turn read), and a row written afterwards with an event
    time is named as what changed since. (A turn recorded by the release before the compact
    attribution replays as changed, naming the version: tests/sections/test_compact_attribution.py.)"""
    path = tmp_path / "v4.sqlite3"
    cfg = config()
    host = host_with(cfg)
    with backend_at(path, cfg) as backend:
        kept = backend.memories.add_chunk("The deploy window is Tuesday 14:00 UTC", source_type="operator")
        backend.memories.add_chunk("Unrelated note about lunch", source_type="operator")
        first = turn(host, backend, "when is the deploy window?")
    assert kept in {i for s in first.sections for i in s.item_ids}
    _as_schema_4(path)
    with backend_at(path, cfg) as backend:
        assert m.schema_version(backend.memories.conn) == 5
        report = replay(backend, "s1", 1, host=host)
        assert report.identical, [(d.label, d.reasons) for d in report.changed]
        later = backend.memories.add_chunk(
            "The deploy window moved to Wednesday", source_type="operator", occurred_at=JULY
        )
        assert replay(backend, "s1", 1, host=host).identical
        now = replay(backend, "s1", 1, host=host, now=True)
        assert not now.identical
        assert explain(kept, backend=backend, host=host, session_id="s1", turn_index=1).verdict == "delivered"
        second = turn(host, backend, "when is the deploy window?", index=2)
        assert f"[{later} | 2023-07-14] The deploy window moved" in second.text
        assert replay(backend, "s1", 2, host=host).identical


def test_the_memory_chunk_has_the_event_time_last() -> None:
    """Positional construction is not part of the API, but the new attribute goes last so any
    that exists keeps working."""
    assert attrs.fields(MemoryChunk)[-1].name == "occurred_at"
