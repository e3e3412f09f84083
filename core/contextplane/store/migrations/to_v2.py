"""Schema version 1 -> 2: typed memory (ADR D4) and review state (D7).

Why it is shaped this way: the new columns are nullable and additive (``ALTER TABLE ADD
COLUMN``), so a v1 reader still works and rollback is "stop reading them", and no row is
rewritten here. The cells are filled afterwards by the two v2 passes (``backfill``,
``typed_memory_backfill`` then ``review_state_backfill``), resumable, in batches. The full-text
index's triggers are made exactly this version's (``fts``): version 1's fired on every update.
A store's input shape is first brought to the v1 columns by ``v1_input``.
"""

from __future__ import annotations

from typing import Final

import apsw

from contextplane.store.migrations.fts import ensure_fts
from contextplane.store.migrations.stamp import STAMPED_COLUMNS, stamp_current
from contextplane.store.migrations.state import (
    META_SQL,
    SCHEMA_VERSION,
    add_columns,
    column_names,
    schema_version,
    table_exists,
    write_transaction,
)

#: Columns version 2 adds; all nullable so the ALTER is O(1) on SQLite.
V2_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("memory_kind", "TEXT"),
    ("delivery_policy", "TEXT"),
    ("review_state", "TEXT"),
    ("expires_at", "TEXT"),
)

#: The version-2 ``chunks`` table: what a new store is created with (later steps add to it by
#: ``ALTER``) and what a version-1 table of another shape is rewritten to (``v1_input``).
CHUNKS_V2_SQL: Final[str] = """
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    content TEXT NOT NULL,
    heading TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT '',
    subject TEXT NOT NULL DEFAULT '',
    domain TEXT NOT NULL DEFAULT 'general',
    source_type TEXT NOT NULL DEFAULT '',
    namespace TEXT NOT NULL DEFAULT '',
    epoch TEXT NOT NULL DEFAULT '',
    invalidated_at TEXT,
    invalidation_reason TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    memory_kind TEXT,
    delivery_policy TEXT,
    review_state TEXT,
    expires_at TEXT
);
CREATE INDEX IF NOT EXISTS chunks_namespace ON chunks(namespace);
"""


def ensure_v2_objects(conn: apsw.Connection) -> list[str]:
    """Version 2's columns and the full-text index with its triggers (caller holds the write
    transaction); return the columns added."""
    added = add_columns(conn, V2_COLUMNS)
    ensure_fts(conn)
    return added


def upgrade_schema(conn: apsw.Connection) -> list[str]:
    """Add the v2 and v5 columns (nullable, additive), fix the FTS triggers, set the version.
    Returns the columns added. Cheap: no row is rewritten here. The v5 column goes in the
    transaction that stamps the version, so a store stamped 5 always has it."""
    with write_transaction(conn):
        conn.execute(META_SQL)
        added = ensure_v2_objects(conn)
        # A version-3 store is stamped by its conversion, in the conversion's own transaction
        # (``ensure_v4_history``), which adds the v5 column too: one that fails stays a store
        # the release before can open, exactly as it was.
        if not table_exists(conn, "chunk_history"):
            added += stamp_current(conn)
    return added


def ensure_v2_schema(conn: apsw.Connection, rewritten: bool) -> list[str]:
    """``upgrade_schema`` when it has anything to do: a column of version 2 or of the stamp
    missing, an older version, no full-text index, or a table ``normalise_chunks`` just
    rewrote (``rewritten``: the rewrite lost the FTS triggers). Returns the columns added."""
    if (
        rewritten
        or {n for n, _ in (*V2_COLUMNS, *STAMPED_COLUMNS)} - column_names(conn, "chunks")
        or schema_version(conn) < SCHEMA_VERSION
        or not table_exists(conn, "chunks_fts")
    ):
        return upgrade_schema(conn)
    return []
