"""How the SQLite record tables open a connection to the store's file.

Every record table lives in the memory store's file (or the telemetry file the operator
names), opened with the store's own settings (WAL, busy timeout, the same header checks), so
one local database holds what a deployment remembers and what it delivered. Opened
read-only, nothing is created: a missing table reads as empty.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import apsw

from contextplane.errors import StoreError
from contextplane.store.connection import is_read_only, store_error
from contextplane.store.sqlite import connect as connect_store


def has_table(conn: apsw.Connection, name: str) -> bool:
    """Whether the record table exists (a read-only file may predate it)."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return row is not None


def connect(
    path: str | os.PathLike[str], schema: str, what: str, *, read_only: bool = False
) -> apsw.Connection:
    """Open ``path`` like the memory store does and apply ``schema`` (idempotent DDL).
    ``read_only`` (what inspecting commands use) never creates the file or a table: a record
    table that is not there reads as empty."""
    conn = connect_store(path, create=not read_only, read_only=read_only)
    if is_read_only(conn):
        return conn
    try:
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
