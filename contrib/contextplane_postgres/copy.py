"""Moving an embedded SQLite store into PostgreSQL: memories (ids, chains, review states,
expiry, vectors), session summaries, the injection log and prompt snapshots.

Why it is shaped this way:

- The source is opened **read-only** and never migrated: a version-1 store gets the D4 and D7
  backfill applied to each row as it is copied (the same rules, from ``contextplane.memory``,
  and only the passes whose ``_kb_meta`` marker is missing, as ``contextplane migrate`` would
  run them), so the operator's file is left exactly as it was.
- Rows are copied in id order, in batches; each batch is one PostgreSQL transaction that also
  writes the copy's cursor (``meta`` key ``copy:<source>``). A copy killed at any point leaves
  whole batches and a cursor that names the last of them; running the same command again
  resumes after it, and nothing is doubled: the cursor commits with its batch. Rows go in by
  binary ``COPY`` with their ids; an id already present stops the copy with an error (the
  destination was written to while the copy was unfinished) rather than skip a row.
- Ids are kept, so ``superseded_by:<id>`` chains stay valid; the identity sequences are moved
  past the copied ids at the end, so new rows never collide with copied ones.
- A destination that already holds memories that did not come from this source is refused:
  merging two stores would renumber one of them.

- The lifecycle history is copied event by event with its ``seq``, after the memories, in
  batches with the same cursor; so are the turn inputs. A turn recorded on the embedded store
  names a history position (a ``seq``): kept, it names the same state here, so ``explain``
  and ``replay`` answer on PostgreSQL as they did on the file. The events are read through
  ``contextplane.store.history.walk_events``, in (seq, row) order: every row of one write batch
  has the batch's seq there, so the copy's cursor is that pair (and ``chunk_history`` is keyed
  by it, schema step 5). A row the source's migration found has no written ``migrated`` event
  (it is implied); the walk gives it, and it is copied at ``HISTORY_START`` (seq 0), where
  every ``migrated`` event reads, before the row's changes. A version-1 or -2 store has no
  history: every row gets a ``migrated`` event in the copy's last transaction, stamped with
  the time of the copy.
- Each prompt snapshot keeps its cacheable-prefix figures (issue 24). A records file from
  before them lacks the columns (they are added on a writable open, and the copy's is
  read-only): its snapshots copy with the figures NULL, which every reader shows as recorded
  before them, never a guessed share.
- A version-3 store is refused, naming ``contextplane migrate``: its history is converted to
  version 4's layout by the store's migration, which writes the file, and the copy does not.
  A store newer than schema 4 is refused, naming its version, rather than copied without what
  it holds.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import apsw
import attrs
import numpy as np

from contextplane.backends.sqlite.connection import records_path
from contextplane.backends.sqlite.snapshots import CACHE_COLUMNS
from contextplane.errors import StoreError
from contextplane.memory.history import MIGRATION_NOTE, HistoryEvent
from contextplane.memory.model import format_timestamp, read_timestamp, utc_now
from contextplane.memory.stamps import legacy_kind_and_policy
from contextplane.memory.trust import initial_review_state, trust_tier
from contextplane.records.turn_inputs import TURN_INPUT_FIELDS, TurnInputs
from contextplane.store import history as store_history
from contextplane.store import migrate
from contextplane.store.connection import connect as connect_sqlite
from contextplane_postgres import history as pg_history
from contextplane_postgres import schema as pg_schema
from contextplane_postgres.codec import enc, enc_opt
from contextplane_postgres.database import Database
from contextplane_postgres.records import inputs_args
from contextplane_postgres.store import copy_rows

#: Embedded schema versions this copy reads (a version-3 file is migrated first: ``_check_version``).
SOURCE_VERSIONS: Final[frozenset[int]] = frozenset({1, 2, 4, 5})
#: The first embedded schema version whose history the copy reads (through ``store.history``).
HISTORY_VERSION: Final[int] = 4
#: Source tables the copy leaves behind (none now; the report keeps the field for tools).
NOT_COPIED: Final[tuple[str, ...]] = ()
#: The per-turn record tables the embedded backend keeps in its records file.
RECORDS_FILE_TABLES: Final[tuple[str, ...]] = (
    "injection_log",
    "prompt_snapshots",
    "prefix_texts",
    "turn_inputs",
)
DEFAULT_BATCH_ROWS: Final[int] = 5_000

BatchCallback = Callable[[str, int, int], None]
"""Called after each committed batch with (table, rows copied so far, rows in the source table)."""


@attrs.frozen
class TableCopy:
    table: str
    source_rows: int
    copied: int
    already: int


@attrs.frozen
class CopyResult:
    source: str
    destination: str
    resumed: bool
    tables: tuple[TableCopy, ...]
    vectors: int
    #: (source table, rows) of what was not copied (``NOT_COPIED``), when the source has any.
    not_copied: tuple[tuple[str, int], ...] = ()

    def table(self, name: str) -> TableCopy:
        return next(t for t in self.tables if t.table == name)


def _open_source(path: Path) -> apsw.Connection:
    if not path.is_file():
        raise StoreError(f"{path}: no embedded store here (copy SRC must be a SQLite memory file)")
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(30_000)
    try:
        # The copy's own version check first: the store's (below) refuses a newer file too, but
        # would say to upgrade contextplane rather than what this copy reads.
        with contextlib.suppress(apsw.Error):  # not a database: the store's check says so
            _check_version(path, _count(conn, "PRAGMA user_version"))
        # The header and ownership checks: a clear error for a non-database or another
        # application's file. Read-only, so not even the source's journal mode changes.
        connect_sqlite(path, create=False, read_only=True).close()
    except BaseException:
        conn.close()
        raise
    return conn


def _versions() -> str:
    """``SOURCE_VERSIONS`` as a sentence: "1, 2, 4 and 5"."""
    *head, last = sorted(SOURCE_VERSIONS)
    return f"{', '.join(map(str, head))} and {last}"


def _check_version(path: Path, version: int) -> None:
    if version == 3:
        raise StoreError(
            f"{path}: embedded schema version 3; its lifecycle history is converted to version "
            f"{HISTORY_VERSION}'s layout by the store's own migration, which writes the file, and this "
            f"copy never changes its source: run `contextplane migrate --db {path}` first, then copy again"
        )
    if version not in SOURCE_VERSIONS:
        raise StoreError(
            f"{path}: embedded schema version {version}; this copy reads versions {_versions()} only "
            "(a newer store may hold what it would not carry over); "
            "upgrade contextplane_postgres"
        )


def _tables(conn: apsw.Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(conn: apsw.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}


def _meta(conn: apsw.Connection, key: str) -> str | None:
    if "_kb_meta" not in _tables(conn):
        return None
    row = conn.execute("SELECT value FROM _kb_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _count(conn: Any, statement: str, args: Any = ()) -> int:
    """The first cell of a statement that always returns one row (a count)."""
    row = conn.execute(statement, args).fetchone()
    assert row is not None
    return int(row[0])


def _ts(value: Any) -> datetime | None:
    return read_timestamp(value) if isinstance(value, str) else None


class _Source:
    """What the copy reads from the SQLite file, with the backfill the file may still need."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = _open_source(path)
        self.version = _count(self.conn, "PRAGMA user_version")
        tables = _tables(self.conn)
        if "chunks" not in tables:
            raise StoreError(f"{path}: not a contextplane memory store (it has no chunks table)")
        _check_version(path, self.version)
        self.tables = tables
        cols = _columns(self.conn, "chunks")
        self.typed = "memory_kind" in cols
        #: Schema 5's event time; an older file's rows have none.
        self.event_time = "occurred_at" in cols
        self.kind_pass = not self.typed or _meta(self.conn, "typed_memory_backfill") is None
        self.review_pass = not self.typed or _meta(self.conn, "review_state_backfill") is None
        dims = _meta(self.conn, "vector_dimensions")
        self.dims = int(dims) if dims is not None and "chunks_vec" in tables else None
        self.embedder = _meta(self.conn, "vector_embedder") or "copied"
        #: Where each per-turn record table is read: the records file beside the store
        #: (``records_path``), for a table it has adopted from the memory file; else the memory
        #: file, where an earlier version kept it. The memory file's old copies are then ignored.
        self.records_conn: apsw.Connection | None = None
        self._where: dict[str, apsw.Connection] = {}
        beside = Path(records_path(path))
        if beside.is_file():
            try:
                self.records_conn = _open_records(beside)
            except StoreError:
                self.conn.close()
                raise
            adopted = _adopted(self.records_conn)
            for table in _tables(self.records_conn) & set(RECORDS_FILE_TABLES):
                if table in adopted or table not in tables:
                    self._where[table] = self.records_conn
            self.tables = tables | set(self._where)

    def conn_of(self, table: str) -> apsw.Connection:
        """The connection that holds ``table`` (the records file or the memory file)."""
        return self._where.get(table, self.conn)

    def count(self, table: str) -> int:
        if table not in self.tables:
            return 0
        return _count(self.conn_of(table), f"SELECT count(*) FROM {table}")

    def chunks(self, after: int, limit: int) -> list[tuple[Any, ...]]:
        typed = (
            "c.memory_kind, c.delivery_policy, c.review_state, c.expires_at"
            if self.typed
            else "NULL, NULL, NULL, NULL"
        )
        vec = "v.embedding" if self.dims is not None else "NULL"
        occurred = "c.occurred_at" if self.event_time else "NULL"
        join = "LEFT JOIN chunks_vec AS v ON v.chunk_id = c.id" if self.dims is not None else ""
        return list(
            self.conn.execute(
                "SELECT c.id, c.content, c.domain, c.source_type, "
                f"{typed}, "
                "c.heading, c.source, c.subject, c.namespace, c.epoch, c.invalidated_at, "
                f"c.invalidation_reason, c.created_at, c.updated_at, {occurred}, {vec} "
                f"FROM chunks AS c {join} "
                "WHERE c.id > ? ORDER BY c.id LIMIT ?",
                (after, limit),
            )
        )

    def rows(self, table: str, columns: str, after: int, limit: int) -> list[tuple[Any, ...]]:
        conn = self.conn_of(table)
        later = _LATER_COLUMNS.get(table, frozenset())
        if later:
            present = _columns(conn, table)
            columns = ", ".join(c if c in present or c not in later else "NULL" for c in columns.split(", "))
        return list(
            conn.execute(
                f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?", (after, limit)
            )
        )

    def close(self) -> None:
        if self.records_conn is not None:
            self.records_conn.close()
        self.conn.close()


