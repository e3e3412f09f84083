"""Session summaries: what the prior-session digest (ADR D9) is made from.

Kept in the same SQLite file as the memory store, in their own tables, with an FTS5 index
over topic and summary so the ``relevant`` policy can rank them by the same BM25 search the
retrieval path uses (no LLM judge: ADR 0069 found those unreliable).
"""

from __future__ import annotations

import datetime as dt
import os
import threading

import attrs

from contextplane.errors import ValidationError
from contextplane.store.fts_query import to_match_expression
from contextplane_sections.sqlite_file import SharedByPath, connect

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


@attrs.frozen
class SessionSummary:
    id: int
    session_id: str
    created_at: str
    kind: str
    topic: str
    summary: str


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class SessionSummaries:
    """Append and query session summaries in one SQLite file (WAL, busy timeout)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._conn = connect(self.path, SCHEMA, "the session summaries")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._conn.close()

    def add(
        self, session_id: str, summary: str, *, topic: str = "", kind: str = "session", at: str | None = None
    ) -> int:
        """Store one summary; returns its id."""
        for field, value in (
            ("session_id", session_id),
            ("summary", summary),
            ("topic", topic),
            ("kind", kind),
        ):
            if not isinstance(value, str):
                raise ValidationError(f"{field}: expected text (str), got {type(value).__name__}")
        if not session_id.strip() or not summary.strip():
            raise ValidationError("session_id and summary must not be empty")
        with self._lock:
            self._conn.execute(
                "INSERT INTO session_summaries(session_id, created_at, kind, topic, summary) "
                "VALUES (?,?,?,?,?)",
                (session_id, at or _now(), kind, topic, summary),
            )
            return int(self._conn.last_insert_rowid())

    def _rows(self, sql: str, args: tuple[object, ...]) -> list[SessionSummary]:
        with self._lock:
            return [SessionSummary(*row) for row in self._conn.execute(sql, args)]

    def newest(self, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        """The newest summaries, never the excluded (active) session's."""
        return self._rows(
            "SELECT id, session_id, created_at, kind, topic, summary FROM session_summaries "
            "WHERE session_id != ? ORDER BY created_at DESC, id DESC LIMIT ?",
            (exclude_session or "", limit),
        )

    def relevant(self, query: str, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        """Summaries matching ``query`` by BM25, best first; empty when nothing matches."""
        expr = to_match_expression(query)
        if expr is None:
            return []
        return self._rows(
            "SELECT s.id, s.session_id, s.created_at, s.kind, s.topic, s.summary "
            "FROM session_summaries_fts f JOIN session_summaries s ON s.id = f.rowid "
            "WHERE session_summaries_fts MATCH ? AND s.session_id != ? "
            "ORDER BY bm25(session_summaries_fts), s.created_at DESC LIMIT ?",
            (expr, exclude_session or "", limit),
        )

    def count(self) -> int:
        with self._lock:
            return int(next(self._conn.execute("SELECT count(*) FROM session_summaries"))[0])


_shared: SharedByPath[SessionSummaries] = SharedByPath(SessionSummaries)


def summaries_at(path: str | os.PathLike[str]) -> SessionSummaries:
    """One shared ``SessionSummaries`` per file per process."""
    return _shared.get(path)
