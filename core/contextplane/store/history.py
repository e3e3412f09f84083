"""The embedded store's lifecycle history: appending events, reading them, and as-of overlays.

Appending: every write path calls one of the ``record_*`` functions inside its own write
transaction, after the change, so the event copies the row's state as the change left it and
commits or rolls back with it (``contextplane.memory.history`` says why). The ``chunk_history``
table refuses UPDATE and DELETE (``migrate.HISTORY_SQL``).

A migrated store's rows start with a ``migrated`` event, read at ``HISTORY_START`` wherever it
sits in the table: the migration writes none (``migrate.start_history``); a row's is written just
before its first change, and until then ``events`` reads it from the row itself.

As-of reads: the state of the store at a ``HistoryPosition`` (seq S, time T) differs from now
only for the rows with a change after S (a ``migrated`` event is no change). ``overlay`` puts
their state at S into a temporary table and shadows ``chunks`` with a temporary view of the same
name that reads them from it (rows written after S are hidden), so every read statement of the
store (``get``, ``list_chunks``, ``search``, the vector leg) runs unchanged against the past.
SQLite resolves an unqualified table name in ``temp`` first, so nothing in ``sql`` needs to know.

Ranking: BM25 depends on the corpus (row count, lengths, how many rows hold a word), so rows
written after S would change the order of results even while hidden. With ``exact_ranking``
the overlay also shadows ``chunks_fts`` with a temporary full-text index of the rows present
at S (same tokenizer): an O(rows) build, paid only when rows were written or purged after S.
What no overlay can restore: the text of rows purged after S (the purge deleted it), and the
vector index's clustering if it was retrained (its candidate lists are approximate); both
are reported by ``AsOfOverlay``.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import apsw
import attrs

from contextplane.errors import StoreError
from contextplane.memory.history import (
    EVENT_NAMES,
    HISTORY_START,
    MIGRATION_NOTE,
    HistoryEvent,
    HistoryPosition,
)
from contextplane.memory.model import format_timestamp, read_timestamp
from contextplane.store import migrate
from contextplane.store.columns import SELECT_NAMES

#: The lifecycle columns an event carries, in table order; the overlay replaces exactly these.
STATE_COLUMNS: Final[tuple[str, ...]] = (
    "review_state",
    "expires_at",
    "invalidated_at",
    "invalidation_reason",
    "updated_at",
)
_STATE_LIST: Final[str] = ", ".join(STATE_COLUMNS)
_UPDATED_AT: Final[int] = STATE_COLUMNS.index("updated_at")
_EVENT_COLUMNS: Final[str] = f"seq, chunk_id, at, event, actor, {_STATE_LIST}, detail"
_INSERT: Final[str] = f"INSERT INTO chunk_history(chunk_id, at, event, actor, {_STATE_LIST}, detail)"
_CHANGE_FROM_ROW: Final[str] = (
    f"{_INSERT} SELECT id, coalesce(?, updated_at), ?, ?, {_STATE_LIST}, ? FROM chunks WHERE id = ?"
)
_CHANGE_VALUES: Final[str] = f"{_INSERT} VALUES (?, ?, ?, ?, {', '.join('?' for _ in STATE_COLUMNS)}, ?)"
#: The state cells of a ``SELECT_COLUMNS`` row, in ``STATE_COLUMNS`` order.
state_of: Final[Callable[[Sequence[Any]], tuple[Any, ...]]] = operator.itemgetter(
    *(SELECT_NAMES.index(name) for name in STATE_COLUMNS)
)


# --------------------------------------------------------------------------- appending


def record_created(conn: apsw.Connection, ids: range, details: Mapping[int, str] | None = None) -> None:
    """One ``created`` event per inserted row, actor its provenance, in id order. One
    statement for the batch unless some row carries a consolidation detail."""
    if not details:
        conn.execute(
            f"{_INSERT} SELECT id, created_at, 'created', source_type, {_STATE_LIST}, NULL "
            "FROM chunks WHERE id >= ? AND id <= ? ORDER BY id",
            (ids.start, ids.stop - 1),
        )
        return
    conn.executemany(
        f"{_INSERT} SELECT id, created_at, 'created', source_type, {_STATE_LIST}, ? FROM chunks WHERE id = ?",
        [(details.get(i), i) for i in ids],
    )


def record_change(
    conn: apsw.Connection,
    chunk_id: int,
    event: str,
    actor: str,
    *,
    at: str | None = None,
    detail: Mapping[str, Any] | None = None,
    state: Sequence[Any] | None = None,
) -> None:
    """The event of one change to ``chunk_id`` (already applied), with the state it left.
    ``at`` defaults to the row's ``updated_at``, which the change stamped. ``state``: the
    row's ``STATE_COLUMNS`` as the change left them, when the caller has just read them (the
    event is then one plain insert, not a read of the row too: a review change is a ~35 us
    write, so the history's few microseconds are what it is judged by)."""
    if event not in EVENT_NAMES:
        raise StoreError(f"history: {event!r} is not an event ({', '.join(sorted(EVENT_NAMES))})")
    text = None if detail is None else json.dumps(dict(detail))
    if state is None:
        conn.execute(_CHANGE_FROM_ROW, (at, event, actor, text, chunk_id))
    else:
        stamp = state[_UPDATED_AT] if at is None else at
        conn.execute(_CHANGE_VALUES, (chunk_id, stamp, event, actor, *state, text))