def _open_records(path: Path) -> apsw.Connection:
    """The records file, read-only; a file SQLite cannot read is named before anything is copied."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        conn.set_busy_timeout(30_000)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except apsw.Error as exc:
        raise StoreError(
            f"{path}: cannot read the per-turn records beside the store ({type(exc).__name__}: {exc}); "
            "restore it from a backup, or move it aside to copy the memories without those records"
        ) from None
    return conn


def _adopted(conn: apsw.Connection) -> set[str]:
    """The tables whose earlier rows the records file has taken over from the memory file."""
    if "_records_meta" not in _tables(conn):
        return set()
    keys = [str(r[0]) for r in conn.execute("SELECT key FROM _records_meta WHERE key LIKE 'adopted:%'")]
    return {t for k in keys for t in k.removeprefix("adopted:").split(",")}


def _chunk_values(src: _Source, row: tuple[Any, ...]) -> tuple[list[Any], Any]:
    """One source row as the destination's insert values (the backfill applied where due)."""
    (cid, content, domain, source_type, kind, policy, review, expires, heading, source, subject,
     namespace, epoch, invalidated, reason, created, updated, occurred, blob) = row  # fmt: skip
    domain = str(domain or "")
    source_type = str(source_type or "")
    if src.kind_pass and kind is None:
        kind, rule_policy = legacy_kind_and_policy(domain, source_type)
        policy = policy if policy is not None else rule_policy
    if src.review_pass and review is None:
        review = initial_review_state(trust_tier(source_type))
    created_at = _ts(created) or datetime.fromtimestamp(0, UTC)
    vector = np.frombuffer(blob, dtype=np.float32) if isinstance(blob, bytes) and src.dims else None
    return [
        int(cid),
        enc(str(content)),
        enc(domain),
        enc(source_type),
        kind,
        policy,
        review,
        _ts(expires),
        enc(str(heading or "")),
        enc(str(source or "")),
        enc(str(subject or "")),
        enc(str(namespace or "")),
        enc(str(epoch or "")),
        _ts(invalidated),
        enc_opt(None if reason is None else str(reason)),
        created_at,
        _ts(updated) or created_at,
        _ts(occurred),
    ], vector


