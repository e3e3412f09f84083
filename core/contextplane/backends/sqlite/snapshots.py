"""Prompt snapshots in SQLite (ADR D5): rows keyed by (session, turn, call), prefix texts once
per hash, retention by age and count.

``batch_size`` > 1 buffers rows and writes them in one transaction per batch, which is what
keeps capture cheap at the model-call boundary (see bench/runtime_bench.py).
"""

from __future__ import annotations

import builtins
import os
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from contextplane.backends.sqlite.connection import adopt, connect
from contextplane.records.snapshots import PromptSnapshot, SnapshotRow, decode_snapshot

SCHEMA = """
CREATE TABLE IF NOT EXISTS prefix_texts (
    sha256 TEXT PRIMARY KEY,
    text TEXT,
    sections TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS prompt_snapshots (
    session_id TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    call_index INTEGER NOT NULL,
    created_at REAL NOT NULL,
    mode TEXT NOT NULL,
    incognito INTEGER NOT NULL,
    prefix_sha256 TEXT,
    prefix_sections TEXT,
    projection_sha256 TEXT,
    projection TEXT NOT NULL,
    budget_chars INTEGER,
    used_chars INTEGER NOT NULL,
    history_messages INTEGER NOT NULL,
    history_chars INTEGER NOT NULL,
    stripped TEXT NOT NULL,
    trajectory_refs TEXT NOT NULL,
    full_text TEXT,
    PRIMARY KEY (session_id, turn_index, call_index)
);
CREATE INDEX IF NOT EXISTS prompt_snapshots_created ON prompt_snapshots(created_at);
"""


