"""The embedded store's lifecycle history: appending events, reading them, and as-of overlays.

Where the events live (schema 4), and why: a review-state change is a ~30 us write that commits
one page (the row's). An event kept in a table of its own commits two more (the table's last
page and its per-row index), and those pages, not the insert, are what made the history cost a
change 1.28x. So a row carries its own history, in ``chunks.history``, and a change appends its
entry in the same ``UPDATE`` that makes it, dirtying the page it dirties anyway:

- ``chunks.history``: one JSON array per change, newline-terminated, appended and never
  rewritten (a trigger refuses anything else): ``[seq, at, event, actor, detail, <the row's
  lifecycle cells before the change>]``. The cells *before*: an ``UPDATE``'s expressions read
  the old values, so the entry is written by SQL with no read of the row; the state a change
  left is the next entry's before-cells, or the row itself for the last one.
- ``chunk_log``: the store-wide order, one small row per change (``seq``, row, time), one per
  write batch (``kind`` 'created': the batch's id range, whose rows all carry its ``seq`` in
  ``chunks.created_seq``) and one per purged row. It answers "what changed after position S"
  and "the latest position" by its rowid, with no index to keep.
- ``chunk_gone``: a purged row's history, creation stamps and last state, moved there by the
  purge before the row is deleted (a trigger refuses to delete a row that has not been).

Appending: every write path goes through ``change`` (or ``log_created`` / ``record_purged``)
inside its own write transaction, so an event commits or rolls back with its change.

A migrated store's rows (those up to ``HISTORY_BASELINE_KEY`` without a ``created_seq``) start
with a ``migrated`` event read at ``HISTORY_START``: their state at the migration is the first
entry's before-cells, or the row itself while it has not changed; nothing is written for them at
the migration (``migrate.start_history``).

As-of reads: the state of the store at a ``HistoryPosition`` (seq S, time T) differs from now
only for the rows with a change after S. ``overlay`` puts their state at S into a temporary table
and shadows ``chunks`` with a temporary view of the same name that reads them from it and hides
the rows written after S (ids are handed out in order, so those are the ids above the last batch
at or before S); every read statement of the store (``get``, ``list_chunks``, ``search``, the
vector leg) runs unchanged against the past. SQLite resolves an unqualified table name in
``temp`` first, so nothing in ``sql`` needs to know.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
from contextplane.store.connection import temp_objects
from contextplane.store.restore import restored_at

#: The lifecycle columns an event carries, in table order; the overlay replaces exactly these.
STATE_COLUMNS: Final[tuple[str, ...]] = (
    "review_state",
    "expires_at",
    "invalidated_at",
    "invalidation_reason",
    "updated_at",
)
_STATE_LIST: Final[str] = ", ".join(STATE_COLUMNS)
#: The state cells of a ``SELECT_COLUMNS`` row, in ``STATE_COLUMNS`` order.
state_of: Final[Callable[[Sequence[Any]], tuple[Any, ...]]] = operator.itemgetter(
    *(SELECT_NAMES.index(name) for name in STATE_COLUMNS)
)

#: A change's entry: its seq, time, name, actor and detail (bound), then the row's cells before it.
ENTRY_SQL: Final[str] = (
    f"coalesce(history, '') || json_array(?, ?, ?, ?, json(?), {_STATE_LIST}) || char(10)"
)
_LOG_CHANGE: Final[str] = "INSERT INTO chunk_log(chunk_id, at) VALUES (?, ?)"
#: What reading one row's history needs, from ``chunks`` or (purged) from ``chunk_gone``; named
#: in ``main``, since an as-of view's connection shadows ``chunks`` with a view of the past.
_ROW_LIVE: Final[str] = (
    f"SELECT id, created_seq, created_at, source_type, history, {_STATE_LIST}, NULL, NULL FROM main.chunks"
)
_ROW_GONE: Final[str] = (
    f"SELECT chunk_id, created_seq, created_at, source_type, history, {_STATE_LIST}, purged_seq, purged_at "
    "FROM main.chunk_gone"
)


# --------------------------------------------------------------------------- appending


def log_created(conn: apsw.Connection, ids: range, at: str) -> int:
    """The position of a write batch (rows ``ids``, created at ``at``): one log row; the rows
    carry its seq in ``created_seq``. Called before the insert."""
    conn.execute(
        "INSERT INTO chunk_log(chunk_id, last_id, at, kind) VALUES (?, ?, ?, 'created')",
        (ids.start, ids.stop - 1, at),
    )
    return int(conn.last_insert_rowid())


def record_created(conn: apsw.Connection, details: Mapping[int, str]) -> None:
    """What a write's consolidation said about a created row (``details``: id -> JSON), kept as
    the first entry of its history; a row written with nothing to say has none."""
    conn.executemany(
        "UPDATE chunks SET history = coalesce(history, '') || json_array(created_seq, created_at, "
        "'created', source_type, json(?), NULL, NULL, NULL, NULL, NULL) || char(10) WHERE id = ?",
        [(detail, chunk_id) for chunk_id, detail in sorted(details.items())],
    )


def change(
    conn: apsw.Connection,
    chunk_id: int,
    sets: str,
    params: Sequence[Any],
    event: str,
    actor: str,
    at: str,
    *,
    detail: Mapping[str, Any] | None = None,
) -> bool:
    """Make one change to a row and append its event, in the caller's write transaction:
    ``UPDATE chunks SET {sets}`` (``params`` for its placeholders) with the entry appended in
    the same statement, after one log row. False when no row has that id (the caller raises,
    rolling the log row back)."""
    if event not in EVENT_NAMES:
        raise StoreError(f"history: {event!r} is not an event ({', '.join(sorted(EVENT_NAMES))})")
    conn.execute(_LOG_CHANGE, (chunk_id, at))
    seq = conn.last_insert_rowid()
    text = None if detail is None else json.dumps(dict(detail))
    statement = _CHANGE_SQL.get(sets)
    if statement is None:
        statement = _CHANGE_SQL.setdefault(
            sets, f"UPDATE chunks SET {f'{sets}, ' if sets else ''}history = {ENTRY_SQL} WHERE id = ?"
        )
    conn.execute(statement, (*params, seq, at, event, actor, text, chunk_id))
    return conn.changes() == 1


#: The ``UPDATE`` of each kind of change (its ``sets``), built once.
_CHANGE_SQL: dict[str, str] = {}


def plain_change(conn: apsw.Connection, chunk_id: int, sets: str, params: Sequence[Any]) -> bool:
    """The same change with no history (a store whose history seam is off: the benchmark's
    baseline)."""
    if not sets:
        return conn.execute("SELECT 1 FROM chunks WHERE id = ?", (chunk_id,)).fetchone() is not None
    conn.execute(f"UPDATE chunks SET {sets} WHERE id = ?", (*params, chunk_id))
    return conn.changes() == 1


def record_purged(conn: apsw.Connection, where: str, params: Mapping[str, Any], at: str) -> None:
    """Before a purge deletes the rows ``where`` selects: a ``purged`` log row for each and its
    history, stamps and last state moved to ``chunk_gone``."""
    before = latest_seq(conn)
    conn.execute(
        f"INSERT INTO chunk_log(chunk_id, at, kind) SELECT id, :purge_at, 'purged' FROM chunks "
        f"WHERE {where} ORDER BY id",
        {**params, "purge_at": at},
    )
    conn.execute(
        "INSERT INTO chunk_gone(chunk_id, created_seq, created_at, source_type, history, "
        f"{_STATE_LIST}, purged_seq, purged_at) SELECT c.id, c.created_seq, c.created_at, "
        f"c.source_type, c.history, {', '.join('c.' + n for n in STATE_COLUMNS)}, l.seq, l.at "
        "FROM chunk_log AS l JOIN chunks AS c ON c.id = l.chunk_id WHERE l.seq > ? ORDER BY l.seq",
        (before,),
    )


# --------------------------------------------------------------------------- reading


def _stamp(value: Any, what: str) -> datetime:
    stamp = read_timestamp(value)
    if stamp is None:
        raise StoreError(f"history: {what} has an unreadable time {value!r}")
    return stamp


def _event(
    seq: int, chunk_id: int, at: datetime, event: Any, actor: Any, state: Sequence[Any], detail: Any
) -> HistoryEvent:
    review, expires, invalidated, reason, updated = state
    return HistoryEvent(
        seq=seq,
        chunk_id=str(chunk_id),
        at=at,
        event=event,
        actor=str(actor or ""),
        review_state=review,
        expires_at=read_timestamp(expires),
        invalidated_at=read_timestamp(invalidated),
        invalidation_reason=reason,
        updated_at=read_timestamp(updated),
        detail=detail if isinstance(detail, dict) else {},
    )


@attrs.frozen
class _Baseline:
    """When a migrated store's history started, and the largest id it found (None: no migration)."""

    started: datetime | None
    high: int | None

    @classmethod
    def read(cls, conn: apsw.Connection) -> _Baseline:
        high = migrate.meta_get(conn, migrate.HISTORY_BASELINE_KEY)
        started = read_timestamp(migrate.meta_get(conn, migrate.HISTORY_STARTED_KEY))
        return cls(started, None if high is None else int(high))