#: A prompt snapshot's columns, the same on both sides: the cacheable-prefix figures last.
_SNAPSHOT_COLUMNS: Final[str] = (
    "session_id, turn_index, call_index, created_at, mode, incognito, prefix_sha256, prefix_sections, "
    "projection_sha256, projection, budget_chars, used_chars, history_messages, history_chars, "
    "stripped, trajectory_refs, full_text, " + ", ".join(name for name, _type in CACHE_COLUMNS)
)
#: Source columns a file may lack because they came after its table (the cacheable prefix,
#: issue 24, added on a writable open; the copy opens the source read-only): each reads as
#: NULL, which every reader shows as unknown ("recorded before the figures"), never a guess.
_LATER_COLUMNS: Final[Mapping[str, frozenset[str]]] = {
    "prompt_snapshots": frozenset(name for name, _type in CACHE_COLUMNS),
}
#: Record tables: (source table, source columns, destination insert, conflict target).
_RECORDS: Final[tuple[tuple[str, str, str], ...]] = (
    (
        "session_summaries",
        "id, session_id, created_at, kind, topic, summary",
        "INSERT INTO session_summaries(id, session_id, created_at, kind, topic, summary) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
    ),
    (
        "injection_log",
        "id, session_id, turn_index, at, mode, approx_tokens, used_chars, budget_chars, delivered",
        "INSERT INTO injection_log(id, session_id, turn_index, at, mode, approx_tokens, used_chars, "
        "budget_chars, delivered) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
    ),
    (
        "prefix_texts",
        "sha256, text, sections, created_at",
        "INSERT INTO prefix_texts(sha256, text, sections, created_at) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (sha256) DO NOTHING",
    ),
    (
        "prompt_snapshots",
        _SNAPSHOT_COLUMNS,
        f"INSERT INTO prompt_snapshots({_SNAPSHOT_COLUMNS}) VALUES "
        f"({', '.join(['%s'] * len(_SNAPSHOT_COLUMNS.split(', ')))}) "
        "ON CONFLICT (session_id, turn_index, call_index) DO NOTHING",
    ),
    (
        "turn_inputs",
        ", ".join(TURN_INPUT_FIELDS),
        f"INSERT INTO turn_inputs({', '.join(TURN_INPUT_FIELDS)}) VALUES "
        f"({', '.join(['%s'] * len(TURN_INPUT_FIELDS))}) ON CONFLICT (session_id, turn_index) DO NOTHING",
    ),
)


