"""The in-memory reference backend's record parts: session summaries, the injection log, and the
snapshots with their turn inputs, each in lists and dicts under a lock (see
``contextplane.backends.memory``).
"""

from __future__ import annotations

import builtins
import re
import threading

import attrs

from contextplane.records.injections import InjectionRow
from contextplane.records.snapshots import PromptSnapshot, SnapshotRow, decode_snapshot
from contextplane.records.summaries import SessionSummary, summary_stamp, validate_summary
from contextplane.records.turn_inputs import TurnInputs

_WORD = re.compile(r"\w+")


class InMemorySessionSummaries:
    """``SessionSummaries`` in a list; ``relevant`` ranks by word overlap with topic + summary."""

    def __init__(self) -> None:
        self._rows: list[SessionSummary] = []
        self._lock = threading.Lock()

    def add(
        self, session_id: str, summary: str, *, topic: str = "", kind: str = "session", at: str | None = None
    ) -> str:
        validate_summary(session_id, summary, topic, kind)
        with self._lock:
            row = SessionSummary(
                str(len(self._rows) + 1),
                session_id,
                at or summary_stamp(),
                kind,
                topic,
                summary,
            )
            self._rows.append(row)
            return row.id

    def _newest_first(self, exclude: str | None) -> list[SessionSummary]:
        with self._lock:
            rows = [r for r in self._rows if r.session_id != (exclude or "")]
        return sorted(rows, key=lambda r: (r.created_at, int(r.id)), reverse=True)

    def newest(self, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        return self._newest_first(exclude_session)[:limit]

    def relevant(self, query: str, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        words = {w.lower() for w in _WORD.findall(query)}
        scored = []
        for r in self._newest_first(exclude_session):
            overlap = len(words & {w.lower() for w in _WORD.findall(f"{r.topic} {r.summary}")})
            if overlap:
                scored.append((overlap, r))
        scored.sort(key=lambda pair: -pair[0])  # stable: newest first among equals
        return [r for _, r in scored[:limit]]

    def count(self) -> int:
        with self._lock:
            return len(self._rows)

    # Async forms (records.aio): list operations under a lock held for microseconds, run in place.

    async def aadd(
        self, session_id: str, summary: str, *, topic: str = "", kind: str = "session", at: str | None = None
    ) -> str:
        return self.add(session_id, summary, topic=topic, kind=kind, at=at)

    async def anewest(self, limit: int, *, exclude_session: str | None = None) -> list[SessionSummary]:
        return self.newest(limit, exclude_session=exclude_session)

    async def arelevant(
        self, query: str, limit: int, *, exclude_session: str | None = None
    ) -> list[SessionSummary]:
        return self.relevant(query, limit, exclude_session=exclude_session)

    async def acount(self) -> int:
        return self.count()


class InMemoryInjectionLog:
    """``InjectionLog`` in a list."""

    def __init__(self) -> None:
        self._rows: list[InjectionRow] = []
        self._lock = threading.Lock()

    def record(self, row: InjectionRow) -> int:
        with self._lock:
            stored = attrs.evolve(row, id=len(self._rows) + 1)
            self._rows.append(stored)
            return stored.id

    def rows(self, session_id: str | None = None, limit: int | None = None) -> list[InjectionRow]:
        with self._lock:
            out = [r for r in self._rows if session_id is None or r.session_id == session_id]
        return out if limit is None else out[:limit]

    # Async forms (records.aio): list operations under a lock held for microseconds, run in place.

    async def arecord(self, row: InjectionRow) -> int:
        return self.record(row)

    async def arows(self, session_id: str | None = None, limit: int | None = None) -> list[InjectionRow]:
        return self.rows(session_id, limit)


class InMemorySnapshotStore:
    """``SnapshotStore`` in dicts; no retention (a test's life is short)."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, int, int], SnapshotRow] = {}
        self._prefixes: dict[str, tuple[str | None, str]] = {}
        self._inputs: dict[tuple[str, int], TurnInputs] = {}
        self._lock = threading.Lock()

    def put_inputs(self, inputs: TurnInputs) -> None:
        with self._lock:
            self._inputs[inputs.key] = inputs

    def get_inputs(self, session_id: str, turn_index: int) -> TurnInputs | None:
        with self._lock:
            return self._inputs.get((session_id, turn_index))

    def list_inputs(self, session_id: str | None = None) -> builtins.list[TurnInputs]:
        with self._lock:
            return [v for k, v in sorted(self._inputs.items()) if session_id is None or k[0] == session_id]

    def register_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        with self._lock:
            known = self._prefixes.get(sha256)
            if known is None or (known[0] is None and text is not None):
                self._prefixes[sha256] = (text, sections_json)

    def put(self, row: SnapshotRow) -> None:
        with self._lock:
            self._rows[row.key] = row

    def flush(self) -> None:
        pass

    def prefix_text(self, sha256: str) -> str | None:
        with self._lock:
            known = self._prefixes.get(sha256)
        return None if known is None else known[0]

    def count(self, session_id: str | None = None) -> int:
        with self._lock:
            return sum(1 for k in self._rows if session_id is None or k[0] == session_id)

    def list(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> builtins.list[PromptSnapshot]:
        with self._lock:
            rows = [r for k, r in sorted(self._rows.items()) if session_id is None or k[0] == session_id]
        if limit is not None:
            rows = sorted(rows, key=lambda r: r.created_at)[-limit:]
            rows.sort(key=lambda r: r.key)
        return [decode_snapshot(r) for r in rows]

    def get(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None:
        with self._lock:
            row = self._rows.get((session_id, turn_index, call_index))
        return None if row is None else decode_snapshot(row)

    def sessions(self) -> builtins.list[tuple[str, int, float]]:
        with self._lock:
            rows = list(self._rows.values())
        out: dict[str, tuple[int, float]] = {}
        for r in rows:
            n, t = out.get(r.session_id, (0, 0.0))
            out[r.session_id] = (n + 1, max(t, r.created_at))
        return sorted(((s, n, t) for s, (n, t) in out.items()), key=lambda x: -x[2])

    def prune(self, now: float | None = None) -> int:
        return 0

    # Async forms (records.aio): list operations under a lock held for microseconds, run in place.

    async def aregister_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        self.register_prefix(sha256, text, sections_json)

    async def aput(self, row: SnapshotRow) -> None:
        self.put(row)

    async def aflush(self) -> None:
        self.flush()

    async def aget(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None:
        return self.get(session_id, turn_index, call_index)

    async def alist(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> builtins.list[PromptSnapshot]:
        return self.list(session_id, limit=limit)

    async def aput_inputs(self, inputs: TurnInputs) -> None:
        self.put_inputs(inputs)

    async def aget_inputs(self, session_id: str, turn_index: int) -> TurnInputs | None:
        return self.get_inputs(session_id, turn_index)
