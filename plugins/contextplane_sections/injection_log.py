"""The injection log (ADR 0069 D6, required on every surface by ADR D8).

One row per recorded projection: session id, turn index, time, the ids actually delivered
after shedding (per section) and the approximate tokens. It is an ``observe_projection``
observer, so every surface that composes through ``compose_projected_context`` writes it, and
incognito turns, which the core never hands to observers, write nothing.

Rows go to the same SQLite file as the memory store (``injection_log`` table).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import apsw
import attrs

from contextplane import ProjectedContext, ProjectionRequest, hookimpl
from contextplane.errors import StoreError

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


@attrs.frozen
class InjectionRow:
    id: int
    session_id: str
    turn_index: int
    at: str
    mode: str
    approx_tokens: int
    used_chars: int
    budget_chars: int | None
    delivered: dict[str, list[str]]

    @property
    def ids(self) -> list[str]:
        return [i for ids in self.delivered.values() for i in ids]


class InjectionLog:
    """Append-only log of delivered ids, in one SQLite file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = apsw.Connection(self.path)
            self._conn.set_busy_timeout(5_000)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(SCHEMA)
        except apsw.Error as exc:
            raise StoreError(f"{self.path}: cannot open the injection log ({exc})") from None
        self._lock = threading.Lock()

    def record(self, projection: ProjectedContext) -> None:
        record = projection.injection
        if record is None or projection.incognito:
            return
        with self._lock:
            self._conn.execute(
                "INSERT INTO injection_log(session_id, turn_index, at, mode, approx_tokens, used_chars, "
                "budget_chars, delivered) VALUES (?,?,?,?,?,?,?,?)",
                (
                    record.session_id,
                    record.turn_index,
                    record.at,
                    projection.mode.value,
                    record.approx_tokens,
                    projection.used_chars,
                    projection.budget_chars,
                    json.dumps({k: list(v) for k, v in record.delivered.items()}, sort_keys=True),
                ),
            )

    def rows(self, session_id: str | None = None, limit: int | None = None) -> list[InjectionRow]:
        sql = (
            "SELECT id, session_id, turn_index, at, mode, approx_tokens, used_chars, budget_chars, delivered "
            "FROM injection_log"
        )
        args: list[Any] = []
        if session_id is not None:
            sql += " WHERE session_id = ?"
            args.append(session_id)
        sql += " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        with self._lock:
            out = list(self._conn.execute(sql, args))
        return [
            InjectionRow(
                id=r[0],
                session_id=r[1],
                turn_index=r[2],
                at=r[3],
                mode=r[4],
                approx_tokens=r[5],
                used_chars=r[6],
                budget_chars=r[7],
                delivered=json.loads(r[8]),
            )
            for r in out
        ]

    def close(self) -> None:
        self._conn.close()


_open: dict[str, InjectionLog] = {}
_open_lock = threading.Lock()


def log_at(path: str | os.PathLike[str]) -> InjectionLog:
    """One shared log per file per process."""
    key = str(Path(path).resolve())
    with _open_lock:
        found = _open.get(key)
        if found is None:
            found = _open[key] = InjectionLog(key)
        return found


def log_for(request: ProjectionRequest) -> InjectionLog | None:
    explicit = request.extra.get("injection_log")
    if explicit is not None:
        return explicit  # type: ignore[no-any-return]
    store_path = getattr(request.knowledge_store, "path", None)
    if isinstance(store_path, str) and store_path != ":memory:":
        return log_at(store_path)
    if request.config.store.path:
        return log_at(request.config.resolve_path(request.config.store.path))
    return None


@hookimpl
def observe_projection(projection: ProjectedContext, request: ProjectionRequest) -> None:
    log = log_for(request)
    if log is not None:
        log.record(projection)