def record_purged(conn: apsw.Connection, where: str, params: Mapping[str, Any], at: str) -> None:
    """A ``purged`` event for every row ``where`` selects, before they are deleted."""
    conn.execute(
        f"{_INSERT} SELECT id, :purge_at, 'purged', 'purge', {_STATE_LIST}, NULL FROM chunks "
        f"WHERE {where} ORDER BY id",
        {**params, "purge_at": at},
    )


# --------------------------------------------------------------------------- reading


def _event(row: tuple[Any, ...]) -> HistoryEvent:
    seq, chunk_id, at, event, actor, review, expires, invalidated, reason, updated, detail = row
    stamp = read_timestamp(at)
    if stamp is None:
        raise StoreError(f"history event {seq}: unreadable time {at!r}")
    return HistoryEvent(
        seq=HISTORY_START if event == "migrated" else int(seq),
        chunk_id=str(chunk_id),
        at=stamp,
        event=event,
        actor=str(actor or ""),
        review_state=review,
        expires_at=read_timestamp(expires),
        invalidated_at=read_timestamp(invalidated),
        invalidation_reason=reason,
        updated_at=read_timestamp(updated),
        detail=json.loads(detail) if detail else {},
    )


def events(conn: apsw.Connection, chunk_id: int, upto: int | None = None) -> list[HistoryEvent]:
    """Every event of one row, oldest first (only those at or before ``upto`` when given). A
    row that was there when a migrated store's history started and has not changed since has
    its ``migrated`` event read from its cells (the state it has had all along)."""
    sql = f"SELECT {_EVENT_COLUMNS} FROM chunk_history WHERE chunk_id = ?"
    args: list[Any] = [chunk_id]
    if upto is not None:
        sql += " AND (seq <= ? OR event = 'migrated')"
        args.append(upto)
    found = [_event(r) for r in conn.execute(sql + " ORDER BY seq", args)]
    if found:
        return found
    baseline = _unwritten_baseline(conn, chunk_id, probe=upto is not None)
    return [] if baseline is None else [baseline]


