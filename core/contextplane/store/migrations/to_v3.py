"""Schema version 2 -> 3: the lifecycle history starts, and every row gets the content key
consolidation looks exact duplicates up by.

Version 3 adds the nullable ``content_hash`` column and its indexes and visits no row at
migration: written per row, the events and keys cost a million-row migration four times its v2
rewrite. ``history_backfill`` starts the history in one transaction (when, and up to which id:
``start_history``): a row up to that id has a ``migrated`` event, its state then read from its
first change's entry (the cells before the change) or from the row while it has not changed.
``content_hash_backfill`` keys the rows in resumable batches (``backfill``). Version 3's own
history table is documented here as the version-4 conversion's input (``to_v4``).
"""

from __future__ import annotations

from typing import Final

import apsw

from contextplane.memory.model import format_timestamp, utc_now
from contextplane.store.migrations.state import (
    HISTORY_BACKFILL,
    META_SQL,
    add_columns,
    column_names,
    cursor_key,
    meta_get,
    meta_set,
    scalar,
    table_exists,
    write_transaction,
)

#: What version 3 kept the lifecycle history in: one row per event, the row's lifecycle state
#: after it, with a per-row index. Kept here as the version-4 conversion's documented input
#: (``ensure_v4_history``); no store is created with it any more.
V3_HISTORY_SQL: Final[str] = """
CREATE TABLE IF NOT EXISTS chunk_history (
    seq INTEGER PRIMARY KEY,
    chunk_id INTEGER NOT NULL,
    at TEXT NOT NULL,
    event TEXT NOT NULL,
    actor TEXT NOT NULL DEFAULT '',
    review_state TEXT,
    expires_at TEXT,
    invalidated_at TEXT,
    invalidation_reason TEXT,
    updated_at TEXT,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS chunk_history_chunk ON chunk_history(chunk_id, seq);
CREATE TRIGGER IF NOT EXISTS chunk_history_no_update BEFORE UPDATE ON chunk_history BEGIN
    SELECT RAISE(ABORT, 'chunk_history is append-only: events are never rewritten');
END;
CREATE TRIGGER IF NOT EXISTS chunk_history_no_delete BEFORE DELETE ON chunk_history BEGIN
    SELECT RAISE(ABORT, 'chunk_history is append-only: events are never deleted');
END;
"""
#: Version 3's triggers (the table's guards, and the two that wrote a migrated row's event
#: before its first change), dropped with the table by the conversion.
V3_TRIGGERS: Final[tuple[str, ...]] = (
    "chunk_history_no_update",
    "chunk_history_no_delete",
    "chunks_migrated_baseline",
    "chunk_history_migrated_baseline",
)

#: Columns version 3 adds to ``chunks``: the key exact duplicates are looked up by
#: (``contextplane.memory.consolidation.content_hash``). Nullable, so the ALTER is O(1).
V3_COLUMNS: Final[tuple[tuple[str, str], ...]] = (("content_hash", "INTEGER"),)

#: The duplicate key and same-subject lookups. The always-on section's index is the read
#: path's ``chunks_always`` (``ensure_read_indexes``): one partial index of the always-on rows
#: by scope, now and as of the past.
_V3_INDEXES: Final[str] = """
CREATE INDEX IF NOT EXISTS chunks_subject ON chunks(subject, namespace) WHERE subject != '';
"""
#: The duplicate key's index holds the keyed rows only: created over a migrated store whose rows
#: are not keyed yet it is one scan and no sort, and it grows as the key pass fills them. (A store
#: migrated when the pass ran at once has a full index of this name; the lookups say
#: ``content_hash IS NOT NULL``, so either serves them.)
_CONTENT_HASH_INDEX: Final[str] = (
    "CREATE INDEX IF NOT EXISTS chunks_content_hash ON chunks(content_hash) WHERE content_hash IS NOT NULL"
)

#: When the history of a store that had rows before it starts (its migration to schema 3); every
#: ``migrated`` event carries this one time.
HISTORY_STARTED_KEY: Final[str] = "history_started_at"
#: The largest id when the history started: a row up to it may have no event yet, and is then
#: in the state it was in at the migration (``contextplane.memory.history``).
HISTORY_BASELINE_KEY: Final[str] = "history_baseline_max_id"


def ensure_v3_objects(conn: apsw.Connection) -> list[str]:
    """Create what version 3 adds (caller holds the write transaction); return columns added.
    Its ``chunk_history`` table is not among them any more: version 4 keeps the history in the
    rows (``ensure_v4_objects``), and converts a version-3 table (``ensure_v4_history``)."""
    added = add_columns(conn, V3_COLUMNS)
    conn.execute(_V3_INDEXES)
    conn.execute(_CONTENT_HASH_INDEX)
    return added


def ensure_v3_schema(conn: apsw.Connection) -> list[str]:
    """Version 3's table, column and indexes, if any is missing (idempotent, no row rewritten);
    returns the columns added."""
    indexes = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    if (
        not ({n for n, _ in V3_COLUMNS} - column_names(conn, "chunks"))
        # a version-1 table rewritten in the v2 shape (``normalise_chunks``) lost its indexes
        and {"chunks_subject", "chunks_content_hash"} <= indexes
    ):
        return []
    with write_transaction(conn):
        conn.execute(META_SQL)
        return ensure_v3_objects(conn)


def history_due(conn: apsw.Connection) -> bool:
    """The history has not started yet (``start_history``)."""
    return meta_get(conn, HISTORY_BACKFILL) is None


def start_history(conn: apsw.Connection) -> bool:
    """The history pass (``history_backfill``): the history starts now, for every row already
    there, in one transaction and without visiting a row: record when (``HISTORY_STARTED_KEY``)
    and up to which id (``HISTORY_BASELINE_KEY``). A row up to that id has a ``migrated`` event
    from then on: its state at the migration is what its first change's entry records as the
    state before it, or the row itself until then (``store.history``). True when it did
    anything. Run it after the v2 passes: their backfill of the review state is not a change."""
    if not table_exists(conn, "chunks") or not history_due(conn):
        return False
    with write_transaction(conn):
        if not history_due(conn):
            return False
        if meta_get(conn, HISTORY_STARTED_KEY) is None:
            meta_set(conn, HISTORY_STARTED_KEY, format_timestamp(utc_now()))
        if meta_get(conn, HISTORY_BASELINE_KEY) is None:
            high = str(int(scalar(conn, "SELECT coalesce(max(id), 0) FROM chunks")))
            meta_set(conn, HISTORY_BASELINE_KEY, high)
        meta_set(conn, HISTORY_BACKFILL, format_timestamp(utc_now()))
        # an earlier release's history pass wrote events row by row, with a cursor: done now
        conn.execute("DELETE FROM _kb_meta WHERE key = ?", (cursor_key(HISTORY_BACKFILL),))
    return True
