"""Schema 3 -> 4: a version-3 store's ``chunk_history`` converted into the rows' own history.

The stores here are built as version 3 built them (commit 6369892): its schema, its event
writes (``record_created`` / ``record_change`` / ``record_purged``, each after its change, the
state *after* it), and, for a store migrated from version 1, its two baseline triggers, which
wrote a row's ``migrated`` event lazily just before its first change. What each row's history
and each position read as under version 3 is taken from the unconverted table by version 3's
own reading rules (``v3_events``, ``v3_position_at``), and the state of the store at each
position from a copy of the file taken then. Then the store is opened (which converts it) and
every read is compared with that, and every write is used on the converted rows."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest
from click.testing import CliRunner

from contextplane.cli import main as contextplane_main
from contextplane.errors import StoreError
from contextplane.explain import explain, replay
from contextplane.memory.consolidation import WriteOutcome, content_hash
from contextplane.memory.history import HISTORY_START, MIGRATION_NOTE, HistoryEvent, HistoryPosition
from contextplane.memory.model import SUPERSEDED_PREFIX, format_timestamp
from contextplane.memory.stamps import creation_stamps
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store import migrate as m
from contextplane.store import sqlite as store_sqlite
from contextplane.store.migrate import V1_SCHEMA_SQL
from tests.explain.helpers import backend_at, config, host_with, turn

WEB = "project:web"
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
#: What version 3's ``migrated`` events said (the note was reworded with version 4).
V3_MIGRATION_NOTE = "history starts at the migration to schema 3; changes before it were not recorded"

_STATE = "review_state, expires_at, invalidated_at, invalidation_reason, updated_at"
_V3_INSERT = f"INSERT INTO chunk_history(chunk_id, at, event, actor, {_STATE}, detail)"
_V3_COLUMNS = f"seq, chunk_id, at, event, actor, {_STATE}, detail"

#: Version 3's baseline triggers as 6369892's ``start_history`` installed them.
_V3_BASELINE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS chunks_migrated_baseline BEFORE UPDATE OF review_state, "
    "expires_at, invalidated_at, invalidation_reason, updated_at ON chunks "
    "WHEN old.id <= {high} AND old.review_state IS NOT NULL "
    "AND NOT EXISTS (SELECT 1 FROM chunk_history WHERE chunk_id = old.id) BEGIN "
    f"{_V3_INSERT} VALUES (old.id, {{at}}, 'migrated', '', old.review_state, old.expires_at, "
    "old.invalidated_at, old.invalidation_reason, old.updated_at, {detail}); END",
    "CREATE TRIGGER IF NOT EXISTS chunk_history_migrated_baseline BEFORE INSERT ON chunk_history "
    "WHEN new.event != 'migrated' AND new.chunk_id <= {high} "
    "AND NOT EXISTS (SELECT 1 FROM chunk_history WHERE chunk_id = new.chunk_id) BEGIN "
    f"{_V3_INSERT} SELECT id, {{at}}, 'migrated', '', review_state, expires_at, invalidated_at, "
    "invalidation_reason, updated_at, {detail} FROM chunks WHERE id = new.chunk_id; END",
)
_V3_TRIGGERS = (
    "chunk_history_no_update",
    "chunk_history_no_delete",
    "chunks_migrated_baseline",
    "chunk_history_migrated_baseline",
)

#: 6369892's purge: expired rows and rows invalidated for a reason other than supersession,
#: never a superseded row nor one that superseded another.
_PURGE_WHERE = f"""((expires_at IS NOT NULL AND expires_at <= :now)
    OR (invalidated_at IS NOT NULL AND substr(coalesce(invalidation_reason, ''), 1, 14) != '{SUPERSEDED_PREFIX}'))
    AND NOT (invalidated_at IS NOT NULL AND substr(coalesce(invalidation_reason, ''), 1, 14) = '{SUPERSEDED_PREFIX}')
    AND CAST(id AS TEXT) NOT IN (SELECT substr(invalidation_reason, 15) FROM chunks
        WHERE substr(invalidation_reason, 1, 14) = '{SUPERSEDED_PREFIX}')"""

_INSERT_NAMES = (
    "content, domain, source_type, memory_kind, delivery_policy, review_state, expires_at, heading, "
    "source, subject, namespace, epoch, created_at, updated_at, content_hash"
)
_INHERITED = ("domain", "memory_kind", "delivery_policy", "heading", "subject", "namespace", "epoch")


# --------------------------------------------------------------------------- version 3, as it wrote


@dataclass
class V3Store:
    """A schema-3 store written the way 6369892's store wrote it, on a clock of our own (each
    step one minute later), so the times are known and the positions can be named."""

    path: Path
    conn: apsw.Connection
    now: datetime = T0
    #: Copies of the file at named positions, with the position as version 3 read it.
    positions: dict[str, HistoryPosition] = field(default_factory=dict)
    copies: dict[str, Path] = field(default_factory=dict)

    def tick(self) -> str:
        self.now += timedelta(minutes=1)
        return format_timestamp(self.now)

    @contextlib.contextmanager
    def txn(self) -> Iterator[apsw.Connection]:
        with m.write_transaction(self.conn):
            yield self.conn

    def add(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        details: Mapping[int, Mapping[str, Any]] | None = None,
        inherit_from: int | None = None,
    ) -> list[int]:
        """``_insert`` then ``record_created`` (one statement for the batch unless a row has a
        consolidation detail; ``details`` by position in ``rows``). The caller's transaction."""
        stamp = self.tick()
        conn = self.conn
        first = 1 + int(
            m.scalar(
                conn,
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunks'), 0), "
                "coalesce((SELECT max(id) FROM chunks), 0))",
            )
        )
        values = []
        for row in rows:
            row = dict(row)
            if inherit_from is not None:
                old = conn.execute(
                    f"SELECT {', '.join(_INHERITED)} FROM chunks WHERE id = ?", (inherit_from,)
                ).fetchone()
                row = {**dict(zip(_INHERITED, old, strict=True)), **row}
            stamps = creation_stamps(
                domain=row.get("domain", "general"),
                source_type=row.get("source_type", ""),
                memory_kind=row.get("memory_kind"),
                delivery_policy=row.get("delivery_policy"),
                review_state=row.get("review_state"),
                expires_at=row.get("expires_at"),
                now=self.now,
            )
            expires = None if stamps.expires_at is None else format_timestamp(stamps.expires_at)
            values.append(
                (
                    row["content"],
                    row.get("domain", "general"),
                    row.get("source_type", ""),
                    stamps.memory_kind,
                    stamps.delivery_policy,
                    stamps.review_state,
                    expires,
                    row.get("heading", ""),
                    row.get("source", ""),
                    row.get("subject", ""),
                    row.get("namespace", ""),
                    row.get("epoch", ""),
                    stamp,
                    stamp,
                    content_hash(row["content"]),
                )
            )
        conn.executemany(f"INSERT INTO chunks({_INSERT_NAMES}) VALUES ({', '.join('?' * 15)})", values)
        ids = list(range(first, first + len(rows)))
        assert int(conn.last_insert_rowid()) == ids[-1]
        if not details:
            conn.execute(
                f"{_V3_INSERT} SELECT id, created_at, 'created', source_type, {_STATE}, NULL "
                "FROM chunks WHERE id >= ? AND id <= ? ORDER BY id",
                (ids[0], ids[-1]),
            )
        else:
            by_id = {ids[i]: json.dumps(dict(d)) for i, d in details.items()}
            conn.executemany(
                f"{_V3_INSERT} SELECT id, created_at, 'created', source_type, {_STATE}, ? FROM chunks "
                "WHERE id = ?",
                [(by_id.get(i), i) for i in ids],
            )
        return ids

    def _change(
        self,
        chunk_id: int,
        sets: str,
        params: Sequence[Any],
        event: str,
        actor: str,
        detail: Mapping[str, Any] | None = None,
        at: str | None = None,
    ) -> None:
        """The change, then ``record_change`` with the state read back (at: the row's ``updated_at``)."""
        self.conn.execute(f"UPDATE chunks SET {sets} WHERE id = ?", (*params, chunk_id))
        self.record_change(chunk_id, event, actor, detail=detail, at=at)

    def record_change(
        self,
        chunk_id: int,
        event: str,
        actor: str,
        *,
        detail: Mapping[str, Any] | None = None,
        at: str | None = None,
    ) -> None:
        text = None if detail is None else json.dumps(dict(detail))
        self.conn.execute(
            f"{_V3_INSERT} SELECT id, coalesce(?, updated_at), ?, ?, {_STATE}, ? FROM chunks WHERE id = ?",
            (at, event, actor, text, chunk_id),
        )

    def review(self, chunk_id: int, state: str, by: str) -> None:
        with self.txn():
            self._change(chunk_id, "review_state = ?, updated_at = ?", (state, self.tick()), "review", by)

    def expire(self, chunk_id: int, when: datetime | None, by: str = "") -> None:
        value = None if when is None else format_timestamp(when)
        with self.txn():
            self._change(chunk_id, "expires_at = ?, updated_at = ?", (value, self.tick()), "expiry", by)

    def _invalidate(self, chunk_id: int, reason: str, by: str, successor: int | None = None) -> None:
        stamp = self.tick()
        text = f"{SUPERSEDED_PREFIX}{successor}" if successor is not None else reason
        event = "superseded" if successor is not None else "invalidated"
        detail = {"by": str(successor)} if successor is not None else None
        sets = "invalidated_at = ?, invalidation_reason = ?, updated_at = ?"
        self._change(chunk_id, sets, (stamp, text, stamp), event, by, detail)

    def invalidate(self, chunk_id: int, reason: str, by: str = "") -> None:
        with self.txn():
            self._invalidate(chunk_id, reason, by)

    def write(self, row: Mapping[str, Any], *, detail: Mapping[str, Any] | None = None) -> int:
        with self.txn():
            (new,) = self.add([row], details={0: detail} if detail else None)
        return new

    def supersede(self, old: int, content: str, by: str = "", **row: Any) -> int:
        """``supersede``: the newer row (inheriting the old one's scope and kind) with
        ``{"supersedes": old}``, then the old one invalidated, in one transaction."""
        with self.txn():
            (new,) = self.add(
                [{"content": content, **row}], details={0: {"supersedes": str(old)}}, inherit_from=old
            )
            self._invalidate(old, "", by, successor=new)
        return new

    def write_same_subject(self, row: Mapping[str, Any], old: int) -> int:
        """A write naming the subject ``old`` holds: stored with its outcome, and ``old``
        superseded by it (at the write's time, actor its provenance)."""
        with self.txn():
            first = self.next_id()
            outcome = WriteOutcome(str(first), "superseded", superseded=(str(old),))
            (new,) = self.add([row], details={0: outcome.detail()})
            stamp = m.scalar(self.conn, "SELECT created_at FROM chunks WHERE id = ?", (new,))
            self.conn.execute(
                "UPDATE chunks SET invalidated_at = ?, invalidation_reason = ?, updated_at = ? WHERE id = ?",
                (stamp, f"{SUPERSEDED_PREFIX}{new}", stamp, old),
            )
            self.record_change(
                old,
                "superseded",
                str(row.get("source_type", "")),
                detail={"by": str(new), "rule": "same subject, scope and kind"},
            )
        return new

    def duplicate(self, found: int, source_type: str) -> None:
        """An exact duplicate write: no row, a ``consolidated`` event on the row it returned."""
        with self.txn():
            self.record_change(
                found,
                "consolidated",
                source_type,
                at=self.tick(),
                detail={"outcome": "duplicate", "message": "an exact duplicate write returned this row"},
            )

    def purge(self) -> list[int]:
        now = self.tick()
        with self.txn():
            gone = [
                int(r[0])
                for r in self.conn.execute(
                    f"SELECT id FROM chunks WHERE {_PURGE_WHERE} ORDER BY id", {"now": now}
                )
            ]
            self.conn.execute(
                f"{_V3_INSERT} SELECT id, :purge_at, 'purged', 'purge', {_STATE}, NULL FROM chunks "
                f"WHERE {_PURGE_WHERE} ORDER BY id",
                {"now": now, "purge_at": now},
            )
            self.conn.execute(f"DELETE FROM chunks WHERE {_PURGE_WHERE}", {"now": now})
        return gone

    def next_id(self) -> int:
        return 1 + int(
            m.scalar(self.conn, "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunks'), 0)")
        )

    def mark(self, name: str) -> HistoryPosition:
        """A position as version 3's ``history_position`` gave it (the largest seq, at this
        time), and a copy of the file as it is now."""
        self.tick()
        position = HistoryPosition(v3_latest_seq(self.conn), self.now)
        self.positions[name] = position
        copy = self.path.with_name(f"{self.path.stem}.{name}.sqlite3")
        self.conn.execute("VACUUM INTO ?", (str(copy),))
        self.copies[name] = copy
        self.tick()
        return position

    def close(self) -> None:
        self.conn.close()


