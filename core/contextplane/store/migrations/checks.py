"""The refusals at open: a database this contextplane must not touch (``check_openable``, before
anything is written), and a read-only store that would have to be migrated to be read
(``require_current``). Each names what was wrong and what to run; neither writes.
"""

from __future__ import annotations

import apsw

from contextplane.errors import StoreError
from contextplane.store.migrations.backfill import pending_passes, pending_v3_passes
from contextplane.store.migrations.registry import STEPS
from contextplane.store.migrations.state import (
    CONTENT_HASH_BACKFILL,
    SCHEMA_VERSION,
    check_schema_version,
    column_names,
    schema_version,
    table_exists,
)
from contextplane.store.migrations.to_v4 import v4_due
from contextplane.store.migrations.v1_input import (
    ANCHOR_TABLES,
    check_ids,
    inspect_chunks,
    planned_normalisation,
    table_names,
)


def check_openable(conn: apsw.Connection, path: str) -> None:
    """Refuse, before anything is written (not even the journal mode), a database this
    contextplane must not touch: one written by a newer schema, or another application's
    (tables of its own and none of ours). An empty database is fine: it becomes a store."""
    check_schema_version(conn, path)
    names = table_names(conn)
    if names and not ANCHOR_TABLES & set(names):
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        raise StoreError(
            f"{path}: this SQLite database belongs to something else (its tables: {shown}), so "
            "contextplane will not add its tables to it or change it; point --db, store.path or "
            "$CONTEXTPLANE_DB at a contextplane store or at a new file"
        )
    shape = inspect_chunks(conn, path)  # a chunks table of another shape is refused here too
    if shape is not None and shape.rebuild and shape.has_id and not shape.id_is_rowid:
        check_ids(conn, path)


def require_current(conn: apsw.Connection, path: str) -> None:
    """For a store opened read-only: refuse, saying what to run, when opening it would have to
    write (create it, or migrate it); a current store reads as usual."""
    if not table_exists(conn, "chunks"):
        raise StoreError(
            f"{path}: holds no memories (no chunks table), and it is read-only, so it cannot become a "
            "store; point --db, store.path or $CONTEXTPLANE_DB at a memory store"
        )
    todo = [*planned_normalisation(conn, path)]
    columns = column_names(conn, "chunks")
    missing = [n for step in STEPS for n, _ in step.columns if n not in columns]
    if missing or schema_version(conn) < SCHEMA_VERSION or v4_due(conn):
        todo.append(f"bring it to schema version {SCHEMA_VERSION}")
    pending = (*pending_passes(conn), *pending_v3_passes(conn))
    # Rows without a content key read as usual (only a write's duplicate lookup uses the key).
    required = todo + [f"run the {p} pass" for p in pending if p != CONTENT_HASH_BACKFILL]
    todo += [f"run the {p} pass" for p in pending]
    if required:
        raise StoreError(
            f"{path}: the store needs migrating ({'; '.join(todo)}), but it is read-only; run "
            f"`contextplane migrate --db {path}` with write access, or work on a writable copy"
        )
