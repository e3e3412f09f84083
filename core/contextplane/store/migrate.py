"""Schema creation and migration: version 1 -> 2 (ADR D4 backfill, then D7 review state), and
version 2 -> 3 (the lifecycle history and the content key consolidation looks duplicates up by).

Why it is shaped this way:

- The new columns are nullable and additive (``ALTER TABLE ADD COLUMN``), so a v1 reader
  still works and rollback is "stop reading them".
- Each backfill pass fills only NULL cells and commits in batches, with a cursor row in
  ``_kb_meta`` written in the same transaction as the batch. A process killed part-way leaves
  committed batches plus a cursor; the next open resumes from the cursor. Because every
  assignment is ``COALESCE(cell, rule)``, re-running a batch can never change a row, so no row
  is lost, doubled or misclassified.
- Completion is recorded by one marker per pass (``typed_memory_backfill``,
  ``review_state_backfill``). When both are pending they run in the same row pass: each row
  is rewritten once, which is what keeps a 1M-row migration close to one ``UPDATE ... CASE``.
- Full-text triggers fire only on ``UPDATE OF content, heading``: a trigger that fires on every
  metadata update would re-index every row during the backfill (about 10x slower).
- A fresh database is created at the current version with every marker stamped, no scan.
- Version 3 added the lifecycle history and the nullable ``content_hash`` column, and visits no
  row for either at migration: written
  per row, the events and keys cost a million-row migration four times its v2 rewrite.
  ``history_backfill`` starts the history in one transaction (when, and up to which id): a
  row up to that id has a ``migrated`` event, its state then read from its first change's
  entry (the cells before the change) or from the row while it has not changed.
  ``content_hash_backfill`` keys the rows in resumable batches with a cursor, like the stemming
  step: at open for up to ``INLINE_CONTENT_HASH_MAX_ROWS`` rows (in the v2 row pass when that
  runs too), beyond that by ``contextplane migrate`` and a batch on each later open. Until it
  is done a write also finds exact duplicates among the unkeyed rows through the full-text
  index (``store.writes``). The key's index is partial, so creating it over unkeyed rows is
  one scan.
- Version 4 keeps each row's history in the row (``chunks.history``, ``created_seq``) with a
  store-wide ``chunk_log`` and ``chunk_gone`` for purged rows (``store.history`` says why: a
  history table of its own cost a review-state change 1.28x). A version-3 ``chunk_history`` is
  converted in one transaction, every ``seq`` kept, and dropped (``ensure_v4_history``).
- Version 5 adds the nullable ``occurred_at`` column (a memory's event time, beside
  ``created_at``) and a partial index of the rows that have one: an ``ALTER``, no row visited,
  in the same transaction as the version stamp (``upgrade_schema``). Every existing row reads
  as having no event time; its history needs nothing (the event time is not a lifecycle cell).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import Callable, Iterator
from typing import Any, Final

import apsw
import attrs

from contextplane.errors import StoreError
from contextplane.memory.consolidation import content_hash
from contextplane.memory.model import format_timestamp, utc_now
from contextplane.memory.stamps import LEGACY_DOMAIN_TABLE, DomainRule
from contextplane.memory.trust import SOURCE_TYPE_TIERS, UNKNOWN_SOURCE_TIER, initial_review_state

SCHEMA_VERSION: Final[int] = 5

log = logging.getLogger("contextplane.store")

TYPED_MEMORY_BACKFILL: Final[str] = "typed_memory_backfill"
REVIEW_STATE_BACKFILL: Final[str] = "review_state_backfill"
PASSES: Final[tuple[str, ...]] = (TYPED_MEMORY_BACKFILL, REVIEW_STATE_BACKFILL)
#: Version 3's passes, run after the v2 ones (each with its own marker and cursor).
HISTORY_BACKFILL: Final[str] = "history_backfill"
CONTENT_HASH_BACKFILL: Final[str] = "content_hash_backfill"
V3_PASSES: Final[tuple[str, ...]] = (HISTORY_BACKFILL, CONTENT_HASH_BACKFILL)

DEFAULT_BATCH_ROWS: Final[int] = 50_000

#: What a failed migration was doing, for the error (``connection.store_error``).
MIGRATING: Final[str] = (
    f"the migration to schema version {SCHEMA_VERSION} (run it again: it resumes where it stopped)"
)

#: FTS5 settings for bulk loads, stored in the index's own config table. ``hashsize``: pending
#: index entries kept in memory per write transaction (default 1 MiB); 16 MiB means fewer, larger
#: segments. ``automerge``: segments per level before a merge (default 4); 8 halves merge work
#: during ingest. Together about 40k -> 55k rows/s here (bench/store_bench.py).
FTS_CONFIG: Final[dict[str, int]] = {"hashsize": 16 * 1024 * 1024, "automerge": 8}

#: What a version-1 store is: the ``chunks`` table before D4/D7, with a full-text index whose
#: update trigger fires on *every* update. Kept here as the migration's documented input.
V1_SCHEMA_SQL: Final[str] = """
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
    updated_at TEXT NOT NULL
);
CREATE INDEX chunks_namespace ON chunks(namespace);
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    content, heading, content='chunks', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, content, heading) VALUES (new.id, new.content, new.heading);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, content, heading)
    VALUES ('delete', old.id, old.content, old.heading);
END;
CREATE TRIGGER chunks_au AFTER UPDATE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, content, heading)
    VALUES ('delete', old.id, old.content, old.heading);
    INSERT INTO chunks_fts(rowid, content, heading) VALUES (new.id, new.content, new.heading);
