"""How the SQLite record tables open a connection to the store's file.

Every record table lives in the memory store's file (or the telemetry file the operator
names), opened with the store's own settings (WAL, busy timeout, the same header checks), so
one local database holds what a deployment remembers and what it delivered.
"""

from __future__ import annotations

import os

import apsw

from contextplane.errors import StoreError
from contextplane.store.sqlite import connect as connect_store


def connect(path: str | os.PathLike[str], schema: str, what: str) -> apsw.Connection:
    """Open ``path`` like the memory store does and apply ``schema`` (idempotent DDL)."""
    conn = connect_store(path)
    try:
        conn.execute(schema)
    except apsw.Error as exc:
        conn.close()
        raise StoreError(f"{path}: cannot create {what} ({type(exc).__name__}: {exc})") from None
    return conn
