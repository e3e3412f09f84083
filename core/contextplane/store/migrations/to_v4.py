"""Schema version 3 -> 4: each row's history kept in the row.

Version 4 keeps each row's history in the row (``chunks.history``, ``created_seq``) with a
store-wide ``chunk_log`` and ``chunk_gone`` for purged rows (``store.history`` says why: a
history table of its own cost a review-state change 1.28x). A version-3 ``chunk_history`` is
converted in one transaction, every ``seq`` kept, and dropped (``ensure_v4_history``), and the
same transaction stamps the version (``stamp``): a conversion that fails leaves the version-3
store as it was.
"""

from __future__ import annotations

from typing import Final

import apsw

from contextplane.store.migrations.stamp import stamp_current
from contextplane.store.migrations.state import add_columns, column_names, table_exists, write_transaction
from contextplane.store.migrations.to_v3 import V3_TRIGGERS

#: Version 4 keeps each row's history in the row (``contextplane.store.history`` says why):
#: ``chunks.history`` (its change entries, appended, never rewritten) and ``chunks.created_seq``
#: (the position of its write), a store-wide ``chunk_log`` (one small row per change, write
#: batch and purged row: the order and "what changed after"), and ``chunk_gone`` (a purged
#: row's history, moved there before the row is deleted). All guarded by triggers.
V4_COLUMNS: Final[tuple[tuple[str, str], ...]] = (("history", "TEXT"), ("created_seq", "INTEGER"))

V4_HISTORY_SQL: Final[str] = """
CREATE TABLE IF NOT EXISTS chunk_log (
    seq INTEGER PRIMARY KEY,
    chunk_id INTEGER NOT NULL,
    last_id INTEGER,
    at TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'change'
);
CREATE TABLE IF NOT EXISTS chunk_gone (
    chunk_id INTEGER PRIMARY KEY,
    created_seq INTEGER,
    created_at TEXT,
    source_type TEXT,
    history TEXT,
    review_state TEXT,
    expires_at TEXT,
    invalidated_at TEXT,
    invalidation_reason TEXT,
    updated_at TEXT,
    purged_seq INTEGER NOT NULL,
    purged_at TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS chunk_log_no_update BEFORE UPDATE ON chunk_log BEGIN
    SELECT RAISE(ABORT, 'chunk_log is append-only: events are never rewritten');
END;
CREATE TRIGGER IF NOT EXISTS chunk_log_no_delete BEFORE DELETE ON chunk_log BEGIN
    SELECT RAISE(ABORT, 'chunk_log is append-only: events are never deleted');
END;
CREATE TRIGGER IF NOT EXISTS chunk_gone_no_update BEFORE UPDATE ON chunk_gone BEGIN
    SELECT RAISE(ABORT, 'chunk_gone is append-only: a purged row''s history is never rewritten');
END;
CREATE TRIGGER IF NOT EXISTS chunk_gone_no_delete BEFORE DELETE ON chunk_gone BEGIN
    SELECT RAISE(ABORT, 'chunk_gone is append-only: a purged row''s history is never deleted');
END;
CREATE TRIGGER IF NOT EXISTS chunks_history_append AFTER UPDATE OF history ON chunks
WHEN old.history IS NOT NULL
     AND (new.history IS NULL OR substr(new.history, 1, length(old.history)) != old.history) BEGIN
    SELECT RAISE(ABORT, 'chunks.history is append-only: a change appends its entry, nothing rewrites one');
END;
CREATE TRIGGER IF NOT EXISTS chunks_history_kept BEFORE DELETE ON chunks
WHEN NOT EXISTS (SELECT 1 FROM chunk_gone WHERE chunk_id = old.id) BEGIN
    SELECT RAISE(ABORT, 'a memory row is deleted only by purge, which keeps its history first');
END;
"""


_KEPT: Final[str] = "chunks_history_kept"


def ensure_v4_objects(conn: apsw.Connection) -> list[str]:
    """Create what version 4 adds (caller holds the write transaction); return columns added."""
    added = add_columns(conn, V4_COLUMNS)
    conn.execute(V4_HISTORY_SQL)
    return added