END;
PRAGMA user_version = 1;
"""

#: Columns version 2 adds; all nullable so the ALTER is O(1) on SQLite.
V2_COLUMNS: Final[tuple[tuple[str, str], ...]] = (
    ("memory_kind", "TEXT"),
    ("delivery_policy", "TEXT"),
    ("review_state", "TEXT"),
    ("expires_at", "TEXT"),
)

#: Version 5: the event time (``MemoryChunk.occurred_at``), nullable, so the ALTER is O(1), and
#: a partial index for the time filters of ``list_chunks``: a store without event times pays
#: one scan to build an empty index, and a write without one pays nothing.
V5_COLUMNS: Final[tuple[tuple[str, str], ...]] = (("occurred_at", "TEXT"),)
V5_INDEX_SQL: Final[str] = (
    "CREATE INDEX IF NOT EXISTS chunks_occurred ON chunks(namespace, occurred_at) "
    "WHERE occurred_at IS NOT NULL"
)

_CHUNKS_V2_SQL: Final[str] = """
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

_FTS_SQL: Final[str] = (
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(content, heading, content='chunks', "
    "content_rowid='id', tokenize='unicode61 remove_diacritics 2')"
)

#: name -> body. The update trigger is limited to the indexed columns (see module docstring).
_FTS_TRIGGERS: Final[dict[str, str]] = {
    "chunks_fts_ai": """CREATE TRIGGER chunks_fts_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, content, heading) VALUES (new.id, new.content, new.heading);
END""",
    "chunks_fts_ad": """CREATE TRIGGER chunks_fts_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, content, heading)
    VALUES ('delete', old.id, old.content, old.heading);
END""",
    "chunks_fts_au": """CREATE TRIGGER chunks_fts_au AFTER UPDATE OF content, heading ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, content, heading)
    VALUES ('delete', old.id, old.content, old.heading);
    INSERT INTO chunks_fts(rowid, content, heading) VALUES (new.id, new.content, new.heading);
END""",
}

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


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


#: Provenance is matched exactly, as ``trust.trust_tier`` does: an unlisted spelling is unknown
#: provenance and gets the least trust.
_SOURCE_KEY: Final[str] = "source_type"


def _rule_condition(rule: DomainRule) -> str:
    parts = []
    if rule.domain is not None:
        parts.append(f"domain = {_sql_literal(rule.domain)}")
    if rule.source_type is not None:
        parts.append(f"{_SOURCE_KEY} = {_sql_literal(rule.source_type)}")
    return " AND ".join(parts) or "1"


def _case_over_rules(value_of: Callable[[DomainRule], str | None]) -> str:
    """A searched CASE with the table's first-match semantics. Rules after the last one with a
    non-NULL value are left to the implicit ``ELSE NULL``; the catch-all becomes ``ELSE``.
    (Per-row expression cost is most of a 1M-row backfill, so the CASE is kept minimal.)"""
    rules = list(LEGACY_DOMAIN_TABLE)
    while rules and value_of(rules[-1]) is None:
        rules.pop()
    whens = []
    for rule in rules:
        value = value_of(rule)
        literal = "NULL" if value is None else _sql_literal(value)
        if rule.domain is None and rule.source_type is None:
            whens.append(f"ELSE {literal}")
            break
        whens.append(f"WHEN {_rule_condition(rule)} THEN {literal}")
    return "CASE " + " ".join(whens) + " END" if whens else "NULL"


#: SQL generated from the D4 table in ``memory/stamps.py`` and the tier table in ``memory/trust.py``.
KIND_CASE_SQL: Final[str] = _case_over_rules(lambda r: r.memory_kind)
POLICY_CASE_SQL: Final[str] = _case_over_rules(lambda r: r.delivery_policy)
RULE_LABEL_CASE_SQL: Final[str] = _case_over_rules(lambda r: r.label)


def _review_case_sql() -> str:
    default_state = initial_review_state(UNKNOWN_SOURCE_TIER)
    by_state: dict[str, list[str]] = {}
    for source, tier in sorted(SOURCE_TYPE_TIERS.items()):
        state = initial_review_state(tier)
        if state != default_state:
            by_state.setdefault(state, []).append(_sql_literal(source))
    whens = [
        f"WHEN {_SOURCE_KEY} IN ({', '.join(sources)}) THEN {_sql_literal(s)}"
        for s, sources in by_state.items()
    ]
    return f"CASE {' '.join(whens)} ELSE {_sql_literal(default_state)} END"


REVIEW_CASE_SQL: Final[str] = _review_case_sql()

_PASS_ASSIGNMENTS: Final[dict[str, str]] = {
    TYPED_MEMORY_BACKFILL: (
        f"memory_kind = COALESCE(memory_kind, {KIND_CASE_SQL}), "
        f"delivery_policy = COALESCE(delivery_policy, {POLICY_CASE_SQL})"
    ),
    REVIEW_STATE_BACKFILL: f"review_state = COALESCE(review_state, {REVIEW_CASE_SQL})",
}


# --------------------------------------------------------------------------- inspection


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


def _meta_get(conn: apsw.Connection, key: str) -> str | None:
    if not table_exists(conn, "_kb_meta"):
        return None
    row = conn.execute("SELECT value FROM _kb_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _meta_set(conn: apsw.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO _kb_meta(key, value) VALUES (?, ?)", (key, value))


def meta_get(conn: apsw.Connection, key: str) -> str | None:
    """Read one ``_kb_meta`` value (``None`` when absent)."""
    return _meta_get(conn, key)


def pending_passes(conn: apsw.Connection) -> list[str]:
    """Backfill passes whose completion marker is missing, in the order they must run."""
    return [name for name in PASSES if _meta_get(conn, name) is None]


# --------------------------------------------------------------------------- dry run


@attrs.frozen
class DryRunRow:
    label: str
    memory_kind: str
    delivery_policy: str | None
    rows: int


@attrs.frozen
class DryRunReport:
    schema_version: int
    pending: tuple[str, ...]
    mapping: tuple[DryRunRow, ...]
    review_states: tuple[tuple[str, int], ...]
    total_rows: int
    #: What bringing a version-1 ``chunks`` table to the v2 shape would do first.
    schema_changes: tuple[str, ...] = ()


def dry_run(conn: apsw.Connection, path: str = "") -> DryRunReport:
    """Counts per D4 mapping row and per review state the backfill would write. Read-only:
    works on an unmigrated v1 store of any shape (where every row counts; a missing column
    reads as its default) and never alters the schema."""
    version = schema_version(conn)
    if not table_exists(conn, "chunks"):
        return DryRunReport(
            version,
            (),
            tuple(DryRunRow(r.label, r.memory_kind, r.delivery_policy, 0) for r in LEGACY_DOMAIN_TABLE),
            (),
            0,
        )
    changes = planned_normalisation(conn, path)
    cols = column_names(conn, "chunks")
    pending = (*pending_passes(conn), *pending_v3_passes(conn))
    # The rows as the backfill will see them, whatever columns the version-1 table lacks, and
    # with the one rule for NULL cells (``normalise_chunks``) applied.
    source = (
        "(SELECT "
        + ", ".join(
            f"{f'coalesce({name}, {default})' if name in cols else default} AS {name}"
            for name, default in (
                ("domain", "'general'"),
                ("source_type", "''"),
                ("memory_kind", "NULL"),
                ("review_state", "NULL"),
            )
        )
        + " FROM chunks) AS chunks"
    )
    kind_filter = "WHERE memory_kind IS NULL" if "memory_kind" in cols else ""
    review_filter = "WHERE review_state IS NULL" if "review_state" in cols else ""
    by_label: dict[str, int] = {}
    if TYPED_MEMORY_BACKFILL in pending:
        for label, count in conn.execute(
            f"SELECT {RULE_LABEL_CASE_SQL} AS label, count(*) FROM {source} {kind_filter} GROUP BY label"
        ):
            by_label[str(label)] = int(count)
    review: list[tuple[str, int]] = []
    if REVIEW_STATE_BACKFILL in pending:
        review = [
            (str(state), int(count))
            for state, count in conn.execute(
                f"SELECT {REVIEW_CASE_SQL} AS s, count(*) FROM {source} {review_filter} GROUP BY s ORDER BY s"
            )
        ]
    total = int(scalar(conn, "SELECT count(*) FROM chunks"))
    mapping = tuple(
        DryRunRow(r.label, r.memory_kind, r.delivery_policy, by_label.get(r.label, 0))
        for r in LEGACY_DOMAIN_TABLE
    )
    return DryRunReport(version, pending, mapping, tuple(review), total, changes)


# --------------------------------------------------------------------------- creation / upgrade


def _ensure_fts(conn: apsw.Connection) -> None:
    """Create the external-content FTS table if absent (rebuilding it from ``chunks``) and make
    the triggers exactly ours, dropping any legacy trigger that fires on metadata updates."""
    existing = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()
    rebuild = False
    if existing is None or not fts_sql_is_current(str(existing[0])):
        if existing is not None:
            conn.execute("DROP TABLE chunks_fts")
        conn.execute(_FTS_SQL)
        rebuild = True
    triggers = dict(
        conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'chunks'")
    )
    for name, sql in triggers.items():
        if name.startswith(("chunks_vec", "chunks_fts_stem", "chunks_migrated")):
            continue  # vector-index, stemming-build and history triggers belong to their own steps
        if _FTS_TRIGGERS.get(name) != sql:
            conn.execute(f'DROP TRIGGER "{name}"')
    for name, sql in _FTS_TRIGGERS.items():
        if triggers.get(name) != sql:
            conn.execute(sql)
    config = dict(conn.execute("SELECT k, v FROM chunks_fts_config"))
    for key, value in FTS_CONFIG.items():
        if config.get(key) != value:
            conn.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES (?, ?)", (key, value))
    if rebuild:
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild')")


def create_fresh(conn: apsw.Connection) -> None:
    """A new store at the current version, with both backfill markers stamped (nothing to scan)."""
    stamp = f"fresh {format_timestamp(utc_now())}"
    with write_transaction(conn):
        if table_exists(conn, "chunks"):  # another process won the race
            return
        conn.execute("CREATE TABLE IF NOT EXISTS _kb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(_CHUNKS_V2_SQL)
        _ensure_fts(conn)
        _ensure_v3_objects(conn)
        _ensure_v4_objects(conn)
        _ensure_v5_objects(conn)
        for name in (*PASSES, *V3_PASSES):
            _meta_set(conn, name, stamp)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _ensure_v5_objects(conn: apsw.Connection) -> list[str]:
    """Version 5's column and index (caller holds the write transaction); return columns added."""
    present = column_names(conn, "chunks")
    added = [name for name, _ in V5_COLUMNS if name not in present]
    for name, decl in V5_COLUMNS:
        if name in added:
            conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {decl}")
    conn.execute(V5_INDEX_SQL)
    return added


def upgrade_schema(conn: apsw.Connection) -> list[str]:
    """Add the v2 and v5 columns (nullable, additive), fix the FTS triggers, set the version.
    Returns the columns added. Cheap: no row is rewritten here. The v5 column goes in the
    transaction that stamps the version, so a store stamped 5 always has it."""
    with write_transaction(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS _kb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        present = column_names(conn, "chunks")
        added = [name for name, _ in V2_COLUMNS if name not in present]
        for name, decl in V2_COLUMNS:
            if name in added:
                conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {decl}")
        _ensure_fts(conn)
        # A version-3 store is stamped by its conversion, in the conversion's own transaction
        # (``ensure_v4_history``), which adds the v5 column too: one that fails stays a store
        # the release before can open, exactly as it was.
        if not table_exists(conn, "chunk_history"):
            added += _ensure_v5_objects(conn)
            if schema_version(conn) < SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return added


def _cursor_key(name: str) -> str:
    return f"{name}_cursor"


def _pass_start(conn: apsw.Connection, passes: list[str] | tuple[str, ...]) -> int:
    """The id the passes resume after: the lowest of their cursors. Without a cursor a pass
    starts below the smallest id, not at 0: a version-1 store may hold ids of 0 or below, and
    those rows must be backfilled (and given their history) like any other."""
    floor = int(scalar(conn, "SELECT coalesce(min(id), 1) - 1 FROM chunks"))
    return min(int(c) if (c := _meta_get(conn, _cursor_key(p))) is not None else floor for p in passes)


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
    return _backfill(conn, tuple(pending_passes(conn)), on_batch=on_batch, batch_rows=batch_rows)


def _backfill(
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
        conn.create_scalar_function("contextplane_content_hash", _content_hash_sql, 1, deterministic=True)
    assignments = [_PASS_ASSIGNMENTS[p] for p in v2]
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
                _meta_set(conn, _cursor_key(p), str(hi))
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
            _meta_set(conn, p, stamp)
            conn.execute("DELETE FROM _kb_meta WHERE key = ?", (_cursor_key(p),))
    return done


@attrs.frozen
class MigrationResult:
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
    if (
        normalised  # a rewritten table lost its triggers: upgrade_schema puts the FTS ones back
        or {n for n, _ in (*V2_COLUMNS, *V5_COLUMNS)} - column_names(conn, "chunks")
        or schema_version(conn) < SCHEMA_VERSION
        or not table_exists(conn, "chunks_fts")
    ):
        added = upgrade_schema(conn)
    passes = tuple(pending_passes(conn))
    added.extend(ensure_v3_schema(conn))
    added.extend(ensure_v4_history(conn))
    history = _history_due(conn)
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
        first_rows = _rows_left(conn, first) if first else 0
        later_rows = _rows_left(conn, later) if later else 0
        report_first = functools.partial(_report, on_batch, 0, first_rows + later_rows)
        report_later = functools.partial(_report, on_batch, first_rows, first_rows + later_rows)
    if first:
        # The read path's always-on index before the row pass: built over rows no pass has
        # stamped 'always' yet it is a scan without a sort, and the pass adds each row to it.
        ensure_read_indexes(conn)
    visited = _backfill(conn, first, on_batch=report_first, batch_rows=batch_rows) if first else 0
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


def _rows_left(conn: apsw.Connection, passes: tuple[str, ...]) -> int:
    """Rows the passes still have to visit (from the lowest of their cursors)."""
    start = _pass_start(conn, passes)
    return int(scalar(conn, "SELECT count(*) FROM chunks WHERE id > ?", (start,)))


def _report(on_batch: BatchCallback, offset: int, total: int, done: int, _phase_total: int) -> None:
    on_batch(offset + done, total)


# --------------------------------------------------------------------------- v1 input schemas
#
# A version-1 store is whatever the ADR's system wrote: not always ``V1_SCHEMA_SQL``. Some
# versions had no ``subject`` column, no AUTOINCREMENT, extra columns such as
# ``finding_type``, ids of 0 or below; another application's database may hold a ``chunks``
# table of its own. So before the v2 columns are added, the input is inspected and brought
# to the v2 shape, or refused with nothing changed. Everything here reads first and writes
# only when there is something to do, in one transaction, so a kill leaves the table as it
# was or as it will be.

#: The version-1 columns and their v2 declarations (what ``ALTER TABLE ADD COLUMN`` adds when
#: one is missing). ``content`` and ``domain`` make a table a memory table: without them it
#: is refused.
V1_COLUMNS: Final[dict[str, str]] = {
    "content": "TEXT NOT NULL DEFAULT ''",
    "heading": "TEXT NOT NULL DEFAULT ''",
    "source": "TEXT NOT NULL DEFAULT ''",
    "subject": "TEXT NOT NULL DEFAULT ''",
    "domain": "TEXT NOT NULL DEFAULT 'general'",
    "source_type": "TEXT NOT NULL DEFAULT ''",
    "namespace": "TEXT NOT NULL DEFAULT ''",
    "epoch": "TEXT NOT NULL DEFAULT ''",
    "invalidated_at": "TEXT",
    "invalidation_reason": "TEXT",
    "created_at": "TEXT NOT NULL DEFAULT ''",
    "updated_at": "TEXT NOT NULL DEFAULT ''",
}
REQUIRED_V1_COLUMNS: Final[tuple[str, ...]] = ("content", "domain")
#: Columns our inserts never write: NOT NULL without a default, they would refuse every insert.
_UNWRITTEN: Final[frozenset[str]] = frozenset({"invalidated_at", "invalidation_reason"})

#: Tables any contextplane version creates; a database holding one of them is ours. Others'
#: tables (a newer record) may sit beside them.
ANCHOR_TABLES: Final[frozenset[str]] = frozenset(
    {
        "chunks",
        "_kb_meta",
        "injection_log",
        "prompt_snapshots",
        "prefix_texts",
        "session_summaries",
        "chunk_history",
        "chunk_log",
        "chunk_gone",
        "turn_inputs",
    }
)


@attrs.frozen
class ColumnInfo:
    name: str
    type: str
    notnull: bool
    default: str | None
    pk: int


@attrs.frozen
class ChunksShape:
    """What a ``chunks`` table is, and what bringing it to the v2 shape takes."""

    columns: tuple[ColumnInfo, ...]
    #: ``id`` is the table's INTEGER PRIMARY KEY (the rowid); False when there is no id column.
    id_is_rowid: bool
    has_id: bool
    #: Version-1 columns the table lacks (added by ALTER unless the table is rebuilt).
    missing: tuple[str, ...]
    #: Columns that are neither v1 nor v2 (``finding_type``, say): kept as they are.
    extra: tuple[str, ...]
    #: Why the table must be rewritten; empty when ALTER is enough.
    rebuild: tuple[str, ...]


def table_names(conn: apsw.Connection) -> list[str]:
    """The database's own tables (not SQLite's internal ones), by name."""
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]


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
        _check_ids(conn, path)


def inspect_chunks(conn: apsw.Connection, path: str) -> ChunksShape | None:
    """The shape of the ``chunks`` table (None without one); refuses, naming what is wrong, a
    table no version of the ADR's system wrote. Reads only."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chunks'").fetchone()
    if row is None:
        return None
    sql = str(row[0] or "")
    columns = tuple(
        ColumnInfo(str(r[1]), str(r[2] or ""), bool(r[3]), None if r[4] is None else str(r[4]), int(r[5]))
        for r in conn.execute("PRAGMA table_info(chunks)")
    )
    names = {c.name for c in columns}
    missing_required = [c for c in REQUIRED_V1_COLUMNS if c not in names]
    if missing_required:
        raise StoreError(
            f"{path}: its chunks table has no {' or '.join(missing_required)} column (its columns: "
            f"{', '.join(c.name for c in columns)}), so it is not a contextplane memory table of any "
            "version; nothing was changed. Point --db, store.path or $CONTEXTPLANE_DB at a memory store"
        )
    by_name = {c.name: c for c in columns}
    pks = [c for c in columns if c.pk]
    ident = by_name.get("id")
    id_is_rowid = (
        ident is not None
        and len(pks) == 1
        and pks[0] is ident
        and ident.type.upper() == "INTEGER"
        and not re.search(r"\bWITHOUT\s+ROWID\b", sql, re.IGNORECASE)
    )
    reasons: list[str] = []
    if ident is None:
        reasons.append("it has no id column (its ids are the rowids)")
    elif not id_is_rowid:
        reasons.append("its id is not the INTEGER PRIMARY KEY")
    elif not re.search(r"\bAUTOINCREMENT\b", sql, re.IGNORECASE):
        reasons.append("its ids have no AUTOINCREMENT (a purged id could be handed out again)")
    v2 = {name for name, _ in V2_COLUMNS}
    for c in columns:
        writes = (c.name in V1_COLUMNS and c.name not in _UNWRITTEN) or c.name in v2 or c.name == "id"
        if c.notnull and c.default is None and not writes:
            reasons.append(f"its column {c.name} is NOT NULL without a default, so no insert could succeed")
    extra = tuple(c.name for c in columns if c.name not in V1_COLUMNS and c.name not in v2 and c.name != "id")
    missing = tuple(name for name in V1_COLUMNS if name not in names)
    return ChunksShape(columns, id_is_rowid, ident is not None, missing, extra, tuple(reasons))


def _check_ids(conn: apsw.Connection, path: str) -> None:
    """An id column that is not the rowid must hold distinct whole numbers to be kept."""
    seen: set[int] = set()
    bad = 0
    for (value,) in conn.execute("SELECT id FROM chunks"):
        if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value in seen:
            bad += 1
            continue
        seen.add(value)
    if bad:
        raise StoreError(
            f"{path}: {bad} rows of its chunks table have an id that is missing, not a whole number or "
            "used twice, so they cannot keep their ids; nothing was changed. Give every row a distinct "
            "whole-number id, then run `contextplane migrate` again"
        )


def _select_expression(name: str, present: set[str]) -> str:
    """The value a v2 column takes from a version-1 row: the old cell (a NULL read as the
    column's default where v2 has one), or the default when the column did not exist."""
    decl = V1_COLUMNS.get(name)
    default = decl.split("DEFAULT ", 1)[1] if decl is not None and "DEFAULT " in decl else None
    if name not in present:
        return default if default is not None else "NULL"
    if name in ("created_at", "updated_at"):  # a missing stamp is read from the other one
        other = "updated_at" if name == "created_at" else "created_at"
        return f"coalesce({name}, {other}, '')" if other in present else f"coalesce({name}, '')"
    return f"coalesce({name}, {default})" if default is not None else name


def _rebuild_chunks(conn: apsw.Connection, path: str, shape: ChunksShape) -> None:
    """Rewrite ``chunks`` in the v2 shape, every row keeping its id and every cell (extra
    columns are kept, nullable), in one transaction."""
    if shape.has_id and not shape.id_is_rowid:
        _check_ids(conn, path)
    present = {c.name for c in shape.columns}
    names = ["id", *V1_COLUMNS, *(n for n, _ in V2_COLUMNS)]
    ident = "rowid" if not shape.has_id else "id" if shape.id_is_rowid else "CAST(id AS INTEGER)"
    exprs = [
        ident,
        *(_select_expression(n, present) for n in V1_COLUMNS),
        *(n if n in present else "NULL" for n, _ in V2_COLUMNS),
    ]
    for c in shape.columns:
        if c.name in shape.extra:
            names.append(c.name)
            exprs.append(f'"{c.name}"')
    create = _CHUNKS_V2_SQL.split(";")[0].replace("CREATE TABLE chunks", "CREATE TABLE _chunks_v2", 1)
    conn.execute(create)
    for c in shape.columns:
        if c.name in shape.extra:
            conn.execute(f'ALTER TABLE _chunks_v2 ADD COLUMN "{c.name}" {c.type}')
    order = exprs[0]
    conn.execute(
        f"INSERT INTO _chunks_v2({', '.join(f'{chr(34)}{n}{chr(34)}' for n in names)}) "
        f"SELECT {', '.join(exprs)} FROM chunks ORDER BY {order}"
    )
    conn.execute("DROP TABLE chunks")
    conn.execute("ALTER TABLE _chunks_v2 RENAME TO chunks")
    conn.execute("CREATE INDEX IF NOT EXISTS chunks_namespace ON chunks(namespace)")
    if not shape.id_is_rowid and table_exists(conn, "chunks_fts"):
        conn.execute("DROP TABLE chunks_fts")  # indexed by the old rowids: rebuilt by _ensure_fts
        if table_exists(conn, "_kb_meta"):
            conn.execute("DELETE FROM _kb_meta WHERE key = ?", (STEMMED_FTS,))  # and stemmed again
    if table_exists(conn, "_kb_meta"):
        conn.execute("DELETE FROM _kb_meta WHERE key = ?", (READ_INDEXES,))  # the rewrite lost them


def _null_cells_sql(present: set[str]) -> str | None:
    """The ``UPDATE`` that gives every NULL cell of a version-1 column its v1 default (the
    one rule for NULL cells, see ``normalise_chunks``); None when no column can hold one."""
    names = [n for n in V1_COLUMNS if n in present and n not in _UNWRITTEN]
    if not names:
        return None
    sets = ", ".join(f"{n} = {_select_expression(n, present)}" for n in names)
    where = " OR ".join(f"{n} IS NULL" for n in names)
    return f"UPDATE chunks SET {sets} WHERE {where}"


def normalise_chunks(conn: apsw.Connection, path: str) -> tuple[str, ...]:
    """Bring a ``chunks`` table of any version-1 shape to the v2 shape; return what was done
    (empty when it already had it). Refusals (``inspect_chunks``) change nothing.

    One rule for NULL cells, whatever the shape: a NULL cell of a version-1 column reads as
    that column's version-1 default (``domain`` 'general', the text columns '', a missing
    ``created_at``/``updated_at`` from the other), before D4 and D7 are derived from it. A
    rewritten table gets it in the rewrite; a table that needs none gets it here, once, while
    it is still version 1 (it has no v2 column yet)."""
    shape = inspect_chunks(conn, path)
    if shape is None or not (shape.rebuild or shape.missing or _v1_nulls_due(conn, shape)):
        return ()
    with write_transaction(conn):
        shape = inspect_chunks(conn, path)  # another process may have done it meanwhile
        if shape is None or not (shape.rebuild or shape.missing or _v1_nulls_due(conn, shape)):
            return ()
        if shape.rebuild:
            _rebuild_chunks(conn, path, shape)
            reasons = "; ".join(shape.rebuild)
            return (f"rewrote the chunks table in the v2 shape, keeping every id: {reasons}",)
        done = []
        for name in shape.missing:
            conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {V1_COLUMNS[name]}")
        if shape.missing:
            done.append(f"added the version-1 columns it lacked: {', '.join(shape.missing)}")
        fill = _null_cells_sql(column_names(conn, "chunks"))
        if fill is not None:
            conn.execute(fill)
            if conn.changes():
                done.append(f"gave {conn.changes()} rows' NULL cells their version-1 defaults")
        return tuple(done)


def _v1_nulls_due(conn: apsw.Connection, shape: ChunksShape) -> bool:
    """A version-1 table (no v2 column yet) with a NULL cell the rule fills."""
    present = {c.name for c in shape.columns}
    if present & {n for n, _ in V2_COLUMNS}:
        return False
    nullable = [
        c.name for c in shape.columns if c.name in V1_COLUMNS and c.name not in _UNWRITTEN and not c.notnull
    ]
    if not nullable:
        return False
    where = " OR ".join(f"{n} IS NULL" for n in nullable)
    return conn.execute(f"SELECT 1 FROM chunks WHERE {where} LIMIT 1").fetchone() is not None


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
    missing = [n for n, _ in (*V2_COLUMNS, *V3_COLUMNS, *V4_COLUMNS, *V5_COLUMNS) if n not in columns]
    if missing or schema_version(conn) < SCHEMA_VERSION or _v4_due(conn):
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


def planned_normalisation(conn: apsw.Connection, path: str) -> tuple[str, ...]:
    """What ``normalise_chunks`` would do, without doing it (for ``migrate --dry-run``)."""
    shape = inspect_chunks(conn, path)
    if shape is None:
        return ()
    if shape.rebuild:
        return ("rewrite the chunks table in the v2 shape, keeping every id: " + "; ".join(shape.rebuild),)
    planned = []
    if shape.missing:
        planned.append(f"add the version-1 columns it lacks: {', '.join(shape.missing)}")
    if _v1_nulls_due(conn, shape):
        planned.append("give NULL cells of version-1 columns their version-1 defaults")
    return tuple(planned)


def repair_nonpositive_ids(conn: apsw.Connection) -> int:
    """Backfill rows with an id of 0 or below that an earlier migration stamped as done without
    visiting (its cursor started at 0): their v2 cells once the v2 passes are done, and their
    content key once that pass is. (Their history needs nothing: a row without an event is in
    its migration state, ``start_history``.) Reads one index range; writes only if such rows
    exist. Returns the rows repaired."""
    if pending_passes(conn) or not table_exists(conn, "chunks"):
        return 0
    checks = ["c.id <= 0 AND (c.memory_kind IS NULL OR c.review_state IS NULL)"]
    keys = _meta_get(conn, CONTENT_HASH_BACKFILL) is not None
    keys = keys and "content_hash" in column_names(conn, "chunks")
    if keys:
        checks.append("c.id <= 0 AND c.content_hash IS NULL")
    find = f"SELECT c.id FROM chunks AS c WHERE {' OR '.join(f'({c})' for c in checks)}"
    if conn.execute(find + " LIMIT 1").fetchone() is None:
        return 0
    assignments = ", ".join(_PASS_ASSIGNMENTS[p] for p in PASSES)
    with write_transaction(conn):
        repaired = len(conn.execute(find).fetchall())
        conn.execute(f"UPDATE chunks AS c SET {assignments} WHERE {checks[0]}")
        if keys:
            conn.create_scalar_function("contextplane_content_hash", _content_hash_sql, 1, deterministic=True)
            conn.execute(
                "UPDATE chunks SET content_hash = contextplane_content_hash(content) "
                "WHERE id <= 0 AND content_hash IS NULL"
            )
    return repaired


# --------------------------------------------------------------------------- version 3

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
_V3_TRIGGERS: Final[tuple[str, ...]] = (
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

#: Rows the content-key pass keys at open (about 0.1 s); a larger store is keyed by
#: ``contextplane migrate``, and this many more rows on each later open (resumable, in batches).
INLINE_CONTENT_HASH_MAX_ROWS: Final[int] = 50_000

def _ensure_v3_objects(conn: apsw.Connection) -> list[str]:
    """Create what version 3 adds (caller holds the write transaction); return columns added.
    Its ``chunk_history`` table is not among them any more: version 4 keeps the history in the
    rows (``_ensure_v4_objects``), and converts a version-3 table (``ensure_v4_history``)."""
    present = column_names(conn, "chunks")
    added = [name for name, _ in V3_COLUMNS if name not in present]
    for name, decl in V3_COLUMNS:
        if name in added:
            conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {decl}")
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
        conn.execute("CREATE TABLE IF NOT EXISTS _kb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        return _ensure_v3_objects(conn)


def _content_hash_sql(*values: Any) -> Any:
    return content_hash(values[0])


def pending_v3_passes(conn: apsw.Connection) -> list[str]:
    """Version 3 passes whose completion marker is missing."""
    return [name for name in V3_PASSES if _meta_get(conn, name) is None]


def _history_due(conn: apsw.Connection) -> bool:
    return _meta_get(conn, HISTORY_BACKFILL) is None


def start_history(conn: apsw.Connection) -> bool:
    """The history pass (``history_backfill``): the history starts now, for every row already
    there, in one transaction and without visiting a row: record when (``HISTORY_STARTED_KEY``)
    and up to which id (``HISTORY_BASELINE_KEY``). A row up to that id has a ``migrated`` event
    from then on: its state at the migration is what its first change's entry records as the
    state before it, or the row itself until then (``store.history``). True when it did
    anything. Run it after the v2 passes: their backfill of the review state is not a change."""
    if not table_exists(conn, "chunks") or not _history_due(conn):
        return False
    with write_transaction(conn):
        if not _history_due(conn):
            return False
        if _meta_get(conn, HISTORY_STARTED_KEY) is None:
            _meta_set(conn, HISTORY_STARTED_KEY, format_timestamp(utc_now()))
        if _meta_get(conn, HISTORY_BASELINE_KEY) is None:
            high = str(int(scalar(conn, "SELECT coalesce(max(id), 0) FROM chunks")))
            _meta_set(conn, HISTORY_BASELINE_KEY, high)
        _meta_set(conn, HISTORY_BACKFILL, format_timestamp(utc_now()))
        # an earlier release's history pass wrote events row by row, with a cursor: done now
        conn.execute("DELETE FROM _kb_meta WHERE key = ?", (_cursor_key(HISTORY_BACKFILL),))
    return True


def content_hash_rows_left(conn: apsw.Connection, at_most: int | None = None) -> int:
    """Rows the content-key pass has still to visit (0 when done), counted up to ``at_most``."""
    if _meta_get(conn, CONTENT_HASH_BACKFILL) is not None or not table_exists(conn, "chunks"):
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
    return _backfill(conn, (CONTENT_HASH_BACKFILL,), on_batch=on_batch, batch_rows=batch_rows, limit=limit)


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


# --------------------------------------------------------------------------- version 4

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


def _ensure_v4_objects(conn: apsw.Connection) -> list[str]:
    """Create what version 4 adds (caller holds the write transaction); return columns added."""
    present = column_names(conn, "chunks")
    added = [name for name, _ in V4_COLUMNS if name not in present]
    for name, decl in V4_COLUMNS:
        if name in added:
            conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {decl}")
    conn.execute(V4_HISTORY_SQL)
    return added


def _v4_due(conn: apsw.Connection) -> bool:
    return (
        table_exists(conn, "chunk_history")
        or not table_exists(conn, "chunk_log")
        or bool({n for n, _ in V4_COLUMNS} - column_names(conn, "chunks"))
        or not table_exists(conn, "chunk_gone")
        or not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?", (_KEPT,))
        .fetchall()
    )


def ensure_v4_history(conn: apsw.Connection) -> list[str]:
    """Version 4's columns, tables and triggers, if any is missing; a version-3 store's
    ``chunk_history`` is converted in the same transaction (``_convert_v3_history``) and dropped.
    Idempotent; returns the columns added."""
    if not table_exists(conn, "chunks") or not _v4_due(conn):
        return []
    with write_transaction(conn):
        if not _v4_due(conn):
            return []
        added = _ensure_v4_objects(conn)
        if table_exists(conn, "chunk_history"):
            _convert_v3_history(conn)
        added += _ensure_v5_objects(conn)
        if schema_version(conn) < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
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
    for name in _V3_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute("DROP TABLE chunk_history")


# --------------------------------------------------------------------------- read path (issue 11)
#
# Steps that are not part of the version-1 migration and do not change SCHEMA_VERSION: each is
# idempotent, marked done in ``_kb_meta`` under its own key, and safe to run from several
# processes at once (every decision is re-read inside the write transaction that acts on it).

#: Marker: the read-path indexes exist (the always-on list and the deliverable filter).
READ_INDEXES: Final[str] = "read_indexes"
#: Marker: ``chunks_fts`` uses the stemming tokenizer.
STEMMED_FTS: Final[str] = "stemmed_fts"
#: Rows the stemming step indexes at open; a larger store keeps its old index (readable, just
#: unstemmed) until ``contextplane migrate`` runs the step, in resumable batches.
INLINE_STEMMING_MAX_ROWS: Final[int] = 50_000

#: The full-text index with the Porter stemmer over unicode61: "deploys", "deployed" and
#: "deploying" all match "deploy".
STEMMED_FTS_SQL: Final[str] = _FTS_SQL.replace(
    "tokenize='unicode61 remove_diacritics 2'", "tokenize='porter unicode61 remove_diacritics 2'"
)
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

#: The always-on list reads its 20 rows by scope from an index of only the always-on rows,
#: instead of every row in scope (the namespace index alone: 274 ms at 1M). Partial, so it is
#: tiny and building it is one table scan (no sort of a million keys inside a migration).
_READ_INDEX_SQL: Final[tuple[str, ...]] = (
    "CREATE INDEX IF NOT EXISTS chunks_always ON chunks(namespace, id) WHERE delivery_policy = 'always'",
    # an earlier schema-3 build indexed every non-NULL policy for the same lookup: one is enough
    "DROP INDEX IF EXISTS chunks_delivery_policy",
)


def fts_sql_is_current(sql: str) -> bool:
    """True for either full-text definition this version writes (plain, or stemmed; a renamed
    table's SQL carries its name quoted)."""
    flat = "".join(sql.replace('"chunks_fts"', "chunks_fts").split())
    return flat in ("".join(_FTS_SQL.split()), "".join(STEMMED_FTS_SQL.split()))


def ensure_read_indexes(conn: apsw.Connection) -> bool:
    """Create the read-path indexes once; True when this call created them."""
    if not table_exists(conn, "chunks") or _read_indexes_done(conn):
        return False
    with write_transaction(conn):
        if _read_indexes_done(conn):
            return False
        for statement in _READ_INDEX_SQL:
            conn.execute(statement)
        _meta_set(conn, READ_INDEXES, format_timestamp(utc_now()))
    return True


def _read_indexes_done(conn: apsw.Connection) -> bool:
    if _meta_get(conn, READ_INDEXES) is None:
        return False
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'chunks_always'")
    return found.fetchone() is not None


def stemming_pending(conn: apsw.Connection) -> bool:
    return table_exists(conn, "chunks") and _meta_get(conn, STEMMED_FTS) is None


def stemming_rows_left(conn: apsw.Connection) -> int:
    """Rows the stemming step has still to index (0 when done)."""
    if not stemming_pending(conn):
        return 0
    cursor = int(_meta_get(conn, _STEM_CURSOR) or 0)
    high = _meta_get(conn, _STEM_HIGH)
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
            _meta_set(conn, _STEM_HIGH, str(high))
            _meta_set(conn, _STEM_CURSOR, str(low))
            for trigger in _STEM_TRIGGERS:
                conn.execute(trigger)
    total = stemming_rows_left(conn)
    done = 0
    while True:
        with write_transaction(conn):
            if not stemming_pending(conn):
                return done
            cursor = int(_meta_get(conn, _STEM_CURSOR) or 0)
            high = int(_meta_get(conn, _STEM_HIGH) or 0)
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
            _meta_set(conn, _STEM_CURSOR, str(upto))
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
    for body in _FTS_TRIGGERS.values():
        conn.execute(body)
    conn.execute(f"DELETE FROM _kb_meta WHERE key IN ('{_STEM_CURSOR}', '{_STEM_HIGH}')")
    _meta_set(conn, STEMMED_FTS, format_timestamp(utc_now()))


#: Marker: the row count at the last ``ANALYZE`` (the planner's statistics).
ANALYZED_ROWS: Final[str] = "analyzed_rows"
#: Statistics are refreshed when the table has doubled since they were taken (and from 1,000
#: rows on: below that every plan is fast). ``analysis_limit`` samples, so ANALYZE takes
#: milliseconds at 1M rows.
_ANALYZE_MIN_ROWS: Final[int] = 1_000


def analyze_due(conn: apsw.Connection) -> bool:
    rows = int(scalar(conn, "SELECT coalesce(max(id), 0) FROM chunks"))
    last = int(_meta_get(conn, ANALYZED_ROWS) or 0)
    return rows >= _ANALYZE_MIN_ROWS and rows >= 2 * last


def maybe_analyze(conn: apsw.Connection) -> bool:
    """Refresh the planner's statistics when due (see ``analyze_due``); True when it ran."""
    if not table_exists(conn, "chunks") or not analyze_due(conn):
        return False
    with write_transaction(conn):
        rows = int(scalar(conn, "SELECT coalesce(max(id), 0) FROM chunks"))
        conn.execute("PRAGMA analysis_limit = 1000")
        conn.execute("ANALYZE chunks")
        _meta_set(conn, ANALYZED_ROWS, str(rows))
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
