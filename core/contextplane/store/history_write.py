"""Appending to the embedded store's lifecycle history: a write batch's position, a change's entry
in the same ``UPDATE`` that makes it, a purge's events (where they live and why: ``history``).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import apsw

from contextplane.errors import StoreError
from contextplane.memory.history import (
    EVENT_NAMES,
)
from contextplane.store.columns import SELECT_NAMES
from contextplane.store.history_spec import STATE_COLUMNS as STATE_COLUMNS

_STATE_LIST: Final[str] = ", ".join(STATE_COLUMNS)
#: The state cells of a ``SELECT_COLUMNS`` row, in ``STATE_COLUMNS`` order.
state_of: Final[Callable[[Sequence[Any]], tuple[Any, ...]]] = operator.itemgetter(
    *(SELECT_NAMES.index(name) for name in STATE_COLUMNS)
)

#: A change's entry: its seq, time, name, actor and detail (bound), then the row's cells before it.
ENTRY_SQL: Final[str] = f"coalesce(history, '') || json_array(?, ?, ?, ?, json(?), {_STATE_LIST}) || char(10)"
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


def latest_seq(conn: apsw.Connection) -> int:
    """The history's last position. Read here, not through ``migrate.scalar``: every turn reads
    it (replay needs it), and the migrations' state module has no other business on a turn."""
    row: Any = conn.execute("SELECT coalesce(max(seq), 0) FROM chunk_log").fetchone()
    return int(row[0])


def chunk_ids(values: Iterable[str]) -> list[int]:
    return [int(v) for v in values if str(v).isdigit()]
