"""Prompt snapshots in SQLite (ADR D5): rows keyed by (session, turn, call), prefix texts once
per hash, retention by age and count; and the turn inputs (``records.turn_inputs``) beside
them, one row per recorded composition, under the same retention.

``batch_size`` > 1 buffers rows and writes them in one transaction per batch, which is what
keeps capture cheap at the model-call boundary (see bench/runtime_bench.py).

Retention drops the text of a prefix no kept snapshot references, but a recorder registers
each prefix's text once and then only references it: after prefixes A, B, A under retention,
A's text could be gone while new rows point at it. So every batch of rows re-inserts, in its
own transaction, the text of each prefix it references that this store registered (a no-op
when the text is there). No row is ever written pointing at text that retention removed.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from contextplane.backends.sqlite.connection import (
    add_columns,
    adopt,
    connect,
    has_table,
    select_list,
    translated,
)
from contextplane.records.snapshots import PromptSnapshot, SnapshotRow, decode_snapshot
from contextplane.records.turn_inputs import TURN_INPUT_FIELDS, TurnInputs
from contextplane.store.connection import is_read_only

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
    cache_prefix_sha256 TEXT,
    cache_prefix_chars INTEGER,
    cache_shared_chars INTEGER,
    cache_break TEXT,
    PRIMARY KEY (session_id, turn_index, call_index)
);
CREATE INDEX IF NOT EXISTS prompt_snapshots_created ON prompt_snapshots(created_at);
CREATE TABLE IF NOT EXISTS turn_inputs (
    session_id TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    created_at REAL NOT NULL,
    query TEXT NOT NULL,
    state TEXT NOT NULL,
    state_exact INTEGER NOT NULL,
    surface TEXT NOT NULL,
    goal_turn INTEGER NOT NULL,
    project TEXT,
    only_sections TEXT,
    budget_tokens INTEGER,
    context_window INTEGER,
    skills_index TEXT,
    extra TEXT NOT NULL,
    config TEXT NOT NULL,
    config_sha256 TEXT NOT NULL,
    config_base_dir TEXT NOT NULL,
    plugins TEXT NOT NULL,
    history_seq INTEGER,
    history_at TEXT,
    projection_sha256 TEXT,
    sections TEXT NOT NULL,
    budget_chars INTEGER,
    used_chars INTEGER NOT NULL,
    trajectory_ref TEXT,
    PRIMARY KEY (session_id, turn_index)
);
CREATE INDEX IF NOT EXISTS turn_inputs_created ON turn_inputs(created_at);
"""