def _create_v3_objects(conn: apsw.Connection) -> None:
    """What 6369892's ``_ensure_v3_objects`` made: the history table, the content key, its indexes."""
    conn.execute(m.V3_HISTORY_SQL)
    m._ensure_v3_objects(conn)


def fresh_v3(path: Path) -> V3Store:
    """6369892's ``create_fresh`` then ``prepare_read_path``: a schema-3 store with no rows."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL").fetchall()
    stamp = f"fresh {format_timestamp(T0)}"
    with m.write_transaction(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS _kb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(m._CHUNKS_V2_SQL)
        m._ensure_fts(conn)
        _create_v3_objects(conn)
        for name in (*m.PASSES, *m.V3_PASSES):
            m._meta_set(conn, name, stamp)
        conn.execute("PRAGMA user_version = 3")
    m.prepare_read_path(conn, str(path))
    return V3Store(path, conn)


#: (content, domain, source_type, namespace, subject) of the version-1 rows, ids 1..
LEGACY: list[tuple[str, str, str, str, str]] = [
    ("Deploy window is Tuesday", "hot", "operator", WEB, "deploys"),  # 1
    ("The deploy tool is Jenkins", "fact", "operator", WEB, "tool"),  # 2
    ("Standup is at 09:30", "general", "conversation", "", ""),  # 3: pending
    ("A wrong claim about caches", "fact", "operator", "", ""),  # 4
    ("Replica lag spikes during migrations", "general", "extracted", WEB, ""),  # 5
    ("The staging database is db-stage-2", "fact", "operator", WEB, ""),  # 6
]


def migrated_v3(path: Path) -> V3Store:
    """A version-1 store taken to schema 3 as 6369892 took it: the v2 columns and backfill,
    the history table and content key, the history started (when, up to which id, and the two
    baseline triggers) and every row keyed; no event written."""
    conn = apsw.Connection(str(path))
    conn.execute(V1_SCHEMA_SQL)
    legacy_at = format_timestamp(T0 - timedelta(days=100))
    with m.write_transaction(conn):
        conn.executemany(
            "INSERT INTO chunks(content, domain, source_type, namespace, subject, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(*row, legacy_at, legacy_at) for row in LEGACY],
        )
    conn.execute("PRAGMA journal_mode = WAL").fetchall()
    m.upgrade_schema(conn)
    m.run_backfill(conn)
    with m.write_transaction(conn):
        _create_v3_objects(conn)
        started = format_timestamp(T0)
        m._meta_set(conn, m.HISTORY_STARTED_KEY, started)
        m._meta_set(conn, m.HISTORY_BASELINE_KEY, str(len(LEGACY)))
        literals = {
            "high": str(len(LEGACY)),
            "at": f"'{started}'",
            "detail": "'" + json.dumps({"note": V3_MIGRATION_NOTE}) + "'",
        }
        for body in _V3_BASELINE_TRIGGERS:
            conn.execute(body.format(**literals))
        m._meta_set(conn, m.HISTORY_BACKFILL, started)
    m.migrate_content_hashes(conn)
    conn.execute("PRAGMA user_version = 3")
    m.prepare_read_path(conn, str(path))
    assert m.pending_passes(conn) == [] and m.pending_v3_passes(conn) == []
    return V3Store(path, conn)


# --------------------------------------------------------------------------- version 3, as it read


def v3_latest_seq(conn: apsw.Connection) -> int:
    return int(m.scalar(conn, "SELECT coalesce(max(seq), 0) FROM chunk_history"))


@dataclass(frozen=True)
class V3Event:
    seq: int
    at: str
    event: str
    actor: str
    review_state: str | None
    expires_at: str | None
    invalidated_at: str | None
    invalidation_reason: str | None
    updated_at: str | None
    detail: dict[str, Any]


def v3_events(conn: apsw.Connection, chunk_id: int) -> list[V3Event]:
    """6369892's ``history.events``: the row's events by seq, a ``migrated`` one read at
    ``HISTORY_START``; a baseline row with none is read from its cells."""
    rows = list(
        conn.execute(f"SELECT {_V3_COLUMNS} FROM chunk_history WHERE chunk_id = ? ORDER BY seq", (chunk_id,))
    )
    found = [
        V3Event(
            HISTORY_START if r[3] == "migrated" else int(r[0]),
            r[2],
            r[3],
            r[4] or "",
            *r[5:10],
            json.loads(r[10]) if r[10] else {},
        )
        for r in rows
    ]
    if found:
        return found
    high, started = m.meta_get(conn, m.HISTORY_BASELINE_KEY), m.meta_get(conn, m.HISTORY_STARTED_KEY)
    if high is None or started is None or chunk_id > int(high):
        return []
    cells = conn.execute(f"SELECT {_STATE} FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
    if cells is None:
        return []
    return [V3Event(HISTORY_START, started, "migrated", "", *cells, {"note": V3_MIGRATION_NOTE})]


def v3_position_at(conn: apsw.Connection, when: datetime) -> int:
    row = conn.execute(
        "SELECT seq FROM chunk_history WHERE at <= ? AND event != 'migrated' ORDER BY seq DESC LIMIT 1",
        (format_timestamp(when),),
    ).fetchone()
    return 0 if row is None else int(row[0])


def as_read(events: Sequence[HistoryEvent]) -> list[V3Event]:
    """What ``store.history`` says, in the terms of a version-3 event. The note of a
    ``migrated`` event is the one sentence version 4 says (reworded, not stored per row)."""
    out = []
    for e in events:
        detail = dict(e.detail)
        if e.event == "migrated":
            assert detail == {"note": MIGRATION_NOTE}
            detail = {"note": V3_MIGRATION_NOTE}

        def text(value: datetime | None) -> str | None:
            return None if value is None else format_timestamp(value)

        out.append(
            V3Event(
                e.seq,
                format_timestamp(e.at),
                e.event,
                e.actor,
                e.review_state,
                text(e.expires_at),
                text(e.invalidated_at),
                e.invalidation_reason,
                text(e.updated_at),
                detail,
            )
        )
    return out


@dataclass
class V3Reading:
    """Everything version 3 read from the store, taken before it is converted."""

    histories: dict[int, list[V3Event]]
    latest: int
    positions: dict[str, HistoryPosition]
    copies: dict[str, Path]
    #: The position version 3 gave a time, for each mark's time and a few between.
    at_times: dict[datetime, int]
    purged: dict[int, int]  # id -> purged seq

    def purged_after(self, seq: int) -> set[int]:
        return {i for i, p in self.purged.items() if p > seq and i <= self.max_id_at(seq)}

    def max_id_at(self, seq: int) -> int:
        return max((i for i, h in self.histories.items() if h and h[0].seq <= seq), default=0)


def read_v3(v3: V3Store) -> V3Reading:
    conn = v3.conn
    ids = [
        int(r[0])
        for r in conn.execute("SELECT id FROM chunks UNION SELECT chunk_id FROM chunk_history ORDER BY 1")
    ]
    histories = {i: v3_events(conn, i) for i in ids}
    purged = {i: h[-1].seq for i, h in histories.items() if h and h[-1].event == "purged"}
    times = [p.at for p in v3.positions.values()]
    times += [p.at - timedelta(seconds=30) for p in v3.positions.values()]
    at_times = {t: v3_position_at(conn, t) for t in times}
    return V3Reading(histories, v3_latest_seq(conn), dict(v3.positions), dict(v3.copies), at_times, purged)


# --------------------------------------------------------------------------- comparing


def dump(path: Path) -> dict[str, Any]:
    """Everything in the file that a conversion could change: the schema, every table's rows
    (full-text shadow tables too) and the header version."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        out: dict[str, Any] = {"user_version": m.schema_version(conn)}
        master = sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"), key=repr)
        out["schema"] = master
        for kind, name, _, sql in master:
            if kind == "table" and not (sql or "").upper().startswith("CREATE VIRTUAL"):
                out[name] = sorted(conn.execute(f'SELECT * FROM "{name}"'), key=repr)
        return out
    finally:
        conn.close()


