"""The read path's upkeep at open (issue 11): the always-on index, the stemmed full-text index
(``stemming``) and the planner's statistics.

Steps that are not part of a schema version and do not change ``SCHEMA_VERSION``: each is
idempotent, marked done in ``_kb_meta`` under its own key, and safe to run from several
processes at once (every decision is re-read inside the write transaction that acts on it).
"""

from __future__ import annotations

from typing import Final

import apsw

from contextplane.memory.model import format_timestamp, utc_now
from contextplane.store.migrations.state import (
    log,
    meta_get,
    meta_set,
    scalar,
    table_exists,
    write_transaction,
)
from contextplane.store.migrations.stemming import (
    INLINE_STEMMING_MAX_ROWS,
    migrate_stemming,
    stemming_pending,
    stemming_rows_left,
)

#: Marker: the read-path indexes exist (the always-on list and the deliverable filter).
READ_INDEXES: Final[str] = "read_indexes"

#: The always-on list reads its 20 rows by scope from an index of only the always-on rows,
#: instead of every row in scope (the namespace index alone: 274 ms at 1M). Partial, so it is
#: tiny and building it is one table scan (no sort of a million keys inside a migration).
_READ_INDEX_SQL: Final[tuple[str, ...]] = (
    "CREATE INDEX IF NOT EXISTS chunks_always ON chunks(namespace, id) WHERE delivery_policy = 'always'",
    # an earlier schema-3 build indexed every non-NULL policy for the same lookup: one is enough
    "DROP INDEX IF EXISTS chunks_delivery_policy",
)


def ensure_read_indexes(conn: apsw.Connection) -> bool:
    """Create the read-path indexes once; True when this call created them."""
    if not table_exists(conn, "chunks") or _read_indexes_done(conn):
        return False
    with write_transaction(conn):
        if _read_indexes_done(conn):
            return False
        for statement in _READ_INDEX_SQL:
            conn.execute(statement)
        meta_set(conn, READ_INDEXES, format_timestamp(utc_now()))
    return True


def _read_indexes_done(conn: apsw.Connection) -> bool:
    if meta_get(conn, READ_INDEXES) is None:
        return False
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'chunks_always'")
    return found.fetchone() is not None


#: Marker: the row count at the last ``ANALYZE`` (the planner's statistics).
ANALYZED_ROWS: Final[str] = "analyzed_rows"
#: Statistics are refreshed when the table has doubled since they were taken (and from 1,000
#: rows on: below that every plan is fast). ``analysis_limit`` samples, so ANALYZE takes
#: milliseconds at 1M rows.
_ANALYZE_MIN_ROWS: Final[int] = 1_000


def analyze_due(conn: apsw.Connection) -> bool:
    """The table has doubled since the last statistics (from ``_ANALYZE_MIN_ROWS`` rows on)."""
    rows = int(scalar(conn, "SELECT coalesce(max(id), 0) FROM chunks"))
    last = int(meta_get(conn, ANALYZED_ROWS) or 0)
    return rows >= _ANALYZE_MIN_ROWS and rows >= 2 * last


def maybe_analyze(conn: apsw.Connection) -> bool:
    """Refresh the planner's statistics when due (see ``analyze_due``); True when it ran."""
    if not table_exists(conn, "chunks") or not analyze_due(conn):
        return False
    with write_transaction(conn):
        rows = int(scalar(conn, "SELECT coalesce(max(id), 0) FROM chunks"))
        conn.execute("PRAGMA analysis_limit = 1000")
        conn.execute("ANALYZE chunks")
        meta_set(conn, ANALYZED_ROWS, str(rows))
    return True


def prepare_read_path(conn: apsw.Connection, path: str) -> None:
    """At open, after ``ensure_schema``: the read indexes, the stemmed full-text index (at once
    up to ``INLINE_STEMMING_MAX_ROWS`` rows, else one warning naming the command that builds
    it) and fresh planner statistics when due."""
    ensure_read_indexes(conn)
    if stemming_pending(conn):
        left = stemming_rows_left(conn)
        if left <= INLINE_STEMMING_MAX_ROWS:
            migrate_stemming(conn)
        else:
            log.warning(
                "%s: the full-text index is not stemmed yet (%d rows to index); searches use the "
                "old index until `contextplane migrate` builds the new one (resumable, in batches)",
                path,
                left,
            )
    maybe_analyze(conn)
