"""The injection log in SQLite: one append-only table beside the memories."""

from __future__ import annotations

import asyncio
import builtins
import os
import threading
from typing import Any

from contextplane.backends.record_codec import (
    INJECTION_INSERT_COLUMNS,
    INJECTION_SELECT,
    injection_cells,
    injection_row,
)
from contextplane.backends.sqlite.connection import adopt, connect, has_table
from contextplane.backends.sqlite.connection import translated as _translated
from contextplane.records.injections import InjectionRow

SCHEMA = """
CREATE TABLE IF NOT EXISTS injection_log (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    at TEXT NOT NULL,
    mode TEXT NOT NULL,
    approx_tokens INTEGER NOT NULL,
    used_chars INTEGER NOT NULL,
    budget_chars INTEGER,
    delivered TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS injection_log_session ON injection_log(session_id, turn_index);
"""


class SQLiteInjectionLog:
    """``InjectionLog`` in one SQLite file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        adopt_from: str | os.PathLike[str] | None = None,
        durability: str = "full",
    ) -> None:
        """``adopt_from``: the memory file an earlier version kept this log in (copied once);
        ``durability``: ``observability.records_durability``."""
        self.path = str(path)
        self._conn = connect(
            self.path, SCHEMA, "the injection log", read_only=read_only, durability=durability
        )
        self._lock = threading.Lock()
        with _translated(self.path, "adopting the injection log of the memory file"):
            adopt(self._conn, adopt_from, ("injection_log",))

    def record(self, row: InjectionRow) -> int:
        with self._lock, _translated(self.path, "recording the injection log row"):
            self._conn.execute(
                f"INSERT INTO injection_log({INJECTION_INSERT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)",
                injection_cells(row),
            )
            return int(self._conn.last_insert_rowid())

    def rows(self, session_id: str | None = None, limit: int | None = None) -> builtins.list[InjectionRow]:
        sql = INJECTION_SELECT
        args: list[Any] = []
        if session_id is not None:
            sql += " WHERE session_id = ?"
            args.append(session_id)
        sql += " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        with self._lock:
            if not has_table(self._conn, "injection_log"):
                return []  # opened read-only on a file that never logged an injection
            with _translated(self.path, "reading the injection log"):
                out = list(self._conn.execute(sql, args))
        return [injection_row(r) for r in out]

    def close(self) -> None:
        self._conn.close()

    # ------------------------------------------------------------------ async (records.aio)
    #: Each async method is its synchronous twin in a worker thread (apsw releases the GIL
    #: while SQLite works; the methods take this part's own lock), so the records observer
    #: writes a turn's rows in one worker thread rather than a hop per row.
    threaded_async = True

    async def arecord(self, row: InjectionRow) -> int:
        return await asyncio.to_thread(self.record, row)

    async def arows(
        self, session_id: str | None = None, limit: int | None = None
    ) -> builtins.list[InjectionRow]:
        return await asyncio.to_thread(self.rows, session_id, limit)