def _record_values(table: str, row: tuple[Any, ...]) -> tuple[Any, ...]:
    values = list(row[1:])  # without the rowid
    if table == "session_summaries":
        values[1], values[3], values[4], values[5] = (
            enc(str(v)) for v in (values[1], values[3], values[4], values[5])
        )
    elif table == "injection_log":
        values[1] = enc(str(values[1]))
    elif table == "prefix_texts":
        values[1] = enc_opt(values[1])
    elif table == "prompt_snapshots":
        values[0] = enc(str(values[0]))
        values[5] = bool(values[5])
        values[16] = enc_opt(values[16])
    elif table == "turn_inputs":
        fields = dict(zip(TURN_INPUT_FIELDS, values, strict=True))
        fields["state_exact"], fields["goal_turn"] = bool(fields["state_exact"]), bool(fields["goal_turn"])
        return inputs_args(TurnInputs(**fields))
    return tuple(values)


#: ``chunk_history``'s columns a copied event fills, and their types for the binary ``COPY``.
_HISTORY_COLUMNS: Final[str] = (
    "seq, chunk_id, at, event, actor, review_state, expires_at, invalidated_at, invalidation_reason, "
    "updated_at, detail"
)
_HISTORY_TYPES: Final[list[str]] = [
    "bigint", "bigint", "timestamptz", "text", "text", "text",
    "timestamptz", "timestamptz", "text", "timestamptz", "text",
]  # fmt: skip


def _event_values(event: HistoryEvent) -> list[Any]:
    """One source event as ``chunk_history``'s row (``pg_history`` reads it back as the same)."""
    return [
        event.seq,
        int(event.chunk_id),
        event.at,
        event.event,
        enc(event.actor),
        event.review_state,
        event.expires_at,
        event.invalidated_at,
        enc_opt(event.invalidation_reason),
        event.updated_at,
        json.dumps(dict(event.detail)) if event.detail else None,
    ]


