"""What every migration step reads and stamps: the schema version, the tables and columns a
store has, the ``_kb_meta`` markers and cursors, and the write transaction each step runs in.

Why one module: every step and pass decides from this state, re-read inside the transaction
that acts on it, which is what makes each of them safe to rerun and to race.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any, Final

import apsw

from contextplane.errors import StoreError

SCHEMA_VERSION: Final[int] = 5
#: The oldest schema version a store can be migrated from (the ADR system's ``chunks`` table).
OLDEST_VERSION: Final[int] = 1

log = logging.getLogger("contextplane.store")

TYPED_MEMORY_BACKFILL: Final[str] = "typed_memory_backfill"
REVIEW_STATE_BACKFILL: Final[str] = "review_state_backfill"
PASSES: Final[tuple[str, ...]] = (TYPED_MEMORY_BACKFILL, REVIEW_STATE_BACKFILL)
#: Version 3's passes, run after the v2 ones (each with its own marker and cursor).
HISTORY_BACKFILL: Final[str] = "history_backfill"
CONTENT_HASH_BACKFILL: Final[str] = "content_hash_backfill"
V3_PASSES: Final[tuple[str, ...]] = (HISTORY_BACKFILL, CONTENT_HASH_BACKFILL)

DEFAULT_BATCH_ROWS: Final[int] = 50_000

#: The table every marker, cursor and stamp lives in.
META_SQL: Final[str] = "CREATE TABLE IF NOT EXISTS _kb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"

#: What a failed migration was doing, for the error (``connection.store_error``).
MIGRATING: Final[str] = (
    f"the migration to schema version {SCHEMA_VERSION} (run it again: it resumes where it stopped)"
)

BatchCallback = Callable[[int, int], None]
"""Called after each committed batch with (rows done, rows total)."""


@contextlib.contextmanager
def write_transaction(conn: apsw.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` so the write lock is taken up front and the busy timeout applies
    (a deferred transaction upgrading to a writer can fail at once with SQLITE_BUSY in WAL)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def scalar(conn: apsw.Connection, sql: str, params: Any = ()) -> Any:
    """The first column of the first row (aggregates always return one row)."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise StoreError(f"query returned no row: {sql[:60]}")
    return row[0]


def table_exists(conn: apsw.Connection, name: str) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ? AND type IN ('table', 'view')", (name,))
    return row.fetchone() is not None


def column_names(conn: apsw.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}


def schema_version(conn: apsw.Connection) -> int:
    return int(scalar(conn, "PRAGMA user_version"))


def check_schema_version(conn: apsw.Connection, path: str) -> int:
    """Refuse a store written by a newer contextplane, naming both versions."""
    found = schema_version(conn)
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: the store was written by schema version {found}, but this contextplane "
            f"understands schema version {SCHEMA_VERSION} at most; upgrade contextplane to open it"
        )
    return found


def meta_get(conn: apsw.Connection, key: str) -> str | None:
    """Read one ``_kb_meta`` value (``None`` when absent, or when there is no ``_kb_meta``)."""
    if not table_exists(conn, "_kb_meta"):
        return None
    row = conn.execute("SELECT value FROM _kb_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def meta_set(conn: apsw.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO _kb_meta(key, value) VALUES (?, ?)", (key, value))


def cursor_key(name: str) -> str:
    """The ``_kb_meta`` key a resumable pass keeps its cursor under."""
    return f"{name}_cursor"


def add_columns(conn: apsw.Connection, columns: tuple[tuple[str, str], ...]) -> list[str]:
    """Add those of a step's ``chunks`` columns the table lacks, in order (nullable, so each
    ``ALTER`` is O(1)); return the names added. Caller holds the write transaction."""
    present = column_names(conn, "chunks")
    added = [name for name, _ in columns if name not in present]
    for name, decl in columns:
        if name in added:
            conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {decl}")
    return added
