"""How the SQLite record tables open a connection, and which file holds them.

Every record table is opened with the memory store's own settings (WAL, busy timeout, the same
header checks). The records written on every turn (the injection log, prompt snapshots and turn
inputs) live in a *records file* beside the memory store (``memory.sqlite3`` ->
``memory.records.sqlite3``), not in the store itself: SQLite drops every other connection's page
cache when a file changes, so one injection-log row per turn in the memory file made the next
composition re-read its pages (at 100k memories the next search cost 14.4 ms instead of 7.0 ms
of CPU). Rows an earlier version wrote into the memory file are copied into the records file
once, on first open; the old tables are left in place, untouched. Opened read-only, nothing is
created: no records file (``records_source`` then reads the memory file's old tables), no
table; a missing table reads as empty.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import apsw

from contextplane.errors import StoreError
from contextplane.store.connection import is_read_only, store_error
from contextplane.store.sqlite import connect as connect_store

#: ``observability.records_durability`` -> the records connection's ``PRAGMA synchronous``. In
#: WAL mode NORMAL (the memory store's setting) never loses a commit to an application crash,
#: only to the machine's; FULL syncs the WAL at every commit, so a returned record write is on
#: disk, at an fsync per record. Nothing weaker than NORMAL is offered: OFF can corrupt the file.
SYNCHRONOUS = {"full": "NORMAL", "relaxed": "NORMAL", "fsync": "FULL"}

_META_SQL = "CREATE TABLE IF NOT EXISTS _records_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


def records_path(store_path: str | os.PathLike[str]) -> str:
    """The records file of the memory store at ``store_path`` (``a/memory.sqlite3`` ->
    ``a/memory.records.sqlite3``)."""
    text = str(store_path)
    if text == ":memory:":
        return text
    path = Path(text)
    return str(path.with_name(f"{path.stem}.records{path.suffix}"))


def records_source(
    store_path: str | os.PathLike[str], *, read_only: bool
) -> tuple[str, str | None]:
    """``(file to open, memory file to adopt earlier rows from)`` for the per-turn records of
    the store at ``store_path``. Read-only never creates the records file: without one, the
    memory file itself is read (where an earlier version kept them), and nothing is adopted."""
    target = records_path(store_path)
    if not read_only:
        return target, str(store_path)
    if target != ":memory:" and not Path(target).exists():
        return str(store_path), None
    return target, None


def has_table(conn: apsw.Connection, name: str) -> bool:
    """Whether the record table exists (a read-only file may predate it)."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return row is not None


def columns_of(conn: apsw.Connection, table: str, schema: str = "main") -> list[str]:
    """The columns ``table`` has in this file (none when it is absent)."""
    return [str(r[1]) for r in conn.execute(f'PRAGMA {schema}.table_info("{table}")')]


def add_columns(conn: apsw.Connection, table: str, columns: Sequence[tuple[str, str]]) -> list[str]:
    """Add the nullable ``columns`` (name, SQL type) a file created by an earlier version lacks;
    return the names added. Checked again inside the write transaction, so two processes
    opening one old file together add each column once. Read-only: nothing is added."""
    if is_read_only(conn) or not has_table(conn, table):
        return []
    if not [c for c, _ in columns if c not in columns_of(conn, table)]:
        return []
    added: list[str] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        have = set(columns_of(conn, table))
        for name, sql_type in columns:
            if name not in have:
                conn.execute(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {sql_type}')
                added.append(name)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return added


def select_list(conn: apsw.Connection, table: str, wanted: Sequence[str]) -> str:
    """``wanted`` as a SELECT list over ``table``, a column the file lacks (an older file opened
    read-only) read as NULL."""
    have = set(columns_of(conn, table))
    return ", ".join(c if c in have or not have else f"NULL AS {c}" for c in wanted)


def connect(
    path: str | os.PathLike[str], schema: str, what: str, *, read_only: bool = False, durability: str = "full"
) -> apsw.Connection:
    """Open ``path`` like the memory store does and apply ``schema`` (idempotent DDL).
    ``read_only`` (what inspecting commands use) never creates the file or a table: a record
    table that is not there reads as empty. ``durability``: ``observability.records_durability``."""
    conn = connect_store(path, create=not read_only, read_only=read_only)
    if is_read_only(conn):
        return conn
    try:
        conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS[durability]}")
        conn.execute(schema)
    except apsw.Error as exc:
        conn.close()
        raise StoreError(f"{path}: cannot create {what} ({type(exc).__name__}: {exc})") from None
    return conn


@contextlib.contextmanager
def translated(path: str, doing: str) -> Iterator[None]:
    """A SQLite failure inside as a ``StoreError`` naming the file and what to do."""
    try:
        yield
    except apsw.Error as exc:
        raise store_error(path, exc, doing) from None


def adopt(conn: apsw.Connection, legacy: str | os.PathLike[str] | None, tables: Sequence[str]) -> int:
    """Copy ``tables`` from the memory file ``legacy`` (where earlier versions kept them) into
    this records file, once; return the rows copied. A marker in ``_records_meta`` makes it
    once only, checked inside the write transaction, so two processes opening together copy
    nothing twice."""
    if legacy is None or str(legacy) == ":memory:" or not Path(legacy).is_file() or is_read_only(conn):
        return 0
    if Path(legacy).resolve() == Path(_main_file(conn)).resolve():
        return 0
    key = "adopted:" + ",".join(tables)
    conn.execute(_META_SQL)
    if conn.execute("SELECT 1 FROM _records_meta WHERE key = ?", (key,)).fetchone() is not None:
        return 0
    copied = 0
    conn.execute("ATTACH DATABASE ? AS legacy", (str(legacy),))
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM _records_meta WHERE key = ?", (key,)).fetchone() is None:
                for table in tables:
                    found = conn.execute(
                        "SELECT 1 FROM legacy.sqlite_master WHERE type = 'table' AND name = ?", (table,)
                    ).fetchone()
                    if found is None:
                        continue
                    # The columns both have: a file from an older version lacks later ones.
                    theirs = set(columns_of(conn, table, "legacy"))
                    columns = ", ".join(f'"{c}"' for c in columns_of(conn, table) if c in theirs)
                    conn.execute(
                        f'INSERT OR IGNORE INTO main."{table}" ({columns}) '
                        f'SELECT {columns} FROM legacy."{table}"'
                    )
                    copied += int(conn.changes())
                conn.execute("INSERT INTO _records_meta(key, value) VALUES (?, ?)", (key, str(copied)))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    finally:
        conn.execute("DETACH DATABASE legacy")
    return copied


def _main_file(conn: apsw.Connection) -> str:
    row = conn.execute("SELECT file FROM pragma_database_list WHERE name = 'main'").fetchone()
    return str(row[0]) if row and row[0] else ":memory:"
