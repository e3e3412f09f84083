"""The migration registry: the schema version steps in order, and running them.

A store is brought to the current schema in two phases. The schema phase runs every step's
objects (columns by ``ALTER``, tables, indexes, triggers; no row rewritten): a new store gets
all of them in one transaction (``create_fresh``), an existing one each step that has anything
missing, in order, each in its own transaction (``ensure_schema``). The row phase then runs the
pending passes (``backfill``): resumable, in batches, every row rewritten at most once.

Why steps are data: a new schema version is one module (``to_vN.py``: its columns, objects,
passes and upgrade) and one line here; ``checks.require_current``, ``create_fresh`` and the
tests read the same list, so nothing else has to remember it. The read path's upkeep
(``read_path``) is not a version step: it runs at every open, after this.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import apsw
import attrs

from contextplane.memory.model import format_timestamp, utc_now
from contextplane.store.migrations.backfill import (
    content_hash_rows_left,
    migrate_content_hashes,
    pending_passes,
    pending_v3_passes,
    repair_nonpositive_ids,
    rows_left,
    run_passes,
)
from contextplane.store.migrations.read_path import ensure_read_indexes
from contextplane.store.migrations.state import (
    CONTENT_HASH_BACKFILL,
    DEFAULT_BATCH_ROWS,
    HISTORY_BACKFILL,
    META_SQL,
    PASSES,
    SCHEMA_VERSION,
    V3_PASSES,
    BatchCallback,
    check_schema_version,
    log,
    meta_set,
    schema_version,
    table_exists,
    write_transaction,
)
from contextplane.store.migrations.to_v2 import CHUNKS_V2_SQL, V2_COLUMNS, ensure_v2_objects, ensure_v2_schema
from contextplane.store.migrations.to_v3 import (
    V3_COLUMNS,
    ensure_v3_objects,
    ensure_v3_schema,
    history_due,
    start_history,
)
from contextplane.store.migrations.to_v4 import V4_COLUMNS, ensure_v4_history, ensure_v4_objects
from contextplane.store.migrations.to_v5 import V5_COLUMNS, ensure_v5_objects
from contextplane.store.migrations.v1_input import normalise_chunks


@attrs.frozen
class Step:
    """One schema version step: what it adds to a store and how an existing store gets it."""

    #: The schema version a store has once this step (and every one before it) is done.
    version: int
    #: The ``chunks`` columns it adds: nullable, so the ``ALTER`` is O(1).
    columns: tuple[tuple[str, str], ...]
    #: Its row passes, in the order they run; each has a completion marker in ``_kb_meta``.
    passes: tuple[str, ...]
    #: Its objects, inside the caller's write transaction (a new store, or the step's upgrade);
    #: returns the columns added.
    create: Callable[[apsw.Connection], list[str]]
    #: Bring an existing store to it: its own transaction, only when something is missing,
    #: idempotent; told whether ``normalise_chunks`` just rewrote the table (which loses its
    #: triggers and indexes). ``None``: its objects come with the version stamp (``stamp``).
    ensure: Callable[[apsw.Connection, bool], list[str]] | None


#: Every step from the oldest supported version (``state.OLDEST_VERSION``) to ``SCHEMA_VERSION``,
#: in order. Version 3 and 4 find a rewritten table's lost indexes and triggers by name.
STEPS: tuple[Step, ...] = (
    Step(2, V2_COLUMNS, PASSES, ensure_v2_objects, ensure_v2_schema),
    Step(3, V3_COLUMNS, V3_PASSES, ensure_v3_objects, lambda conn, _rewritten: ensure_v3_schema(conn)),
    Step(4, V4_COLUMNS, (), ensure_v4_objects, lambda conn, _rewritten: ensure_v4_history(conn)),
    Step(5, V5_COLUMNS, (), ensure_v5_objects, None),
)


def create_fresh(conn: apsw.Connection) -> None:
    """A new store at the current version: the v2 table, then every step's objects in order, and
    every step's pass markers stamped (nothing to scan)."""
    stamp = f"fresh {format_timestamp(utc_now())}"
    with write_transaction(conn):
        if table_exists(conn, "chunks"):  # another process won the race
            return
        conn.execute(META_SQL)
        conn.execute(CHUNKS_V2_SQL)
        for step in STEPS:
            step.create(conn)
        for name in (name for step in STEPS for name in step.passes):
            meta_set(conn, name, stamp)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


