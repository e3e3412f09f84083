"""Session summaries in SQLite: one table plus an FTS5 index over topic and summary, so the
``relevant`` digest policy ranks them with the same BM25 search the retrieval path uses."""

from __future__ import annotations

import asyncio
import builtins
import os
import threading

from contextplane.backends.sqlite.connection import connect, has_table, translated
from contextplane.records.summaries import SessionSummary, summary_stamp, validate_summary
from contextplane.store.fts_query import to_match_expression

SCHEMA = """
CREATE TABLE IF NOT EXISTS session_summaries (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'session',
    topic TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS session_summaries_created ON session_summaries(created_at DESC, id DESC);
CREATE VIRTUAL TABLE IF NOT EXISTS session_summaries_fts USING fts5(
    topic, summary, content='session_summaries', content_rowid='id'
);
CREATE TRIGGER IF NOT EXISTS session_summaries_ai AFTER INSERT ON session_summaries BEGIN
    INSERT INTO session_summaries_fts(rowid, topic, summary) VALUES (new.id, new.topic, new.summary);
END;
CREATE TRIGGER IF NOT EXISTS session_summaries_ad AFTER DELETE ON session_summaries BEGIN
    INSERT INTO session_summaries_fts(session_summaries_fts, rowid, topic, summary)
    VALUES ('delete', old.id, old.topic, old.summary);
END;
"""

_COLUMNS = "s.id, s.session_id, s.created_at, s.kind, s.topic, s.summary"



class SQLiteSessionSummaries:
    """``SessionSummaries`` in one SQLite file (WAL, busy timeout)."""

    def __init__(
        self, path: str | os.PathLike[str], *, read_only: bool = False, durability: str = "full"
    ) -> None:
        self.path = str(path)
        self._conn = connect(
            self.path, SCHEMA, "the session summaries", read_only=read_only, durability=durability
        )
        self._lock = threading.Lock()
        self._present = has_table(self._conn, "session_summaries")

    def close(self) -> None:
        self._conn.close()

    def add(
        self, session_id: str, summary: str, *, topic: str = "", kind: str = "session", at: str | None = None
    ) -> str:
        validate_summary(session_id, summary, topic, kind)
        with self._lock, translated(self.path, "storing the session summary"):
            self._conn.execute(
                "INSERT INTO session_summaries(session_id, created_at, kind, topic, summary) "
                "VALUES (?,?,?,?,?)",
                (session_id, at or summary_stamp(), kind, topic, summary),
            )
            return str(self._conn.last_insert_rowid())

    def _rows(self, sql: str, args: tuple[object, ...]) -> builtins.list[SessionSummary]:
        if not self._present:
            return []  # opened read-only on a file that holds no summaries
        with self._lock, translated(self.path, "reading the session summaries"):
            return [SessionSummary(*row) for row in self._conn.execute(sql, args)]

    def newest(self, limit: int, *, exclude_session: str | None = None) -> builtins.list[SessionSummary]:
        return self._rows(
            f"SELECT {_COLUMNS} FROM session_summaries AS s "
            "WHERE s.session_id != ? ORDER BY s.created_at DESC, s.id DESC LIMIT ?",
            (exclude_session or "", limit),
        )

    def relevant(
        self, query: str, limit: int, *, exclude_session: str | None = None
    ) -> builtins.list[SessionSummary]:
        expr = to_match_expression(query)
        if expr is None:
            return []
        return self._rows(
            f"SELECT {_COLUMNS} FROM session_summaries_fts f JOIN session_summaries s ON s.id = f.rowid "
            "WHERE session_summaries_fts MATCH ? AND s.session_id != ? "
            "ORDER BY bm25(session_summaries_fts), s.created_at DESC LIMIT ?",
            (expr, exclude_session or "", limit),
        )

    def count(self) -> int:
        if not self._present:
            return 0
        with self._lock:
            return int(next(self._conn.execute("SELECT count(*) FROM session_summaries"))[0])

    # ------------------------------------------------------------------ async (records.aio)
    #: Each async method is its synchronous twin in a worker thread (apsw releases the GIL
    #: while SQLite works; the methods take this part's own lock), so the records observer
    #: writes a turn's rows in one worker thread rather than a hop per row.
    threaded_async = True

    async def aadd(
        self, session_id: str, summary: str, *, topic: str = "", kind: str = "session", at: str | None = None
    ) -> str:
        return await asyncio.to_thread(self.add, session_id, summary, topic=topic, kind=kind, at=at)

    async def anewest(
        self, limit: int, *, exclude_session: str | None = None
    ) -> builtins.list[SessionSummary]:
        return await asyncio.to_thread(self.newest, limit, exclude_session=exclude_session)

    async def arelevant(
        self, query: str, limit: int, *, exclude_session: str | None = None
    ) -> builtins.list[SessionSummary]:
        return await asyncio.to_thread(self.relevant, query, limit, exclude_session=exclude_session)

    async def acount(self) -> int:
        return await asyncio.to_thread(self.count)