def _unwritten_baseline(conn: apsw.Connection, chunk_id: int, *, probe: bool) -> HistoryEvent | None:
    """The ``migrated`` event of a row with no event, when the store's history started at a
    migration that found it there (``migrate.HISTORY_BASELINE_KEY``). ``probe``: check that the
    row has no event at all (the caller read only those up to a position)."""
    high = migrate.meta_get(conn, migrate.HISTORY_BASELINE_KEY)
    started = migrate.meta_get(conn, migrate.HISTORY_STARTED_KEY)
    if high is None or started is None or chunk_id > int(high):
        return None
    probed = "SELECT 1 FROM chunk_history WHERE chunk_id = ? LIMIT 1"
    if probe and conn.execute(probed, (chunk_id,)).fetchone():
        return None  # written after the position
    row = conn.execute(f"SELECT {_STATE_LIST} FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
    if row is None:
        return None
    note = json.dumps({"note": MIGRATION_NOTE})
    return _event((HISTORY_START, chunk_id, started, "migrated", "", *row, note))


def events_after(conn: apsw.Connection, seq: int, chunk_id: int | None = None) -> list[HistoryEvent]:
    """The changes after ``seq`` (of one row, or of all), oldest first: every event but the
    ``migrated`` ones, which hold from the start of the history wherever they were written."""
    if chunk_id is None:
        rows = conn.execute(
            f"SELECT {_EVENT_COLUMNS} FROM chunk_history WHERE seq > ? AND event != 'migrated' ORDER BY seq",
            (seq,),
        )
    else:
        rows = conn.execute(
            f"SELECT {_EVENT_COLUMNS} FROM chunk_history WHERE chunk_id = ? AND seq > ? "
            "AND event != 'migrated' ORDER BY seq",
            (chunk_id, seq),
        )
    return [_event(r) for r in rows]


def latest_seq(conn: apsw.Connection) -> int:
    return int(migrate.scalar(conn, "SELECT coalesce(max(seq), 0) FROM chunk_history"))


def position_at(conn: apsw.Connection, path: str, when: datetime) -> HistoryPosition:
    """The position of the last event at or before ``when``; refused before a migrated
    store's history starts (nothing is known of the states before it)."""
    started = read_timestamp(migrate.meta_get(conn, migrate.HISTORY_STARTED_KEY))
    if started is not None and when < started:
        raise StoreError(
            f"{path}: the history of this store starts at {format_timestamp(started)} (its migration to "
            f"schema 3); {format_timestamp(when)} is before it, so its state then is not known"
        )
    row = conn.execute(
        "SELECT seq FROM chunk_history WHERE at <= ? AND event != 'migrated' ORDER BY seq DESC LIMIT 1",
        (format_timestamp(when),),
    ).fetchone()
    return HistoryPosition(0 if row is None else int(row[0]), when)


# --------------------------------------------------------------------------- as-of overlays


@attrs.frozen
class AsOfOverlay:
    """What an as-of view changed to show the past, and what it could not restore."""

    position: HistoryPosition
    #: Rows whose state at the position differs from now (their events after it).
    changed: tuple[str, ...] = ()
    #: Rows written after the position (hidden).
    written_after: tuple[str, ...] = ()
    #: Rows purged after the position: present then, their text gone now.
    purged_after: tuple[str, ...] = ()
    #: True when full-text ranking uses an index of the rows present at the position.
    exact_ranking: bool = True


def fts_tokenizer(conn: apsw.Connection) -> str:
    """The ``tokenize=`` argument of the store's full-text index, quoted as in its SQL."""
    sql = str(migrate.scalar(conn, "SELECT sql FROM main.sqlite_master WHERE name = 'chunks_fts'"))
    found = re.search(r"tokenize\s*=\s*('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")", sql)
    return found.group(1) if found else "'unicode61'"


def _view_sql() -> str:
    columns = []
    for name in SELECT_NAMES:
        if name in STATE_COLUMNS:
            columns.append(f"CASE WHEN o.id IS NULL THEN m.{name} ELSE o.{name} END AS {name}")
        else:
            columns.append(f"m.{name} AS {name}")
    return (
        f"CREATE TEMP VIEW chunks AS SELECT {', '.join(columns)} FROM main.chunks AS m "
        "LEFT JOIN temp.asof_state AS o ON o.id = m.id WHERE o.id IS NULL OR o.present"
    )


def overlay(conn: apsw.Connection, position: HistoryPosition, *, exact_ranking: bool) -> AsOfOverlay:
    """Shadow ``chunks`` (and, for exact ranking when the corpus changed, ``chunks_fts``) on
    ``conn`` with the store's state at ``position``. ``conn`` must be private to the view and
    inside its read transaction; its temporary objects die with it."""
    later = events_after(conn, position.seq)
    if not later:
        return AsOfOverlay(position)
    ids = sorted({int(e.chunk_id) for e in later})
    first_after: dict[int, HistoryEvent] = {}
    for event in later:
        first_after.setdefault(int(event.chunk_id), event)
    before = {
        int(r[1]): r
        for r in conn.execute(
            f"SELECT {_EVENT_COLUMNS} FROM chunk_history WHERE seq IN ("
            "SELECT (SELECT max(h.seq) FROM chunk_history AS h WHERE h.chunk_id = j.value "
            "AND (h.seq <= ? OR h.event = 'migrated')) FROM json_each(?) AS j)",
            (position.seq, json.dumps(ids)),
        )
    }
    conn.execute(
        "CREATE TEMP TABLE asof_state (id INTEGER PRIMARY KEY, present INTEGER NOT NULL, "
        + ", ".join(f"{c} TEXT" for c in STATE_COLUMNS)
        + ")"
    )
    rows: list[tuple[Any, ...]] = []
    written: list[str] = []
    purged: list[str] = []
    for chunk_id in ids:
        prior = before.get(chunk_id)
        if prior is None:
            written.append(str(chunk_id))
            rows.append((chunk_id, 0, None, None, None, None, None))
            continue
        if any(e.event == "purged" for e in later if int(e.chunk_id) == chunk_id) and prior[3] != "purged":
            purged.append(str(chunk_id))
        rows.append((chunk_id, int(prior[3] != "purged"), *prior[5:10]))
    conn.executemany("INSERT INTO temp.asof_state VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.execute(_view_sql())
    corpus_changed = bool(written or purged)
    if exact_ranking and corpus_changed:
        tokenize = fts_tokenizer(conn)
        conn.execute(
            f"CREATE VIRTUAL TABLE temp.chunks_fts USING fts5(content, heading, tokenize={tokenize})"
        )
        conn.execute(
            "INSERT INTO temp.chunks_fts(rowid, content, heading) SELECT id, content, heading FROM chunks"
        )
    return AsOfOverlay(
        position,
        changed=tuple(str(i) for i in ids),
        written_after=tuple(written),
        purged_after=tuple(purged),
        exact_ranking=exact_ranking or not corpus_changed,
    )


def drop_overlay(conn: apsw.Connection) -> None:
    """Remove an overlay's temporary objects, so the connection reads the present again."""
    for statement in (
        "DROP VIEW IF EXISTS temp.chunks",
        "DROP TABLE IF EXISTS temp.chunks_fts",
        "DROP TABLE IF EXISTS temp.asof_state",
    ):
        conn.execute(statement)


def chunk_ids(values: Iterable[str]) -> list[int]:
    return [int(v) for v in values if str(v).isdigit()]