def chunk_state(chunk: Any) -> dict[str, Any] | None:
    return None if chunk is None else chunk.to_dict()


def hits(view: Any, query: str) -> list[tuple[str, float]]:
    return [(h.chunk.id, round(h.score, 9)) for h in view.search(query, k=50)]


QUERIES = ("deploy window", "deploy tool", "standup", "caches", "replica lag", "staging database")


def expected_then(reading: V3Reading, name: str, tmp: Path) -> Path:
    """The store as it was at a mark: the copy taken then, less the rows purged since (their
    text is gone; no overlay can give it back, and version 3's could not either)."""
    position = reading.positions[name]
    target = tmp / f"then-{name}.sqlite3"
    source = apsw.Connection(str(reading.copies[name]))
    source.execute("VACUUM INTO ?", (str(target),))
    source.close()
    gone = sorted(reading.purged_after(position.seq))
    conn = apsw.Connection(str(target))
    assert m.schema_version(conn) == 3
    with m.write_transaction(conn):
        conn.execute("DELETE FROM chunks WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(gone),))
    conn.close()
    return target


def assert_as_of_matches(store: SQLiteKnowledgeStore, reading: V3Reading, tmp: Path) -> None:
    ids = sorted(reading.histories)
    for name, position in reading.positions.items():
        with SQLiteKnowledgeStore(expected_then(reading, name, tmp)) as then_store:
            assert then_store.history_position().seq == position.seq
            with then_store.as_of(position) as want, store.as_of(position) as got:
                assert got.history_position() == position
                assert got.overlay is not None
                assert set(got.overlay.purged_after) == {str(i) for i in reading.purged_after(position.seq)}
                for chunk_id in ids:
                    assert chunk_state(got.get(str(chunk_id))) == chunk_state(want.get(str(chunk_id))), (
                        name,
                        chunk_id,
                    )
                for filters in (
                    {"deliverable": True},
                    {},
                    {"delivery_policy": "always"},
                    {"deliverable": True, "namespaces": [WEB]},
                ):
                    assert [c.to_dict() for c in got.list_chunks(**filters)] == [
                        c.to_dict() for c in want.list_chunks(**filters)
                    ], (name, filters)
                found = {query: hits(got, query) for query in QUERIES}
                assert found == {query: hits(want, query) for query in QUERIES}, name
                assert sum(map(len, found.values())) >= 3, (name, found)  # the searches find something
    for when, seq in reading.at_times.items():
        with store.as_of(when) as view:
            assert view.history_position().seq == seq, when


def assert_histories_match(store: SQLiteKnowledgeStore, reading: V3Reading) -> None:
    for chunk_id, want in reading.histories.items():
        assert want, chunk_id
        assert as_read(store.history(str(chunk_id))) == want, chunk_id


def assert_converted(path: Path) -> None:
    conn = apsw.Connection(str(path))
    try:
        assert m.schema_version(conn) == m.SCHEMA_VERSION
        assert not m.table_exists(conn, "chunk_history")
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert not triggers & set(_V3_TRIGGERS)
        assert {"chunks_history_append", "chunks_history_kept", "chunk_log_no_update"} <= triggers
        assert not m.table_exists(conn, "v3_histories")
    finally:
        conn.close()


# --------------------------------------------------------------------------- the stores


def build_fresh(path: Path) -> V3Store:
    """A schema-3 store that was created at version 3: every lifecycle change version 3 wrote."""
    v3 = fresh_v3(path)
    with v3.txn():
        v3.add(
            [
                {
                    "content": "Deploy window is Tuesday",
                    "domain": "hot",
                    "source_type": "operator",
                    "namespace": WEB,
                    "subject": "deploys",
                    "memory_kind": "standing",
                },  # 1: always on
                {
                    "content": "The deploy tool is Jenkins",
                    "domain": "fact",
                    "source_type": "operator",
                    "namespace": WEB,
                    "subject": "tool",
                },  # 2
                {"content": "Standup is at 09:30", "source_type": "conversation"},  # 3: pending
                {
                    "content": "Replica lag spikes during migrations",
                    "source_type": "extracted",
                    "namespace": WEB,
                },  # 4
                {"content": "Caches are flushed nightly", "domain": "fact", "source_type": "operator"},  # 5
                {
                    "content": "The staging database is db-stage-2",
                    "domain": "fact",
                    "source_type": "operator",
                    "namespace": WEB,
                },  # 6
            ]
        )
    near = WriteOutcome("7", "near_duplicate", near_duplicates=(("5", 0.91),))
    assert (
        v3.write(
            {"content": "Caches are flushed every night", "domain": "fact", "source_type": "operator"},
            detail=near.detail(),
        )
        == 7
    )
    v3.review(3, "confirmed", "priya")
    v3.mark("a")
    v3.expire(4, v3.now + timedelta(hours=5), "priya")
    v3.duplicate(2, "operator")
    v3.invalidate(5, "found wrong", "sam")
    assert v3.supersede(2, "The deploy tool is Argo", by="sam", source_type="operator") == 8
    same = {
        "content": "Deploy window is Thursday",
        "domain": "hot",
        "source_type": "operator",
        "namespace": WEB,
        "subject": "deploys",
        "memory_kind": "standing",
    }
    assert v3.write_same_subject(same, 1) == 9
    v3.mark("b")
    v3.expire(4, None, "priya")  # cleared
    v3.expire(7, v3.now + timedelta(minutes=3))  # lapses before the purge
    v3.review(3, "rejected", "sam")
    v3.tick(), v3.tick(), v3.tick()
    assert v3.purge() == [5, 7]
    v3.mark("c")
    return v3


def test_a_fresh_v3_store_converts_with_every_event_and_position_kept(tmp_path: Path) -> None:
    path = tmp_path / "v3.sqlite3"
    v3 = build_fresh(path)
    v3.review(9, "rejected", "sam")
    v3.expire(6, v3.now - timedelta(days=1), "priya")
    v3.mark("d")
    reading = read_v3(v3)
    v3.close()
    # what version 3 held, as the builder meant it
    events = {i: [e.event for e in h] for i, h in reading.histories.items()}
    assert events == {
        1: ["created", "superseded"],
        2: ["created", "consolidated", "superseded"],
        3: ["created", "review", "review"],
        4: ["created", "expiry", "expiry"],
        5: ["created", "invalidated", "purged"],
        6: ["created", "expiry"],
        7: ["created", "expiry", "purged"],
        8: ["created"],
        9: ["created", "review"],
    }
    assert reading.histories[8][0].detail == {"supersedes": "2"}
    assert reading.histories[9][0].detail["superseded"] == ["1"]
    assert reading.histories[7][0].detail["near_duplicates"] == [["5", 0.91]]
    assert reading.histories[1][1].detail == {"by": "9", "rule": "same subject, scope and kind"}
    assert reading.histories[4][2].expires_at is None and reading.histories[4][1].expires_at is not None
    assert reading.latest == 22
    assert [p.seq for p in reading.positions.values()] == [8, 15, 20, 22]

    with SQLiteKnowledgeStore(path) as store:
        assert store.history_position().seq == reading.latest
        assert_histories_match(store, reading)
        assert_as_of_matches(store, reading, tmp_path)
        # the raw layout: one log row per version-3 event but the migrated ones, every seq kept
        log = store.conn.execute("SELECT seq, kind FROM chunk_log ORDER BY seq").fetchall()
        assert [s for s, _ in log] == list(range(1, 23))
        gone = store.conn.execute("SELECT chunk_id, created_seq, purged_seq FROM chunk_gone ORDER BY 1")
        assert gone.fetchall() == [(5, 5, reading.purged[5]), (7, 7, reading.purged[7])]
    assert_converted(path)
    use_every_write(path, reading, tmp_path)


def use_every_write(path: Path, reading: V3Reading, tmp: Path) -> None:
    """Every public write on converted rows, each appending above the version-3 seqs, and the
    version-3 history and positions unchanged by them."""
    latest = reading.latest
    with SQLiteKnowledgeStore(path) as store:
        fresh = store.add_chunk("Canary deploys run at noon", "general", "operator", namespace=WEB)
        assert fresh.outcome == "stored" and int(fresh) == 10
        (created,) = store.history(fresh)
        assert created.event == "created" and created.seq == latest + 1
        dup = store.add_chunk("The staging database is  db-stage-2", "fact", "operator", namespace=WEB)
        assert dup.outcome == "stored"  # 6 expired under version 3: a copy is a new row
        dup = store.add_chunk("Replica lag spikes during  migrations", "general", "extracted", namespace=WEB)
        assert (dup.outcome, str(dup)) == ("duplicate", "4")
        by_subject = store.add_chunk(
            "The deploy tool is Flux", "fact", "operator", namespace=WEB, subject="tool"
        )
        assert by_subject.outcome == "superseded" and by_subject.superseded == ("8",)
        store.set_review_state("3", "confirmed", by="priya")
        store.set_expires_at("4", datetime.now(UTC) + timedelta(days=1), by="priya")
        store.set_expires_at("4", None, by="priya")
        store.invalidate_chunk("6", reason="moved to db-stage-3", by="sam")
        successor = store.supersede("9", "Deploy window is Friday")
        assert store.purge() == 1  # 6: invalidated (and expired); 3 and 9 are not purgeable
        for chunk_id, added in {
            "4": ["consolidated", "expiry", "expiry"],
            "8": ["superseded"],
            "3": ["review"],
            "9": ["superseded"],
            "6": ["invalidated", "purged"],
        }.items():
            read = store.history(chunk_id)
            old, new = (
                read[: len(reading.histories[int(chunk_id)])],
                read[len(reading.histories[int(chunk_id)]) :],
            )
            assert as_read(old) == reading.histories[int(chunk_id)], chunk_id
            assert [e.event for e in new] == added, chunk_id
            assert all(e.seq > latest for e in new), chunk_id
        assert [e.event for e in store.history("3")[-2:]] == ["review", "review"]
        assert store.history("3")[-1].review_state == "confirmed"
        assert store.history(successor)[0].detail == {"supersedes": "9"}
        assert store.get("6") is None and store.history("6")[-1].event == "purged"
        untouched = [i for i in reading.histories if str(i) not in ("3", "4", "6", "8", "9")]
        for other in untouched:
            assert as_read(store.history(str(other))) == reading.histories[other], other
        # the version-3 positions read as they did, whatever was written since
        for name, position in reading.positions.items():
            with store.as_of(position) as then:
                assert then.get(str(fresh)) is None and then.get(successor) is None, name
                assert then.history_position() == position
    assert_as_of_still(path, reading, tmp)
    # memory list and show, on the converted store
    runner = CliRunner()
    listed = runner.invoke(contextplane_main, ["memory", "list", "--db", str(path)])
    assert listed.exit_code == 0, listed.output
    status = {line.split()[0]: line.split()[6] for line in listed.output.splitlines()[2:] if line.strip()}
    assert status["1"] == "superseded→9" and status["2"] == "superseded→8" and status["8"] == "superseded→12"
    assert status["3"] == "active" and status["4"] == "pending"
    assert "5" not in status and "7" not in status
    shown = runner.invoke(contextplane_main, ["memory", "show", "2", "--db", str(path)])
    assert shown.exit_code == 0, shown.output
    lines = [line.strip() for line in shown.output.split("history:")[1].splitlines() if line.strip()]
    assert [int(re.match(r"#(\d+) ", line)[1]) for line in lines] == [e.seq for e in reading.histories[2]]
    assert lines[1].endswith("consolidated (by operator); an exact duplicate write returned this row")
    assert lines[2].endswith("superseded by 8 (by sam)")
    gone = runner.invoke(contextplane_main, ["memory", "show", "7", "--db", str(path)])
    assert gone.exit_code != 0
    said = " ".join(gone.output.split())
    assert "memory 7 was purged; its history: #7 " in said and said.endswith(
        "purged (row deleted) (by purge)"
    )
    assert [int(s) for s in re.findall(r"#(\d+) ", said)] == [e.seq for e in reading.histories[7]]


def assert_as_of_still(path: Path, reading: V3Reading, tmp: Path) -> None:
    """The as-of reads of the version-3 positions once the store has moved on: rows written,
    changed and purged since are hidden or read as they were (6 is gone now)."""
    later = {**reading.purged, 6: reading.latest + 100}
    with SQLiteKnowledgeStore(path) as store:
        moved = V3Reading(
            reading.histories, reading.latest, reading.positions, reading.copies, reading.at_times, later
        )
        (tmp / "later").mkdir()
        assert_as_of_matches(store, moved, tmp / "later")


# --------------------------------------------------------------------------- migrated from version 1


def build_migrated(path: Path) -> V3Store:
    v3 = migrated_v3(path)
    v3.review(3, "confirmed", "priya")  # the migrated event by the UPDATE trigger, then the change
    v3.review(3, "rejected", "sam")
    v3.duplicate(2, "operator")  # the migrated event by the insert trigger (no UPDATE)
    v3.mark("a")
    v3.invalidate(4, "found wrong", "sam")
    v3.expire(5, v3.now + timedelta(minutes=2), "priya")
    new = v3.write({"content": "Canary deploys run at noon", "source_type": "operator", "namespace": WEB})
    assert new == 7
    assert v3.supersede(2, "The deploy tool is Argo", by="sam", source_type="operator") == 8
    v3.mark("b")
    v3.tick(), v3.tick()
    assert v3.purge() == [4, 5]
    v3.mark("c")
    return v3


def test_a_v3_store_migrated_from_v1_keeps_its_baselines(tmp_path: Path) -> None:
    path = tmp_path / "v3.sqlite3"
    v3 = build_migrated(path)
    reading = read_v3(v3)
    v3.close()
    events = {i: [(e.seq == HISTORY_START, e.event) for e in h] for i, h in reading.histories.items()}
    assert events == {
        1: [(True, "migrated")],  # never changed: read from the row
        2: [(True, "migrated"), (False, "consolidated"), (False, "superseded")],
        3: [(True, "migrated"), (False, "review"), (False, "review")],
        4: [(True, "migrated"), (False, "invalidated"), (False, "purged")],
        5: [(True, "migrated"), (False, "expiry"), (False, "purged")],
        6: [(True, "migrated")],
        7: [(False, "created")],
        8: [(False, "created")],
    }
    conn = apsw.Connection(str(path))
    lazily = conn.execute("SELECT chunk_id FROM chunk_history WHERE event = 'migrated' ORDER BY seq")
    assert [r[0] for r in lazily] == [3, 2, 4, 5]  # written just before each first change
    conn.close()
    assert reading.histories[3][0].review_state == "pending"  # the state the migration left
    with SQLiteKnowledgeStore(path) as store:
        assert store.history_position().seq == reading.latest
        assert_histories_match(store, reading)
        assert_as_of_matches(store, reading, tmp_path)
        # a baseline row changed for the first time after the conversion starts from its baseline
        store.set_review_state("6", "rejected", by="sam")
        read = store.history("6")
        assert [(e.seq, e.event, e.review_state) for e in read] == [
            (HISTORY_START, "migrated", "confirmed"),
            (reading.latest + 1, "review", "rejected"),
        ]
        dup = store.add_chunk(
            "Deploy window is  Tuesday", "hot", "operator", namespace=WEB, subject="deploys"
        )
        assert (dup.outcome, str(dup)) == ("duplicate", "1")
        assert [e.event for e in store.history("1")] == ["migrated", "consolidated"]
        with store.as_of(reading.positions["a"]) as then:
            assert then.get("6").review_state == "confirmed"  # type: ignore[union-attr]
    assert_converted(path)
    shown = CliRunner().invoke(contextplane_main, ["memory", "show", "3", "--db", str(path)])
    assert shown.exit_code == 0, shown.output
    assert f"#0 {format_timestamp(T0)} present at migration; {MIGRATION_NOTE}" in shown.output
    assert "review state set to rejected (by sam)" in shown.output


# --------------------------------------------------------------------------- a turn recorded before


def test_a_turn_recorded_on_the_v3_store_replays_after_the_conversion(tmp_path: Path) -> None:
    """The turn is composed from the v3 store's state, through a store reading a converted copy
    taken at that moment (this code cannot read version 3 otherwise), its records kept beside
    the v3 file; the v3 store then moves on and is converted: the turn's recorded position is a
    version-3 seq, and replaying it against the converted store gives the same bytes."""
    path = tmp_path / "v3.sqlite3"
    v3 = build_fresh(path)
    at_turn = v3.positions["c"]
    cfg = config()
    host = host_with(cfg)
    with SQLiteKnowledgeStore(v3.copies["c"]) as twin:
        assert twin.history_position().seq == at_turn.seq
        with backend_at(path, cfg, memories=twin) as backend:
            first = turn(host, backend, "when is the deploy window?")
    delivered = {i for s in first.sections for i in s.item_ids}
    assert "9" in delivered
    v3.review(9, "rejected", "sam")  # after the turn, still under version 3
    v3.close()
    with backend_at(path, cfg) as backend:
        inputs = backend.snapshots.get_inputs("s1", 1)
        assert inputs is not None and inputs.history_seq == at_turn.seq
        report = replay(backend, "s1", 1, host=host)
        assert report.identical, [(d.label, d.reasons) for d in report.changed]
        now = replay(backend, "s1", 1, host=host, now=True)
        assert not now.identical
        reasons = [r for d in now.changed for r in d.reasons]
        assert any(
            r.startswith("memory 9's lifecycle changed after the turn: review state set to rejected")
            for r in reasons
        ), reasons
        then = explain("9", backend=backend, host=host, session_id="s1", turn_index=1)
        later = explain("9", backend=backend, host=host, query="when is the deploy window?")
        assert then.verdict == "delivered"
        assert (later.verdict, later.reason) == ("filtered", "rejected") and later.evidence["by"] == "sam"
    assert_converted(path)


# --------------------------------------------------------------------------- opening, and failing


def test_a_second_open_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "v3.sqlite3"
    build_migrated(path).close()
    SQLiteKnowledgeStore(path).close()
    before = dump(path)
    with SQLiteKnowledgeStore(path) as store:
        assert store.conn.total_changes() == 0
        assert m.ensure_v4_history(store.conn) == []
    assert dump(path) == before


def test_a_read_only_open_of_a_v3_store_refuses_and_names_the_command(tmp_path: Path) -> None:
    path = tmp_path / "v3.sqlite3"
    build_fresh(path).close()
    before = dump(path)
    message = (
        f"{path}: the store needs migrating (bring it to schema version 5), but it is read-only; run "
        f"`contextplane migrate --db {path}` with write access, or work on a writable copy"
    )
    with pytest.raises(StoreError) as caught:
        SQLiteKnowledgeStore(path, read_only=True)
    assert str(caught.value) == message
    listed = CliRunner().invoke(contextplane_main, ["memory", "list", "--db", str(path)])
    assert listed.exit_code != 0 and message in " ".join(listed.output.split())
    assert dump(path) == before
    done = CliRunner().invoke(contextplane_main, ["migrate", "--db", str(path)])
    assert done.exit_code == 0, done.output
    assert_converted(path)
    with SQLiteKnowledgeStore(path, read_only=True) as reader:
        assert [e.event for e in reader.history("2")] == ["created", "consolidated", "superseded"]


def _fail_after_converting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The conversion does all its work, then a statement raises before the commit."""
    real = m._convert_v3_history

    def failing(conn: apsw.Connection) -> None:
        real(conn)
        assert not m.table_exists(conn, "chunk_history")  # it got to the end
        raise apsw.IOError("disk I/O error")

    monkeypatch.setattr(m, "_convert_v3_history", failing)


def _full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store connection capped at the pages it has: SQLITE_FULL, as on a full disk."""
    real = store_sqlite.connect

    def capped(*args: Any, **kwargs: Any) -> apsw.Connection:
        conn = real(*args, **kwargs)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {max(pages, 2)}").fetchall()
        return conn

    monkeypatch.setattr(store_sqlite, "connect", capped)


@pytest.mark.parametrize("failure", ["statement", "full disk"])
def test_a_conversion_that_fails_part_way_leaves_the_v3_store_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    path = tmp_path / "v3.sqlite3"
    v3 = build_fresh(path)
    if failure == "full disk":  # enough history that converting it needs pages the file lacks
        with v3.txn():
            bulk = v3.add(
                [{"content": f"memory {i} " + "z" * 200, "source_type": "conversation"} for i in range(3000)]
            )
        for chunk_id in bulk[::10]:
            v3.review(chunk_id, "confirmed", "priya")
    reading = read_v3(v3)
    v3.close()
    before = dump(path)
    with monkeypatch.context() as patched:
        (_fail_after_converting if failure == "statement" else _full_disk)(patched)
        with pytest.raises(StoreError) as caught:
            SQLiteKnowledgeStore(path)
    if failure == "full disk":
        assert str(caught.value) == (
            f"{path}: the disk is full (or the database reached its size limit), so the migration to schema "
            "version 5 (run it again: it resumes where it stopped) failed; nothing is lost (what was not "
            "committed was rolled back); free some space and try again"
        )
    else:
        assert str(caught.value) == (
            f"{path}: the migration to schema version 5 (run it again: it resumes where it stopped) "
            "failed: IOError: disk I/O error; check the file, its disk and its permissions"
        )
    assert dump(path) == before  # the version-3 store, every byte of its data and schema
    with SQLiteKnowledgeStore(path) as store:
        assert_histories_match(store, reading)
        assert store.history_position().seq == reading.latest
    assert_converted(path)
