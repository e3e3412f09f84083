"""The row passes: the resumable, batched backfills that fill what a schema step added to rows
already there (version 2's typed-memory and review-state cells, version 3's content key), and
the repair of rows an earlier migration skipped.

Why it is shaped this way:

- Each pass fills only NULL cells and commits in batches, with a cursor row in ``_kb_meta``
  written in the same transaction as the batch. A process killed part-way leaves committed
  batches plus a cursor; the next open resumes from the cursor. Because every assignment is
  ``COALESCE(cell, rule)``, re-running a batch can never change a row, so no row is lost,
  doubled or misclassified.
- Completion is recorded by one marker per pass. When several are pending they run in the same
  row pass: each row is rewritten once, which is what keeps a 1M-row migration close to one
  ``UPDATE ... CASE``.
- The content key is filled at open for up to ``INLINE_CONTENT_HASH_MAX_ROWS`` rows (in the v2
  row pass when that runs too), beyond that by ``contextplane migrate`` and a batch on each
  later open. Until it is done a write also finds exact duplicates among the unkeyed rows
  through the full-text index (``store.writes``).
"""

from __future__ import annotations

from typing import Any, Final

import apsw

from contextplane.errors import StoreError
from contextplane.memory.consolidation import content_hash
from contextplane.memory.model import format_timestamp, utc_now
from contextplane.store.migrations.rules import PASS_ASSIGNMENTS
from contextplane.store.migrations.state import (
    CONTENT_HASH_BACKFILL,
    DEFAULT_BATCH_ROWS,
    PASSES,
    V3_PASSES,
    BatchCallback,
    column_names,
    cursor_key,
    meta_get,
    meta_set,
    scalar,
    table_exists,
    write_transaction,
)
from contextplane.store.migrations.to_v3 import start_history

#: Rows the content-key pass keys at open (about 0.1 s); a larger store is keyed by
#: ``contextplane migrate``, and this many more rows on each later open (resumable, in batches).
INLINE_CONTENT_HASH_MAX_ROWS: Final[int] = 50_000


def pending_passes(conn: apsw.Connection) -> list[str]:
    """Backfill passes whose completion marker is missing, in the order they must run."""
    return [name for name in PASSES if meta_get(conn, name) is None]


def _pass_start(conn: apsw.Connection, passes: list[str] | tuple[str, ...]) -> int:
    """The id the passes resume after: the lowest of their cursors. Without a cursor a pass
    starts below the smallest id, not at 0: a version-1 store may hold ids of 0 or below, and
    those rows must be backfilled (and given their history) like any other."""
    floor = int(scalar(conn, "SELECT coalesce(min(id), 1) - 1 FROM chunks"))
    return min(int(c) if (c := meta_get(conn, cursor_key(p))) is not None else floor for p in passes)


