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
from typing import Any

import attrs

from contextplane import ProjectedContext, ProjectionRequest, hookimpl
from contextplane_sections.sqlite_file import SharedByPath, connect, store_file

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
        self._conn = connect(self.path, SCHEMA, "the injection log")
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


_shared: SharedByPath[InjectionLog] = SharedByPath(InjectionLog)


def log_at(path: str | os.PathLike[str]) -> InjectionLog:
    """One shared log per file per process."""
    return _shared.get(path)


def log_for(request: ProjectionRequest) -> InjectionLog | None:
    explicit = request.extra.get("injection_log")
    if explicit is not None:
        return explicit  # type: ignore[no-any-return]
    path = store_file(request)
    return log_at(path) if path is not None else None


@hookimpl
def observe_projection(projection: ProjectedContext, request: ProjectionRequest) -> None:
    log = log_for(request)
    if log is not None:
        log.record(projection)