def source_vector_dims(path: str | os.PathLike[str]) -> int | None:
    """The width of the vectors the embedded store at ``path`` holds (None: it holds none)."""
    src = _Source(Path(path))
    try:
        return src.dims
    finally:
        src.close()


def cursor_key(path: Path) -> str:
    return f"copy:{path.resolve()}"


def _cursors(db: Database, key: str) -> dict[str, Any] | None:
    """Per source table, the last row copied: a rowid, or for ``chunk_history`` an event's
    (seq, row id) key."""
    with db.connection("read from") as conn:
        value = pg_schema.meta_get(conn, key)
    return None if value is None else dict(json.loads(value))


def copy_store(
    source: str | os.PathLike[str],
    destination: Database,
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    on_batch: BatchCallback | None = None,
) -> CopyResult:
    """Copy the embedded store at ``source`` into ``destination`` (resuming an interrupted copy)."""
    if batch_rows < 1:
        raise StoreError(f"batch_rows: expected a whole number >= 1, got {batch_rows!r}")
    src = _Source(Path(source))
    try:
        return _copy(src, destination, batch_rows, on_batch)
    finally:
        src.close()


def _copy(src: _Source, db: Database, batch_rows: int, on_batch: BatchCallback | None) -> CopyResult:
    key = cursor_key(src.path)
    cursors = _cursors(db, key)
    resumed = cursors is not None
    if cursors is None:
        with db.connection("read from") as conn:
            present = _count(conn, "SELECT count(*) FROM chunks")
        if present:
            raise StoreError(
                f"{db.shown}: already holds {present} memories that were not copied from {src.path}; "
                "copy into an empty schema ([plugin.postgres] schema, or a new database)"
            )
        cursors = {}
    _event_cursor(src, cursors.get("chunk_history"))  # an unreadable cursor stops the copy before it writes
    if src.dims is not None:
        if not db.vectors:
            raise StoreError(f"{db.shown}: opened without vectors, but {src.path} holds {src.dims}-d vectors")
        with db.connection("set up") as conn:
            pg_schema.attach_vectors(conn, db.shown, src.dims, src.embedder)
    tables: list[TableCopy] = []
    vectors_done = 0
    # memories
    total = src.count("chunks")
    last = cursors.get("chunks", 0)
    with db.connection("read from") as conn:
        already = _count(conn, "SELECT count(*) FROM chunks WHERE id <= %s", (last,))
    copied = 0
    while True:
        batch = src.chunks(last, batch_rows)
        if not batch:
            break
        values = [_chunk_values(src, r) for r in batch]
        rows = [v for v, _ in values]
        vectors = [vec for _, vec in values] if src.dims is not None else None
        last = int(batch[-1][0])
        cursors["chunks"] = last
        with db.transaction() as conn:
            # Plain COPY, no ON CONFLICT: an id already present means the destination was
            # written to while the copy was unfinished, and that must stop the copy, loudly.
            copy_rows(conn, rows, vectors)
            copied += len(rows)
            vectors_done += sum(1 for v in vectors or () if v is not None)
            pg_schema.meta_set(conn, key, json.dumps(cursors))
        if on_batch is not None:
            on_batch("chunks", already + copied, total)
    tables.append(TableCopy("chunks", total, copied, already))
    tables.append(_copy_history(src, db, key, cursors, batch_rows, on_batch))
    for table, columns_text, insert in _RECORDS:
        tables.append(_copy_records(src, db, key, cursors, table, columns_text, insert, batch_rows, on_batch))
    with db.transaction() as conn:
        for table, column in (
            ("chunks", "id"),
            ("session_summaries", "id"),
            ("injection_log", "id"),
            ("chunk_history", "seq"),
        ):
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                f"greatest((SELECT max({column}) FROM {table}), 1), "
                f"(SELECT max({column}) FROM {table}) IS NOT NULL)"
            )
        _start_history(src, conn)
        cursors["done"] = 1
        pg_schema.meta_set(conn, key, json.dumps(cursors))
    left = tuple((t, n) for t in NOT_COPIED if (n := src.count(t)))
    return CopyResult(str(src.path), db.shown, resumed, tuple(tables), vectors_done, left)