def run_backfill(
    conn: apsw.Connection,
    *,
    on_batch: BatchCallback | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> int:
    """Run every pending version-2 backfill pass in id-ordered batches; return rows visited.

    Pending passes share one row pass (each row rewritten once). Each batch commits together
    with its cursor, so a kill between or inside batches loses nothing and redoes at most
    one batch, harmlessly (``COALESCE`` keeps any cell already filled)."""
    return run_passes(conn, tuple(pending_passes(conn)), on_batch=on_batch, batch_rows=batch_rows)


def run_passes(
    conn: apsw.Connection,
    passes: tuple[str, ...],
    *,
    on_batch: BatchCallback | None,
    batch_rows: int,
    limit: int | None = None,
) -> int:
    """Run ``passes`` (any of ``PASSES`` and the content-key pass, in that order) in one
    id-ordered row pass; return rows visited. Per batch, in one transaction with every pass's
    cursor, one ``UPDATE`` fills the v2 cells and, when that pass is among them, the content key
    (each row rewritten once: a second rewrite for the key costs as much as the first, mostly in
    page splits as the rows grow). The passes' markers are stamped in order when the last batch
    is done; with ``limit``, the pass stops after about that many rows, unstamped."""
    if not passes:
        return 0
    if batch_rows < 1:
        raise StoreError(f"batch_rows: {batch_rows} must be at least 1")
    v2 = [p for p in passes if p in PASSES]
    hashes = CONTENT_HASH_BACKFILL in passes
    if hashes:
        conn.create_scalar_function("contextplane_content_hash", content_hash_sql, 1, deterministic=True)
    assignments = [PASS_ASSIGNMENTS[p] for p in v2]
    if assignments:
        if hashes:
            assignments.append("content_hash = COALESCE(content_hash, contextplane_content_hash(content))")
        update = f"UPDATE chunks SET {', '.join(assignments)} WHERE id > :lo AND id <= :hi"
    else:  # the cells are filled: rewrite only the rows without a key
        update = (
            "UPDATE chunks SET content_hash = contextplane_content_hash(content) "
            "WHERE id > :lo AND id <= :hi AND content_hash IS NULL"
        )
    start = _pass_start(conn, passes)
    max_id = int(scalar(conn, "SELECT coalesce(max(id), 0) FROM chunks"))
    if limit is not None:
        batch_rows = max(1, min(batch_rows, limit))
    total = 0
    if on_batch is not None:  # counting a million rows is a twentieth of the pass: only for progress
        if limit is None:
            total = int(scalar(conn, "SELECT count(*) FROM chunks WHERE id > ?", (start,)))
        else:
            bounded = "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE id > ? LIMIT ?)"
            total = int(scalar(conn, bounded, (start, limit)))
    done = 0
    lo = start
    while lo < max_id:
        if limit is not None and done >= limit:
            return done
        row = conn.execute(
            "SELECT id FROM chunks WHERE id > ? ORDER BY id LIMIT 1 OFFSET ?", (lo, batch_rows - 1)
        ).fetchone()
        hi = max_id if row is None else min(int(row[0]), max_id)
        with write_transaction(conn):
            conn.execute(update, {"lo": lo, "hi": hi})
            for p in passes:
                meta_set(conn, cursor_key(p), str(hi))
        if row is not None:  # ids are unique: the batch is exactly ``batch_rows`` rows
            done += batch_rows
        else:
            done += int(scalar(conn, "SELECT count(*) FROM chunks WHERE id > ? AND id <= ?", (lo, hi)))
        lo = hi
        if on_batch is not None:
            on_batch(min(done, total), total)
    stamp = format_timestamp(utc_now())
    with write_transaction(conn):
        for p in passes:  # in order: D4, then D7's review state, then the content key
            meta_set(conn, p, stamp)
            conn.execute("DELETE FROM _kb_meta WHERE key = ?", (cursor_key(p),))
    return done


def rows_left(conn: apsw.Connection, passes: tuple[str, ...]) -> int:
    """Rows the passes still have to visit (from the lowest of their cursors)."""
    start = _pass_start(conn, passes)
    return int(scalar(conn, "SELECT count(*) FROM chunks WHERE id > ?", (start,)))


def repair_nonpositive_ids(conn: apsw.Connection) -> int:
    """Backfill rows with an id of 0 or below that an earlier migration stamped as done without
    visiting (its cursor started at 0): their v2 cells once the v2 passes are done, and their
    content key once that pass is. (Their history needs nothing: a row without an event is in
    its migration state, ``start_history``.) Reads one index range; writes only if such rows
    exist. Returns the rows repaired."""
    if pending_passes(conn) or not table_exists(conn, "chunks"):
        return 0
    checks = ["c.id <= 0 AND (c.memory_kind IS NULL OR c.review_state IS NULL)"]
    keys = meta_get(conn, CONTENT_HASH_BACKFILL) is not None
    keys = keys and "content_hash" in column_names(conn, "chunks")
    if keys:
        checks.append("c.id <= 0 AND c.content_hash IS NULL")
    find = f"SELECT c.id FROM chunks AS c WHERE {' OR '.join(f'({c})' for c in checks)}"
    if conn.execute(find + " LIMIT 1").fetchone() is None:
        return 0
    assignments = ", ".join(PASS_ASSIGNMENTS[p] for p in PASSES)
    with write_transaction(conn):
        repaired = len(conn.execute(find).fetchall())
        conn.execute(f"UPDATE chunks AS c SET {assignments} WHERE {checks[0]}")
        if keys:
            conn.create_scalar_function("contextplane_content_hash", content_hash_sql, 1, deterministic=True)
            conn.execute(
                "UPDATE chunks SET content_hash = contextplane_content_hash(content) "
                "WHERE id <= 0 AND content_hash IS NULL"
            )
    return repaired


def content_hash_sql(*values: Any) -> Any:
    """``contextplane_content_hash(content)`` in SQL: the key consolidation computes in Python."""
    return content_hash(values[0])


def pending_v3_passes(conn: apsw.Connection) -> list[str]:
    """Version 3 passes whose completion marker is missing."""
    return [name for name in V3_PASSES if meta_get(conn, name) is None]


def content_hash_rows_left(conn: apsw.Connection, at_most: int | None = None) -> int:
    """Rows the content-key pass has still to visit (0 when done), counted up to ``at_most``."""
    if meta_get(conn, CONTENT_HASH_BACKFILL) is not None or not table_exists(conn, "chunks"):
        return 0
    start = _pass_start(conn, (CONTENT_HASH_BACKFILL,))
    if at_most is None:
        return int(scalar(conn, "SELECT count(*) FROM chunks WHERE id > ?", (start,)))
    bounded = "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE id > ? LIMIT ?)"
    return int(scalar(conn, bounded, (start, at_most)))


def migrate_content_hashes(
    conn: apsw.Connection,
    *,
    on_batch: BatchCallback | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    limit: int | None = None,
) -> int:
    """The content-key pass (``content_hash_backfill``): fill ``content_hash`` where it is NULL,
    in id-ordered batches, each committed with its cursor (a kill resumes from it); the marker
    is stamped when the last row is keyed. ``limit``: stop after about that many rows (whole
    batches), leaving the rest to a later call. Returns the rows visited."""
    if CONTENT_HASH_BACKFILL not in pending_v3_passes(conn):
        return 0
    return run_passes(conn, (CONTENT_HASH_BACKFILL,), on_batch=on_batch, batch_rows=batch_rows, limit=limit)


def run_v3_backfill(
    conn: apsw.Connection,
    *,
    on_batch: BatchCallback | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> int:
    """Run the pending version-3 passes (the history's start, then every row's content key);
    return rows visited."""
    start_history(conn)
    return migrate_content_hashes(conn, on_batch=on_batch, batch_rows=batch_rows)