class SQLiteSnapshotStore:
    """``SnapshotStore`` in SQLite: the ``prompt_snapshots`` table and the once-per-hash prefix texts.

    ``batch_size`` > 1 buffers rows and writes them in one transaction per batch (call
    ``flush`` or ``close``); 1 writes each row as it is captured. Retention (days and count)
    runs on open and every ``prune_every`` rows.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        retention_days: float = 30.0,
        retention_count: int = 100_000,
        batch_size: int = 1,
        prune_every: int = 1_000,
        adopt_from: str | os.PathLike[str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.retention_days = retention_days
        self.retention_count = retention_count
        self.batch_size = max(1, batch_size)
        self.prune_every = prune_every
        self._conn = connect(path, SCHEMA, "the prompt snapshots")
        adopt(self._conn, adopt_from, ("prefix_texts", "prompt_snapshots"))
        self._lock = threading.Lock()
        self._known_prefixes: set[str] = set()
        self._pending: list[tuple[Any, ...]] = []
        self._since_prune = 0
        self.prune()

    # writing

    def register_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        """Store a prefix's text and manifest once per hash (``text`` None keeps no text)."""
        if sha256 in self._known_prefixes and text is None:
            return
        with self._lock:
            if text is None:
                self._conn.execute(
                    "INSERT OR IGNORE INTO prefix_texts(sha256, text, sections, created_at) VALUES (?,?,?,?)",
                    (sha256, None, sections_json, time.time()),
                )
            else:
                # A text-less row (left by an incognito turn) gains its text on first normal use.
                self._conn.execute(
                    "INSERT INTO prefix_texts(sha256, text, sections, created_at) VALUES (?,?,?,?) "
                    "ON CONFLICT(sha256) DO UPDATE SET text=excluded.text WHERE text IS NULL",
                    (sha256, text, sections_json, time.time()),
                )
                self._known_prefixes.add(sha256)

    def put(self, row: SnapshotRow) -> None:
        """Queue or write one snapshot row."""
        with self._lock:
            self._pending.append(attrs.astuple(row))
            if len(self._pending) >= self.batch_size:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        with self._conn:
            if len(rows) == 1:
                self._conn.execute(_INSERT, rows[0])
            else:
                self._conn.executemany(_INSERT, rows)
        self._since_prune += len(rows)
        if self._since_prune >= self.prune_every:
            self._prune_locked(None)

    def prune(self, now: float | None = None) -> int:
        """Apply retention: drop rows older than ``retention_days``, then all but the newest
        ``retention_count``, then prefix texts no snapshot references. Returns rows dropped."""
        with self._lock:
            return self._prune_locked(now)

    def _prune_locked(self, now: float | None) -> int:
        self._since_prune = 0
        now = time.time() if now is None else now
        dropped = 0
        with self._conn:
            if self.retention_days > 0:
                cutoff = now - self.retention_days * 86_400
                self._conn.execute("DELETE FROM prompt_snapshots WHERE created_at < ?", (cutoff,))
                dropped += self._conn.changes()
            if self.retention_count > 0:
                self._conn.execute(
                    "DELETE FROM prompt_snapshots WHERE rowid NOT IN "
                    "(SELECT rowid FROM prompt_snapshots ORDER BY created_at DESC, rowid DESC LIMIT ?)",
                    (self.retention_count,),
                )
                dropped += self._conn.changes()
            if dropped:
                self._conn.execute(
                    "DELETE FROM prefix_texts WHERE sha256 NOT IN "
                    "(SELECT DISTINCT prefix_sha256 FROM prompt_snapshots WHERE prefix_sha256 IS NOT NULL)"
                )
                self._known_prefixes.clear()
        return dropped

    def close(self) -> None:
        with self._lock:
            self._flush_locked()
            self._conn.close()

    # reading

    def prefix_text(self, sha256: str) -> str | None:
        self.flush()
        for (text,) in self._conn.execute("SELECT text FROM prefix_texts WHERE sha256=?", (sha256,)):
            return str(text) if text is not None else None
        return None

    def count(self, session_id: str | None = None) -> int:
        self.flush()
        args: tuple[Any, ...] = ()
        if session_id is None:
            sql = "SELECT count(*) FROM prompt_snapshots"
        else:
            sql, args = "SELECT count(*) FROM prompt_snapshots WHERE session_id=?", (session_id,)
        return int(next(iter(self._conn.execute(sql, args)))[0])

    def list(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> builtins.list[PromptSnapshot]:
        """Snapshots in key order (session, turn, call); ``limit`` keeps the newest rows."""
        self.flush()
        where, args = ("WHERE session_id=?", [session_id]) if session_id is not None else ("", [])
        sql = f"SELECT {_COLUMNS} FROM prompt_snapshots {where} ORDER BY session_id, turn_index, call_index"
        rows = [decode_snapshot(SnapshotRow(*r)) for r in self._conn.execute(sql, args)]
        if limit is not None:
            rows = sorted(rows, key=lambda s: s.created_at)[-limit:]
            rows.sort(key=lambda s: s.key)
        return rows

    def get(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None:
        self.flush()
        sql = f"SELECT {_COLUMNS} FROM prompt_snapshots WHERE session_id=? AND turn_index=? AND call_index=?"
        for row in self._conn.execute(sql, (session_id, turn_index, call_index)):
            return decode_snapshot(SnapshotRow(*row))
        return None

    def sessions(self) -> builtins.list[tuple[str, int, float]]:
        """(session id, snapshot count, newest created_at) per session."""
        self.flush()
        sql = (
            "SELECT session_id, count(*), max(created_at) FROM prompt_snapshots "
            "GROUP BY session_id ORDER BY max(created_at) DESC"
        )
        return [(str(s), int(n), float(t)) for s, n, t in self._conn.execute(sql)]


_COLUMNS = (
    "session_id, turn_index, call_index, created_at, mode, incognito, prefix_sha256, prefix_sections, "
    "projection_sha256, projection, budget_chars, used_chars, history_messages, history_chars, "
    "stripped, trajectory_refs, full_text"
)
_INSERT = f"INSERT OR REPLACE INTO prompt_snapshots({_COLUMNS}) VALUES ({','.join('?' * 17)})"