def _copy_history(
    src: _Source,
    db: Database,
    key: str,
    cursors: dict[str, Any],
    batch_rows: int,
    on_batch: BatchCallback | None,
) -> TableCopy:
    """The source's events with their ``seq``, in (seq, row) order, a batch per transaction."""
    table = "chunk_history"
    if src.version < HISTORY_VERSION:
        return TableCopy(table, 0, 0, 0)
    after = _event_cursor(src, cursors.get(table))
    total = store_history.count_events(src.conn)
    already = 0
    if after is not None:
        with db.connection("read from") as conn:
            already = _count(
                conn, "SELECT count(*) FROM chunk_history WHERE (seq, chunk_id) <= (%s, %s)", after
            )
    copied = 0
    for batch in store_history.walk_events(src.conn, after, batch=batch_rows):
        cursors[table] = [batch[-1].seq, int(batch[-1].chunk_id)]
        with db.transaction() as conn:
            with (
                conn.cursor() as cur,
                cur.copy(f"COPY chunk_history ({_HISTORY_COLUMNS}) FROM STDIN WITH (FORMAT BINARY)") as cp,
            ):
                cp.set_types(_HISTORY_TYPES)
                for event in batch:
                    cp.write_row(_event_values(event))
            copied += len(batch)
            pg_schema.meta_set(conn, key, json.dumps(cursors))
        if on_batch is not None:
            on_batch(table, already + copied, total)
    return TableCopy(table, total, copied, already)


def _event_cursor(src: _Source, value: Any) -> store_history.EventKey | None:
    """Where an interrupted copy's history stopped: the (seq, row id) of its last event."""
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)):
        raise StoreError(
            f"{src.path}: the interrupted copy into this schema was started by an older "
            f"contextplane_postgres (its history cursor is {value!r}, not an event's (seq, row)); "
            "copy into an empty schema ([plugin.postgres] schema, or a new database)"
        )
    return int(value[0]), int(value[1])


def _start_history(src: _Source, conn: Any) -> None:
    """Every copied row without an event (a version-1 or -2 source has none) gets a
    ``migrated`` one (the history starts there), and the destination learns when the history
    starts (the source's time, else now)."""
    started = read_timestamp(_meta(src.conn, migrate.HISTORY_STARTED_KEY))
    stamp = started or utc_now()
    cur = conn.execute(
        "INSERT INTO chunk_history(chunk_id, at, event, actor, review_state, expires_at, invalidated_at, "
        "invalidation_reason, updated_at, detail) SELECT c.id, %s, 'migrated', '', c.review_state, "
        "c.expires_at, c.invalidated_at, c.invalidation_reason, c.updated_at, %s FROM chunks AS c "
        "WHERE NOT EXISTS (SELECT 1 FROM chunk_history AS h WHERE h.chunk_id = c.id) ORDER BY c.id",
        (stamp, json.dumps({"note": MIGRATION_NOTE})),
    )
    if started is not None or cur.rowcount:
        conn.execute(
            "INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
            (pg_history.HISTORY_STARTED_KEY, format_timestamp(stamp)),
        )


def _copy_records(
    src: _Source,
    db: Database,
    key: str,
    cursors: dict[str, Any],
    table: str,
    columns_text: str,
    insert: str,
    batch_rows: int,
    on_batch: BatchCallback | None,
) -> TableCopy:
    total = src.count(table)
    if table not in src.tables:
        return TableCopy(table, 0, 0, 0)
    last = cursors.get(table, 0)
    already = _count(src.conn_of(table), f"SELECT count(*) FROM {table} WHERE rowid <= ?", (last,))
    copied = 0
    for batch in _batches(src, table, columns_text, last, batch_rows):
        cursors[table] = int(batch[-1][0])
        with db.transaction() as conn, conn.cursor() as cur:
            cur.executemany(insert, [_record_values(table, r) for r in batch])
            copied += len(batch)
            pg_schema.meta_set(conn, key, json.dumps(cursors))
        if on_batch is not None:
            on_batch(table, already + copied, total)
    return TableCopy(table, total, copied, already)


def _batches(
    src: _Source, table: str, columns: str, after: int, size: int
) -> Iterator[list[tuple[Any, ...]]]:
    while True:
        batch = src.rows(table, columns, after, size)
        if not batch:
            return
        yield batch
        after = int(batch[-1][0])