def _entries(row: Sequence[Any]) -> list[list[Any]]:
    """The history entries of a row read by ``_ROW_LIVE`` or ``_ROW_GONE``, each checked: a
    damaged one (a file edited by hand, a torn copy) is refused by name, never read as a state."""
    chunk_id, text = row[0], row[4]
    if not text:
        return []
    entries: list[list[Any]] = []
    for number, line in enumerate(str(text).splitlines(), start=1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            problem = f"not JSON: {exc.msg}"
        else:
            if not isinstance(entry, list) or len(entry) != 10:
                problem = "not a 10-item array"
            elif not isinstance(entry[0], int) or entry[2] not in EVENT_NAMES:
                problem = f"no seq or an unknown event {entry[2]!r}"
            else:
                entries.append(entry)
                continue
        raise StoreError(
            f"history: entry {number} of memory {chunk_id}'s history is damaged ({problem}); the memory "
            "itself reads and is delivered as usual, but its history and as-of reads of it cannot be "
            "read until the store file is restored from a backup"
        )
    return entries


def _row_events(
    row: Sequence[Any], baseline: _Baseline, entries: list[list[Any]] | None = None
) -> list[HistoryEvent]:
    """Every event of one row read by ``_ROW_LIVE`` or ``_ROW_GONE``, oldest first (``entries``:
    its ``_entries``, when the caller has them)."""
    chunk_id, created_seq, created_at, source_type = row[:4]
    final = tuple(row[5:10])
    purged_seq, purged_at = row[10], row[11]
    entries = list(_entries(row) if entries is None else entries)
    created_detail = None
    if entries and entries[0][2] == "created":
        created_detail = entries.pop(0)[4]
    # the state each event left: the next change's before-cells, the row's own for the last
    after = [tuple(e[5:10]) for e in entries] + [final]
    found: list[HistoryEvent] = []
    if created_seq is not None:
        # A restored row (``store.restore``) was created here at its restore, not at its
        # ``created_at`` (the time it was first written, elsewhere).
        created = restored_at(created_detail) or created_at
        found.append(
            _event(int(created_seq), chunk_id, _stamp(created, f"memory {chunk_id}'s creation"),
                   "created", source_type, after[0], created_detail)
        )
    elif baseline.started is not None and baseline.high is not None and chunk_id <= baseline.high:
        note = {"note": MIGRATION_NOTE}
        found.append(_event(HISTORY_START, chunk_id, baseline.started, "migrated", "", after[0], note))
    for index, entry in enumerate(entries):
        seq, at, event, actor, detail = entry[:5]
        stamp = _stamp(at, f"event {seq}")
        found.append(_event(int(seq), chunk_id, stamp, event, actor, after[index + 1], detail))
    if purged_seq is not None:
        stamp = _stamp(purged_at, f"event {purged_seq}")
        found.append(_event(int(purged_seq), chunk_id, stamp, "purged", "purge", final, None))
    return found


def check_histories(conn: apsw.Connection) -> tuple[int, list[str]]:
    """How many rows (live and purged) were read, and one line per row whose history does not
    parse (``store check``): a damaged row still reads and is delivered, so nothing else
    notices it until its history or an as-of read is asked for."""
    baseline = _Baseline.read(conn)
    seen, problems = 0, []
    for sql, what in ((_ROW_LIVE, "memory"), (_ROW_GONE, "purged memory")):
        for row in conn.execute(sql):
            seen += 1
            try:
                _row_events(row, baseline)
            except StoreError as exc:
                problems.append(f"history of {what} {row[0]}: {str(exc).removeprefix('history: ')}")
            except (ValueError, TypeError, IndexError) as exc:
                problems.append(f"history of {what} {row[0]}: unreadable ({type(exc).__name__}: {exc})")
    return seen, problems


def _rows(conn: apsw.Connection, ids: Sequence[int]) -> list[Sequence[Any]]:
    """The history rows of ``ids`` (live or purged), in id order."""
    if not ids:
        return []
    listed = json.dumps(list(ids))
    live: list[Sequence[Any]] = list(
        conn.execute(f"{_ROW_LIVE} WHERE id IN (SELECT value FROM json_each(?))", (listed,))
    )
    missing = set(ids) - {int(r[0]) for r in live}
    gone: list[Sequence[Any]] = []
    if missing:
        gone = list(
            conn.execute(
                f"{_ROW_GONE} WHERE chunk_id IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted(missing)),),
            )
        )
    return sorted([*live, *gone], key=operator.itemgetter(0))


def events(conn: apsw.Connection, chunk_id: int, upto: int | None = None) -> list[HistoryEvent]:
    """Every event of one row, oldest first (only those at or before ``upto`` when given; a
    ``migrated`` event holds from the start, so it is always among them)."""
    row = conn.execute(f"{_ROW_LIVE} WHERE id = ?", (chunk_id,)).fetchone()
    if row is None:
        row = conn.execute(f"{_ROW_GONE} WHERE chunk_id = ?", (chunk_id,)).fetchone()
    if row is None:
        return []
    found = _row_events(row, _Baseline.read(conn))
    if upto is None:
        return found
    return [e for e in found if e.seq <= upto]


#: Where a walk of the whole history stands: the (seq, row id) of the last event it gave. Every
#: row of one write batch has the batch's seq, so a seq alone cannot say where inside one it was.
EventKey = tuple[int, int]


def count_events(conn: apsw.Connection) -> int:
    """How many events ``walk_events`` gives: a ``migrated`` one per row the migration found, and
    one per row each log entry names."""
    baseline = _Baseline.read(conn)
    implied = 0
    if baseline.started is not None and baseline.high is not None:
        implied = int(
            migrate.scalar(
                conn,
                "SELECT (SELECT count(*) FROM main.chunks WHERE created_seq IS NULL AND id <= :high) + "
                "(SELECT count(*) FROM main.chunk_gone WHERE created_seq IS NULL AND chunk_id <= :high)",
                {"high": baseline.high},
            )
        )
    logged = migrate.scalar(
        conn, "SELECT coalesce(sum(coalesce(last_id, chunk_id) - chunk_id + 1), 0) FROM main.chunk_log"
    )
    return implied + int(logged)


def walk_events(
    conn: apsw.Connection, after: EventKey | None = None, *, batch: int = 5_000
) -> Iterator[list[HistoryEvent]]:
    """Every event of the store, live and purged rows alike, in (seq, row id) order, ``batch``
    at a time: first the ``migrated`` events (at ``HISTORY_START``) of the rows the migration
    found, then the log's. For a copy that must carry each event with its seq: each batch is
    read by statements of its own (a million-event history is never held at once, nor a
    statement left open between batches), and ``after`` resumes after the event with that key."""
    if batch < 1:
        raise StoreError(f"history: batch must be at least 1, got {batch!r}")
    key = after
    while True:
        keys = _keys_after(conn, key, batch)
        if not keys:
            return
        key = keys[-1]
        baseline = _Baseline.read(conn)
        by_row = {
            int(row[0]): {e.seq: e for e in _row_events(row, baseline)}
            for row in _rows(conn, sorted({chunk_id for _, chunk_id in keys}))
        }
        found = [e for seq, chunk_id in keys if (e := by_row.get(chunk_id, {}).get(seq)) is not None]
        if found:
            yield found


def _keys_after(conn: apsw.Connection, after: EventKey | None, limit: int) -> list[EventKey]:
    """The keys of the next ``limit`` events after ``after`` (None: from the start)."""
    keys: list[EventKey] = []
    seq, last = after if after is not None else (HISTORY_START - 1, 0)
    if seq <= HISTORY_START:
        baseline = _Baseline.read(conn)
        if baseline.started is not None and baseline.high is not None:
            low = "AND {id} > :last" if seq == HISTORY_START else ""
            args = {"high": baseline.high, "last": last, "n": limit}
            ids = [
                int(r[0])
                for table, column in (("chunks", "id"), ("chunk_gone", "chunk_id"))
                for r in conn.execute(
                    f"SELECT {column} FROM main.{table} WHERE created_seq IS NULL AND {column} <= :high "
                    f"{low.format(id=column)} ORDER BY {column} LIMIT :n",
                    args,
                )
            ]
            keys.extend((HISTORY_START, i) for i in sorted(ids)[:limit])
        seq, last = HISTORY_START, 0
    cursor = conn.execute(
        "SELECT seq, chunk_id, coalesce(last_id, chunk_id) FROM main.chunk_log WHERE seq >= ? ORDER BY seq",
        (max(seq, HISTORY_START + 1),),
    )
    try:
        for logged, first, high in cursor:
            if len(keys) >= limit:
                break
            start = max(int(first), last + 1) if logged == seq else int(first)
            stop = min(int(high), start + limit - len(keys) - 1)
            keys.extend((int(logged), i) for i in range(start, stop + 1))
    finally:
        cursor.close()
    return keys


def latest_seq(conn: apsw.Connection) -> int:
    return int(migrate.scalar(conn, "SELECT coalesce(max(seq), 0) FROM chunk_log"))


def position_at(conn: apsw.Connection, path: str, when: datetime) -> HistoryPosition:
    """The position of the last event at or before ``when``; refused before a migrated
    store's history starts (nothing is known of the states before it)."""
    started = read_timestamp(migrate.meta_get(conn, migrate.HISTORY_STARTED_KEY))
    if started is not None and when < started:
        raise StoreError(
            f"{path}: the history of this store starts at {format_timestamp(started)} (the migration that "
            f"added it); {format_timestamp(when)} is before it, so its state then is not known"
        )
    row = conn.execute(
        "SELECT seq FROM chunk_log WHERE at <= ? ORDER BY seq DESC LIMIT 1", (format_timestamp(when),)
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


def _view_sql(high: int) -> str:
    columns = []
    for name in SELECT_NAMES:
        if name in STATE_COLUMNS:
            columns.append(f"CASE WHEN o.id IS NULL THEN m.{name} ELSE o.{name} END AS {name}")
        else:
            columns.append(f"m.{name} AS {name}")
    return (
        f"CREATE TEMP VIEW chunks AS SELECT {', '.join(columns)} FROM main.chunks AS m "
        "LEFT JOIN temp.asof_state AS o ON o.id = m.id "
        f"WHERE m.id <= {int(high)} AND (o.id IS NULL OR o.present)"
    )


def _high_at(conn: apsw.Connection, seq: int) -> int:
    """The largest id written at or before ``seq``: ids are handed out in order under the write
    lock, so every row above it was written later."""
    row = conn.execute(
        "SELECT coalesce(last_id, chunk_id) FROM chunk_log WHERE kind = 'created' AND seq <= ? "
        "ORDER BY seq DESC LIMIT 1",
        (seq,),
    ).fetchone()
    if row is not None:
        return int(row[0])
    high = migrate.meta_get(conn, migrate.HISTORY_BASELINE_KEY)
    return int(high) if high is not None else 0


def overlay(conn: apsw.Connection, position: HistoryPosition, *, exact_ranking: bool) -> AsOfOverlay:
    """Shadow ``chunks`` (and, for exact ranking when the corpus changed, ``chunks_fts``) on
    ``conn`` with the store's state at ``position``. ``conn`` must be private to the view and
    inside its read transaction; its temporary objects die with it."""
    later: list[Sequence[Any]] = list(
        conn.execute(
            "SELECT chunk_id, coalesce(last_id, chunk_id), kind FROM chunk_log WHERE seq > ? ORDER BY seq",
            (position.seq,),
        )
    )
    if not later:
        return AsOfOverlay(position)
    written: list[int] = []
    touched: set[int] = set()
    for first, last, kind in later:
        if kind == "created":
            written.extend(range(int(first), int(last) + 1))
        else:
            touched.add(int(first))
    new = set(written)
    baseline = _Baseline.read(conn)
    rows: list[tuple[Any, ...]] = []
    purged: list[str] = []
    for row in _rows(conn, sorted(touched - new)):
        entries = _entries(row)
        found = _row_events(row, baseline, entries)
        then = [e for e in found if e.seq <= position.seq]
        if not then:  # no event by then: a row of an older store written without one
            continue
        state = then[-1]
        gone = any(e.event == "purged" for e in found)
        if gone and state.event != "purged":
            purged.append(str(row[0]))
        index = len(then)
        cells = tuple(row[5:10]) if index == len(found) or (gone and index == len(found) - 1) else None
        if cells is None:  # the next event's entry holds the cells before it: the state then
            cells = next(tuple(e[5:10]) for e in entries if e[2] != "created" and e[0] == found[index].seq)
        rows.append((int(row[0]), int(state.event != "purged"), *cells))
    high = _high_at(conn, position.seq)
    corpus_changed = bool(written or purged)
    tokenize = fts_tokenizer(conn) if exact_ranking and corpus_changed else None
    with temp_objects(conn):
        conn.execute(
            "CREATE TEMP TABLE asof_state (id INTEGER PRIMARY KEY, present INTEGER NOT NULL, "
            + ", ".join(f"{c} TEXT" for c in STATE_COLUMNS)
            + ")"
        )
        conn.executemany("INSERT INTO temp.asof_state VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute(_view_sql(high))
        if tokenize is not None:
            # Over the view of the past (``temp.chunks``), built by one 'rebuild': unlike
            # inserted rows, which FTS5 holds in memory until a commit this read never makes, a
            # rebuild writes the index's row count and averages, which the query plan's term
            # weights read (``query_terms.indexed_rows``); without them every hit's relevance
            # was 1.0.
            conn.execute(
                "CREATE VIRTUAL TABLE temp.chunks_fts USING fts5(content, heading, content='chunks', "
                f"content_rowid='id', tokenize={tokenize})"
            )
            conn.execute("INSERT INTO temp.chunks_fts(chunks_fts) VALUES ('rebuild')")
    return AsOfOverlay(
        position,
        changed=tuple(str(i) for i in sorted(touched | new)),
        written_after=tuple(str(i) for i in written),
        purged_after=tuple(purged),
        exact_ranking=exact_ranking or not corpus_changed,
    )


def drop_overlay(conn: apsw.Connection) -> None:
    """Remove an overlay's temporary objects, so the connection reads the present again."""
    with temp_objects(conn):
        for statement in (
            "DROP VIEW IF EXISTS temp.chunks",
            "DROP TABLE IF EXISTS temp.chunks_fts",
            "DROP TABLE IF EXISTS temp.asof_state",
        ):
            conn.execute(statement)


def chunk_ids(values: Iterable[str]) -> list[int]:
    return [int(v) for v in values if str(v).isdigit()]
