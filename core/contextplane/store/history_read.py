"""Reading the embedded store's lifecycle history: a row's events decoded from its entries (and
a migrated row's baseline), the store-wide walk, and the position at a time (see ``history``).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

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
from contextplane.store.history_write import _ROW_GONE, _ROW_LIVE
from contextplane.store.restore import restored_at

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
            _event(
                int(created_seq),
                chunk_id,
                _stamp(created, f"memory {chunk_id}'s creation"),
                "created",
                source_type,
                after[0],
                created_detail,
            )
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
