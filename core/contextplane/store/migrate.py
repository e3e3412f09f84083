"""Schema creation and the version-1 -> version-2 migration (ADR D4 backfill, then D7 review state).

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
- A fresh database is created at the current version with both markers stamped, no scan.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any, Final

import apsw
import attrs

from contextplane.errors import StoreError
from contextplane.memory.model import format_timestamp, utc_now
from contextplane.memory.stamps import LEGACY_DOMAIN_TABLE, DomainRule
from contextplane.memory.trust import SOURCE_TYPE_TIERS, UNKNOWN_SOURCE_TIER, initial_review_state

SCHEMA_VERSION: Final[int] = 2

log = logging.getLogger("contextplane.store")

TYPED_MEMORY_BACKFILL: Final[str] = "typed_memory_backfill"
REVIEW_STATE_BACKFILL: Final[str] = "review_state_backfill"
PASSES: Final[tuple[str, ...]] = (TYPED_MEMORY_BACKFILL, REVIEW_STATE_BACKFILL)

DEFAULT_BATCH_ROWS: Final[int] = 50_000

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


def dry_run(conn: apsw.Connection) -> DryRunReport:
    """Counts per D4 mapping row and per review state the backfill would write. Read-only:
    works on an unmigrated v1 store (where every row counts) and never alters the schema."""
    version = schema_version(conn)
    if not table_exists(conn, "chunks"):
        return DryRunReport(
            version,
            (),
            tuple(DryRunRow(r.label, r.memory_kind, r.delivery_policy, 0) for r in LEGACY_DOMAIN_TABLE),
            (),
            0,
        )
    cols = column_names(conn, "chunks")
    pending = tuple(pending_passes(conn))
    kind_filter = "WHERE memory_kind IS NULL" if "memory_kind" in cols else ""
    review_filter = "WHERE review_state IS NULL" if "review_state" in cols else ""
    by_label: dict[str, int] = {}
    if TYPED_MEMORY_BACKFILL in pending:
        for label, count in conn.execute(
            f"SELECT {RULE_LABEL_CASE_SQL} AS label, count(*) FROM chunks {kind_filter} GROUP BY label"
        ):
            by_label[str(label)] = int(count)
    review: list[tuple[str, int]] = []
    if REVIEW_STATE_BACKFILL in pending:
        review = [
            (str(state), int(count))
            for state, count in conn.execute(
                f"SELECT {REVIEW_CASE_SQL} AS s, count(*) FROM chunks {review_filter} GROUP BY s ORDER BY s"
            )
        ]
    total = int(scalar(conn, "SELECT count(*) FROM chunks"))
    mapping = tuple(
        DryRunRow(r.label, r.memory_kind, r.delivery_policy, by_label.get(r.label, 0))
        for r in LEGACY_DOMAIN_TABLE
    )
    return DryRunReport(version, pending, mapping, tuple(review), total)


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
        if name.startswith(("chunks_vec", "chunks_fts_stem")):
            continue  # vector-index and stemming-build triggers belong to their own steps
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
        for name in PASSES:
            _meta_set(conn, name, stamp)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def upgrade_schema(conn: apsw.Connection) -> list[str]:
    """Add the v2 columns (nullable, additive), fix the FTS triggers, set the version.
    Returns the columns added. Cheap: no row is rewritten here."""
    with write_transaction(conn):
        conn.execute("CREATE TABLE IF NOT EXISTS _kb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        present = column_names(conn, "chunks")
        added = [name for name, _ in V2_COLUMNS if name not in present]
        for name, decl in V2_COLUMNS:
            if name in added:
                conn.execute(f"ALTER TABLE chunks ADD COLUMN {name} {decl}")
        _ensure_fts(conn)
        if schema_version(conn) < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return added


def _cursor_key(name: str) -> str:
    return f"{name}_cursor"


def run_backfill(
    conn: apsw.Connection,
    *,
    on_batch: BatchCallback | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> int:
    """Run every pending backfill pass in id-ordered batches; return rows visited.

    Pending passes share one row pass (each row rewritten once). Each batch commits together
    with its cursor, so a kill between or inside batches loses nothing and redoes at most
    one batch, harmlessly (``COALESCE`` keeps any cell already filled)."""
    passes = pending_passes(conn)
    if not passes:
        return 0
    if batch_rows < 1:
        raise StoreError(f"batch_rows: {batch_rows} must be at least 1")
    cursors = [int(_meta_get(conn, _cursor_key(p)) or 0) for p in passes]
    start = min(cursors)
    assignments = ", ".join(_PASS_ASSIGNMENTS[p] for p in passes)
    update_sql = f"UPDATE chunks SET {assignments} WHERE id > ? AND id <= ?"
    max_id = int(scalar(conn, "SELECT coalesce(max(id), 0) FROM chunks"))
    total = int(scalar(conn, "SELECT count(*) FROM chunks WHERE id > ?", (start,)))
    done = 0
    lo = start
    while lo < max_id:
        row = conn.execute(
            "SELECT id FROM chunks WHERE id > ? ORDER BY id LIMIT 1 OFFSET ?", (lo, batch_rows - 1)
        ).fetchone()
        hi = max_id if row is None else min(int(row[0]), max_id)
        with write_transaction(conn):
            conn.execute(update_sql, (lo, hi))
            for p in passes:
                _meta_set(conn, _cursor_key(p), str(hi))
        done = min(total, done + batch_rows) if row is not None else total
        lo = hi
        if on_batch is not None:
            on_batch(done, total)
    stamp = format_timestamp(utc_now())
    with write_transaction(conn):
        for p in passes:  # D4 marker first, then the D7 review-state marker
            _meta_set(conn, p, stamp)
            conn.execute("DELETE FROM _kb_meta WHERE key = ?", (_cursor_key(p),))
    return total


@attrs.frozen
class MigrationResult:
    created: bool
    from_version: int
    added_columns: tuple[str, ...]
    passes_run: tuple[str, ...]
    rows_visited: int


def ensure_schema(
    conn: apsw.Connection,
    path: str,
    *,
    on_batch: BatchCallback | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> MigrationResult:
    """Bring any store to the current schema: create it, or upgrade and backfill it."""
    from_version = check_schema_version(conn, path)
    if not table_exists(conn, "chunks"):
        create_fresh(conn)
        if from_version == 0 and schema_version(conn) == SCHEMA_VERSION:
            return MigrationResult(True, from_version, (), (), 0)
    added: list[str] = []
    if {n for n, _ in V2_COLUMNS} - column_names(conn, "chunks") or schema_version(conn) < SCHEMA_VERSION:
        added = upgrade_schema(conn)
    passes = tuple(pending_passes(conn))
    visited = run_backfill(conn, on_batch=on_batch, batch_rows=batch_rows) if passes else 0
    return MigrationResult(False, from_version, tuple(added), passes, visited)


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
)


def fts_sql_is_current(sql: str) -> bool:
    """True for either full-text definition this version writes (plain, or stemmed; a renamed
    table's SQL carries its name quoted)."""
    flat = "".join(sql.replace('"chunks_fts"', "chunks_fts").split())
    return flat in ("".join(_FTS_SQL.split()), "".join(STEMMED_FTS_SQL.split()))


def ensure_read_indexes(conn: apsw.Connection) -> bool:
    """Create the read-path indexes once; True when this call created them."""
    if not table_exists(conn, "chunks") or _meta_get(conn, READ_INDEXES) is not None:
        return False
    with write_transaction(conn):
        if _meta_get(conn, READ_INDEXES) is not None:
            return False
        for statement in _READ_INDEX_SQL:
            conn.execute(statement)
        _meta_set(conn, READ_INDEXES, format_timestamp(utc_now()))
    return True


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
            _meta_set(conn, _STEM_HIGH, str(high))
            _meta_set(conn, _STEM_CURSOR, "0")
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