#: Columns added after the table was first shipped (issue 24, the cacheable prefix): a file
#: created before them gains them, nullable, on its first writable open; old rows read None.
CACHE_COLUMNS = (
    ("cache_prefix_sha256", "TEXT"),
    ("cache_prefix_chars", "INTEGER"),
    ("cache_shared_chars", "INTEGER"),
    ("cache_break", "TEXT"),
)


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
        read_only: bool = False,
        adopt_from: str | os.PathLike[str] | None = None,
        durability: str = "full",
    ) -> None:
        self.path = Path(path)
        self.retention_days = retention_days
        self.retention_count = retention_count
        self.batch_size = max(1, batch_size)
        self.prune_every = prune_every
        self._conn = connect(
            path, SCHEMA, "the prompt snapshots", read_only=read_only, durability=durability
        )
        with translated(str(path), "adding the cacheable-prefix columns to the prompt snapshots"):
            add_columns(self._conn, "prompt_snapshots", CACHE_COLUMNS)
        with translated(str(path), "adopting the prompt snapshots and turn inputs of the memory file"):
            adopt(self._conn, adopt_from, ("prefix_texts", "prompt_snapshots"))
            adopt(self._conn, adopt_from, ("turn_inputs",))  # its own marker: added by schema 3
        #: Inspecting (``read_only``) never creates the tables nor prunes: an absent table reads
        #: as no snapshots.
        self._read_only = is_read_only(self._conn)  # asked for, or the file is not writable
        self._present = has_table(self._conn, "prompt_snapshots")
        self._inputs_present = has_table(self._conn, "turn_inputs")  # a file from before issue 14
        #: What reads select: a column an older file opened read-only lacks reads as NULL.
        self._select = select_list(self._conn, "prompt_snapshots", _COLUMNS.split(", "))
        self._lock = threading.Lock()
        self._known_prefixes: set[str] = set()
        #: sha256 -> (text, sections) of every prefix registered here, so a batch can put back
        #: a text that retention removed (see the module docstring).
        self._registered: dict[str, tuple[str | None, str]] = {}
        self._pending: list[tuple[Any, ...]] = []
        self._since_prune = 0
        if not self._read_only:
            self.prune()

    # writing

    def register_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        """Store a prefix's text and manifest once per hash (``text`` None keeps no text)."""
        if sha256 in self._known_prefixes and text is None:
            return
        with self._lock:
            known = self._registered.get(sha256)
            if known is None or (known[0] is None and text is not None):
                self._registered[sha256] = (text, sections_json)
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
        with translated(str(self.path), "recording the prompt snapshots"), self._conn:
            for sha in {row[_PREFIX_SHA] for row in rows}:
                kept = self._registered.get(sha)
                if kept is not None:
                    self._conn.execute(_ENSURE_PREFIX, (sha, kept[0], kept[1], time.time()))
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
                self._conn.execute("DELETE FROM turn_inputs WHERE created_at < ?", (cutoff,))
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
        if not self._present:
            return None
        for (text,) in self._conn.execute("SELECT text FROM prefix_texts WHERE sha256=?", (sha256,)):
            return str(text) if text is not None else None
        return None

    def count(self, session_id: str | None = None) -> int:
        self.flush()
        if not self._present:
            return 0
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
        if not self._present:
            return []
        where, args = ("WHERE session_id=?", [session_id]) if session_id is not None else ("", [])
        sql = (
            f"SELECT {self._select} FROM prompt_snapshots {where} "
            "ORDER BY session_id, turn_index, call_index"
        )
        rows = [decode_snapshot(SnapshotRow(*r)) for r in self._conn.execute(sql, args)]
        if limit is not None:
            rows = sorted(rows, key=lambda s: s.created_at)[-limit:]
            rows.sort(key=lambda s: s.key)
        return rows

    def get(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None:
        self.flush()
        if not self._present:
            return None
        sql = (
            f"SELECT {self._select} FROM prompt_snapshots "
            "WHERE session_id=? AND turn_index=? AND call_index=?"
        )
        for row in self._conn.execute(sql, (session_id, turn_index, call_index)):
            return decode_snapshot(SnapshotRow(*row))
        return None

    # turn inputs

    def put_inputs(self, inputs: TurnInputs) -> None:
        """Store one turn's inputs (a recomposed turn replaces its earlier composition's)."""
        with self._lock, translated(str(self.path), "recording the turn inputs"), self._conn:
            self._conn.execute(_INPUTS_INSERT, attrs.astuple(inputs))

    def get_inputs(self, session_id: str, turn_index: int) -> TurnInputs | None:
        if not self._inputs_present:
            return None
        sql = f"SELECT {_INPUT_COLUMNS} FROM turn_inputs WHERE session_id=? AND turn_index=?"
        with self._lock:
            row = self._conn.execute(sql, (session_id, turn_index)).fetchone()
        return None if row is None else _inputs(row)

    def list_inputs(self, session_id: str | None = None) -> builtins.list[TurnInputs]:
        if not self._inputs_present:
            return []
        where, args = ("WHERE session_id=?", [session_id]) if session_id is not None else ("", [])
        sql = f"SELECT {_INPUT_COLUMNS} FROM turn_inputs {where} ORDER BY session_id, turn_index"
        with self._lock:
            rows = self._conn.execute(sql, args).fetchall()
        return [_inputs(r) for r in rows]

    def sessions(self) -> builtins.list[tuple[str, int, float]]:
        """(session id, snapshot count, newest created_at) per session."""
        self.flush()
        if not self._present:
            return []
        sql = (
            "SELECT session_id, count(*), max(created_at) FROM prompt_snapshots "
            "GROUP BY session_id ORDER BY max(created_at) DESC"
        )
        return [(str(s), int(n), float(t)) for s, n, t in self._conn.execute(sql)]


    # ------------------------------------------------------------------ async (records.aio)
    #: Each async method is its synchronous twin in a worker thread (apsw releases the GIL
    #: while SQLite works; the methods take this part's own lock), so the records observer
    #: writes a turn's rows in one worker thread rather than a hop per row.
    threaded_async = True

    async def aregister_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        await asyncio.to_thread(self.register_prefix, sha256, text, sections_json)

    async def aput(self, row: SnapshotRow) -> None:
        await asyncio.to_thread(self.put, row)

    async def aflush(self) -> None:
        await asyncio.to_thread(self.flush)

    async def aget(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None:
        return await asyncio.to_thread(self.get, session_id, turn_index, call_index)

    async def alist(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> builtins.list[PromptSnapshot]:
        return await asyncio.to_thread(self.list, session_id, limit=limit)

    async def aput_inputs(self, inputs: TurnInputs) -> None:
        await asyncio.to_thread(self.put_inputs, inputs)

    async def aget_inputs(self, session_id: str, turn_index: int) -> TurnInputs | None:
        return await asyncio.to_thread(self.get_inputs, session_id, turn_index)


_COLUMNS = (
    "session_id, turn_index, call_index, created_at, mode, incognito, prefix_sha256, prefix_sections, "
    "projection_sha256, projection, budget_chars, used_chars, history_messages, history_chars, "
    "stripped, trajectory_refs, full_text, " + ", ".join(c for c, _ in CACHE_COLUMNS)
)
_INSERT = f"INSERT OR REPLACE INTO prompt_snapshots({_COLUMNS}) VALUES ({','.join('?' * 21)})"
_PREFIX_SHA = 6  # the position of prefix_sha256 in a row
#: Put a registered prefix back if retention removed it (its text too, if it lost it).
_ENSURE_PREFIX = (
    "INSERT INTO prefix_texts(sha256, text, sections, created_at) VALUES (?,?,?,?) "
    "ON CONFLICT(sha256) DO UPDATE SET text=excluded.text WHERE text IS NULL AND excluded.text IS NOT NULL"
)

_INPUT_COLUMNS = ", ".join(TURN_INPUT_FIELDS)
_INPUTS_INSERT = (
    f"INSERT OR REPLACE INTO turn_inputs({_INPUT_COLUMNS}) VALUES ({','.join('?' * len(TURN_INPUT_FIELDS))})"
)
_BOOLS = frozenset({"state_exact", "goal_turn"})


def _inputs(row: tuple[Any, ...]) -> TurnInputs:
    values: dict[str, Any] = {
        name: bool(v) if name in _BOOLS else v for name, v in zip(TURN_INPUT_FIELDS, row, strict=True)
    }
    return TurnInputs(**values)
