"""The stemmed full-text index: rebuilding ``chunks_fts`` with the Porter tokenizer beside the
old one, in resumable batches, and swapping the two in the last transaction.

Not a schema version: like every read-path step (``read_path``) it is idempotent, marked done in
``_kb_meta`` under its own key, and safe to run from several processes at once (every decision
is re-read inside the write transaction that acts on it). The store stays readable throughout:
searches use the old index until the swap.
"""

from __future__ import annotations

from typing import Final

import apsw

from contextplane.errors import StoreError
from contextplane.memory.model import format_timestamp, utc_now
from contextplane.store.migrations.fts import FTS_CONFIG, FTS_TRIGGERS, STEMMED_FTS_SQL
from contextplane.store.migrations.state import (
    DEFAULT_BATCH_ROWS,
    BatchCallback,
    meta_get,
    meta_set,
    scalar,
    table_exists,
    write_transaction,
)

#: Marker: ``chunks_fts`` uses the stemming tokenizer.
STEMMED_FTS: Final[str] = "stemmed_fts"
#: Rows the stemming step indexes at open; a larger store keeps its old index (readable, just
#: unstemmed) until ``contextplane migrate`` runs the step, in resumable batches.
INLINE_STEMMING_MAX_ROWS: Final[int] = 50_000

_STEM_TABLE: Final[str] = "chunks_fts_stem"
_STEM_CURSOR: Final[str] = "stemmed_fts_cursor"
_STEM_HIGH: Final[str] = "stemmed_fts_high"
#: While the stemmed index is being built beside the old one, writes keep it current: rows past
#: the high-water mark (written after the build began) and rows the build already covered.
_COVERED: Final[str] = (
    "({id} > (SELECT CAST(value AS INTEGER) FROM _kb_meta WHERE key = '" + _STEM_HIGH + "') OR "
    "{id} <= (SELECT CAST(value AS INTEGER) FROM _kb_meta WHERE key = '" + _STEM_CURSOR + "'))"
)
_STEM_ADD: Final[str] = (
    f"INSERT INTO {_STEM_TABLE}(rowid, content, heading) VALUES (new.id, new.content, new.heading)"
)
_STEM_DELETE: Final[str] = (
    f"INSERT INTO {_STEM_TABLE}({_STEM_TABLE}, rowid, content, heading) "
    "VALUES ('delete', old.id, old.content, old.heading)"
)
_STEM_TRIGGERS: Final[tuple[str, ...]] = (
    f"CREATE TRIGGER IF NOT EXISTS {_STEM_TABLE}_ai AFTER INSERT ON chunks "
    f"WHEN {_COVERED.format(id='new.id')} BEGIN {_STEM_ADD}; END",
    f"CREATE TRIGGER IF NOT EXISTS {_STEM_TABLE}_ad AFTER DELETE ON chunks "
    f"WHEN {_COVERED.format(id='old.id')} BEGIN {_STEM_DELETE}; END",
    f"CREATE TRIGGER IF NOT EXISTS {_STEM_TABLE}_au AFTER UPDATE OF content, heading ON chunks "
    f"WHEN {_COVERED.format(id='old.id')} BEGIN {_STEM_DELETE}; {_STEM_ADD}; END",
)


def stemming_pending(conn: apsw.Connection) -> bool:
    """The store has rows to search and its index is not the stemmed one yet."""
    return table_exists(conn, "chunks") and meta_get(conn, STEMMED_FTS) is None


def stemming_rows_left(conn: apsw.Connection) -> int:
    """Rows the stemming step has still to index (0 when done)."""
    if not stemming_pending(conn):
        return 0
    cursor = int(meta_get(conn, _STEM_CURSOR) or 0)
    high = meta_get(conn, _STEM_HIGH)
    if high is None:
        return int(scalar(conn, "SELECT count(*) FROM chunks"))
    return int(scalar(conn, "SELECT count(*) FROM chunks WHERE id > ? AND id <= ?", (cursor, int(high))))


def migrate_stemming(
    conn: apsw.Connection,
    *,
    on_batch: BatchCallback | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> int:
    """Rebuild ``chunks_fts`` with the stemming tokenizer; return the rows indexed.

    The new index is built beside the old one, in id-ordered batches, each committed with its
    cursor (a kill resumes from the cursor; a batch is never indexed twice because the cursor
    moves in the same transaction). Rows written meanwhile reach the new index through its
    triggers. Searches keep reading the old index until the last transaction swaps the two,
    so the store stays readable and consistent throughout. An empty store swaps at once."""
    if not stemming_pending(conn):
        return 0
    if batch_rows < 1:
        raise StoreError(f"batch_rows: {batch_rows} must be at least 1")
    with write_transaction(conn):
        if not stemming_pending(conn):
            return 0
        if not table_exists(conn, _STEM_TABLE):
            conn.execute(STEMMED_FTS_SQL.replace("TABLE chunks_fts", f"TABLE {_STEM_TABLE}", 1))
            for key, value in FTS_CONFIG.items():
                conn.execute(f"INSERT INTO {_STEM_TABLE}({_STEM_TABLE}, rank) VALUES (?, ?)", (key, value))
            high = int(scalar(conn, "SELECT coalesce(max(id), 0) FROM chunks"))
            # below the lowest id: a version-1 store may hold ids of 0 and below
            low = int(scalar(conn, "SELECT min(coalesce(min(id), 1), 1) - 1 FROM chunks"))
            meta_set(conn, _STEM_HIGH, str(high))
            meta_set(conn, _STEM_CURSOR, str(low))
            for trigger in _STEM_TRIGGERS:
                conn.execute(trigger)
    total = stemming_rows_left(conn)
    done = 0
    while True:
        with write_transaction(conn):
            if not stemming_pending(conn):
                return done
            cursor = int(meta_get(conn, _STEM_CURSOR) or 0)
            high = int(meta_get(conn, _STEM_HIGH) or 0)
            row = conn.execute(
                "SELECT id FROM chunks WHERE id > ? AND id <= ? ORDER BY id LIMIT 1 OFFSET ?",
                (cursor, high, batch_rows - 1),
            ).fetchone()
            upto = high if row is None else int(row[0])
            if cursor < upto:
                conn.execute(
                    f"INSERT INTO {_STEM_TABLE}(rowid, content, heading) "
                    "SELECT id, content, heading FROM chunks WHERE id > ? AND id <= ? ORDER BY id",
                    (cursor, upto),
                )
                done += int(conn.changes())
            meta_set(conn, _STEM_CURSOR, str(upto))
            if upto >= high:
                _swap_stemmed(conn)
        if on_batch is not None:
            on_batch(min(done, total), total)
        if upto >= high:
            return done


def _swap_stemmed(conn: apsw.Connection) -> None:
    """Inside the build's last transaction: the stemmed index becomes ``chunks_fts``."""
    for name in ("ai", "ad", "au"):
        conn.execute(f'DROP TRIGGER IF EXISTS "chunks_fts_{name}"')
        conn.execute(f'DROP TRIGGER IF EXISTS "{_STEM_TABLE}_{name}"')
    conn.execute("DROP TABLE IF EXISTS chunks_fts")
    conn.execute(f"ALTER TABLE {_STEM_TABLE} RENAME TO chunks_fts")
    for body in FTS_TRIGGERS.values():
        conn.execute(body)
    conn.execute(f"DELETE FROM _kb_meta WHERE key IN ('{_STEM_CURSOR}', '{_STEM_HIGH}')")
    meta_set(conn, STEMMED_FTS, format_timestamp(utc_now()))