def v4_due(conn: apsw.Connection) -> bool:
    """Anything of version 4 missing, or a version-3 history still to convert."""
    return (
        table_exists(conn, "chunk_history")
        or not table_exists(conn, "chunk_log")
        or bool({n for n, _ in V4_COLUMNS} - column_names(conn, "chunks"))
        or not table_exists(conn, "chunk_gone")
        or not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?", (_KEPT,)
        ).fetchall()
    )


def ensure_v4_history(conn: apsw.Connection) -> list[str]:
    """Version 4's columns, tables and triggers, if any is missing; a version-3 store's
    ``chunk_history`` is converted in the same transaction (``_convert_v3_history``) and dropped.
    Idempotent; returns the columns added."""
    if not table_exists(conn, "chunks") or not v4_due(conn):
        return []
    with write_transaction(conn):
        if not v4_due(conn):
            return []
        added = ensure_v4_objects(conn)
        if table_exists(conn, "chunk_history"):
            _convert_v3_history(conn)
        added += stamp_current(conn)
    return added


def _convert_v3_history(conn: apsw.Connection) -> None:
    """A version-3 history into version 4's layout, every ``seq`` kept (a turn recorded on the
    store names a position by it). Each event but ``migrated`` becomes a log row; a row's
    change events become its entries, each with the state the event before it left (a window
    over the row's events); a ``created`` event becomes ``created_seq`` (and, with a detail,
    the row's first entry); a purged row moves to ``chunk_gone``. A ``migrated`` event needs
    nothing: its state is the first entry's before-cells, and the baseline id is in ``_kb_meta``."""
    conn.execute(
        "INSERT INTO chunk_log(seq, chunk_id, last_id, at, kind) SELECT seq, chunk_id, NULL, at, "
        "CASE event WHEN 'created' THEN 'created' WHEN 'purged' THEN 'purged' ELSE 'change' END "
        "FROM chunk_history WHERE event != 'migrated' ORDER BY seq"
    )
    conn.execute(
        "CREATE TEMP TABLE v3_histories AS SELECT chunk_id, "
        "group_concat(entry || char(10), '' ORDER BY seq) AS text FROM ("
        "SELECT chunk_id, seq, CASE WHEN event = 'created' "
        "THEN json_array(seq, at, 'created', actor, json(detail), NULL, NULL, NULL, NULL, NULL) "
        "ELSE json_array(seq, at, event, actor, json(detail), b_review, b_expires, b_invalidated, "
        "b_reason, b_updated) END AS entry, event, detail FROM ("
        "SELECT *, lag(review_state) OVER w AS b_review, lag(expires_at) OVER w AS b_expires, "
        "lag(invalidated_at) OVER w AS b_invalidated, lag(invalidation_reason) OVER w AS b_reason, "
        "lag(updated_at) OVER w AS b_updated FROM chunk_history "
        "WINDOW w AS (PARTITION BY chunk_id ORDER BY seq))"
        ") WHERE event NOT IN ('migrated', 'purged') AND NOT (event = 'created' AND detail IS NULL) "
        "GROUP BY chunk_id"
    )
    conn.execute(
        "UPDATE chunks SET created_seq = h.seq FROM (SELECT chunk_id, seq FROM chunk_history "
        "WHERE event = 'created') AS h WHERE h.chunk_id = chunks.id"
    )
    conn.execute(
        "UPDATE chunks SET history = h.text FROM temp.v3_histories AS h WHERE h.chunk_id = chunks.id"
    )
    conn.execute(
        "INSERT INTO chunk_gone(chunk_id, created_seq, created_at, source_type, history, review_state, "
        "expires_at, invalidated_at, invalidation_reason, updated_at, purged_seq, purged_at) "
        "SELECT p.chunk_id, c.seq, c.at, c.actor, h.text, p.review_state, p.expires_at, p.invalidated_at, "
        "p.invalidation_reason, p.updated_at, p.seq, p.at FROM chunk_history AS p "
        "LEFT JOIN chunk_history AS c ON c.chunk_id = p.chunk_id AND c.event = 'created' "
        "LEFT JOIN temp.v3_histories AS h ON h.chunk_id = p.chunk_id "
        "WHERE p.event = 'purged' AND p.chunk_id NOT IN (SELECT id FROM chunks)"
    )
    conn.execute("DROP TABLE temp.v3_histories")
    for name in V3_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute("DROP TABLE chunk_history")