@attrs.frozen
class MigrationResult:
    """What ``ensure_schema`` did to a store (``contextplane migrate`` prints it)."""

    created: bool
    from_version: int
    added_columns: tuple[str, ...]
    passes_run: tuple[str, ...]
    rows_visited: int
    #: What bringing a version-1 ``chunks`` table to the v2 shape did (``normalise_chunks``),
    #: and rows of id 0 or below backfilled after the fact (``repair_nonpositive_ids``).
    normalised: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.created or self.added_columns or self.passes_run or self.normalised)


def ensure_schema(
    conn: apsw.Connection,
    path: str,
    *,
    on_batch: BatchCallback | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    content_hash_rows: int | None = None,
) -> MigrationResult:
    """Bring any store to the current schema: create it, or upgrade and backfill it.

    ``content_hash_rows``: how many rows the content-key pass may key now (``None``, as
    ``contextplane migrate`` runs it: all of them). The store's open passes
    ``INLINE_CONTENT_HASH_MAX_ROWS``: a store with more rows to key than that is left to key
    later (``migrate_content_hashes``), and a later open keys that many more."""
    from_version = check_schema_version(conn, path)
    if not table_exists(conn, "chunks"):
        create_fresh(conn)
        if from_version == 0 and schema_version(conn) == SCHEMA_VERSION:
            return MigrationResult(True, from_version, (), (), 0)
    normalised = list(normalise_chunks(conn, path))
    added: list[str] = []
    for step in STEPS:  # in order; each in its own transaction, and only when something is missing
        if step.ensure is not None:
            added.extend(step.ensure(conn, bool(normalised)))
    passes = tuple(pending_passes(conn))
    history = history_due(conn)
    keys_pending = CONTENT_HASH_BACKFILL in pending_v3_passes(conn)
    finish = keys_pending and (
        content_hash_rows is None or content_hash_rows_left(conn, content_hash_rows + 1) <= content_hash_rows
    )
    # The v2 row pass, with the content key in it when the key is done now too (a v1 store
    # through `contextplane migrate`, or a small one): each row is read and rewritten once.
    first = passes + ((CONTENT_HASH_BACKFILL,) if finish and passes else ())
    later = (CONTENT_HASH_BACKFILL,) if finish and not passes else ()
    # One progress report over both phases: (rows done, rows total).
    report_first = report_later = None
    if on_batch is not None:
        first_rows = rows_left(conn, first) if first else 0
        later_rows = rows_left(conn, later) if later else 0
        report_first = functools.partial(_report, on_batch, 0, first_rows + later_rows)
        report_later = functools.partial(_report, on_batch, first_rows, first_rows + later_rows)
    if first:
        # The read path's always-on index before the row pass: built over rows no pass has
        # stamped 'always' yet it is a scan without a sort, and the pass adds each row to it.
        ensure_read_indexes(conn)
    visited = run_passes(conn, first, on_batch=report_first, batch_rows=batch_rows) if first else 0
    # Before the history starts: a repaired cell is the state the history starts from.
    repaired = repair_nonpositive_ids(conn)
    ran = list(passes)
    if history and start_history(conn) and HISTORY_BACKFILL not in ran:
        ran.append(HISTORY_BACKFILL)
    if later:
        visited = max(visited, migrate_content_hashes(conn, on_batch=report_later, batch_rows=batch_rows))
    elif keys_pending and not finish:
        if passes or history:  # this open migrated the store: its rows are keyed later
            log.warning(
                "%s: more than %d rows have no content key yet; a write finds its exact duplicates "
                "among them through the full-text index until `contextplane migrate` keys them "
                "(resumable, in batches), and each later open keys %d more",
                path,
                content_hash_rows,
                content_hash_rows,
            )
        elif content_hash_rows:
            migrate_content_hashes(conn, batch_rows=batch_rows, limit=content_hash_rows)
    if finish:
        ran.append(CONTENT_HASH_BACKFILL)
    repaired += repair_nonpositive_ids(conn)
    if repaired:
        normalised.append(f"backfilled {repaired} rows with an id of 0 or below")
    return MigrationResult(False, from_version, tuple(added), tuple(ran), visited, tuple(normalised))


def _report(on_batch: BatchCallback, offset: int, total: int, done: int, _phase_total: int) -> None:
    on_batch(offset + done, total)
