"""An in-memory backend: every record protocol in dicts and lists, for tests and for plugin
authors who want a backend that is not SQLite.

``InMemoryKnowledgeStore`` is a correct, deliberately small second implementation of the
memory protocol (the store kit passes on it, which shows the kit tests the contract, not
SQLite); ``InMemoryBackend`` adds the session summaries, the injection log and the snapshots.
Search is word overlap: enough to tell relevant from not, not a ranking anyone should ship.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import attrs

from contextplane.errors import StoreError, ValidationError
from contextplane.memory.model import (
    SUPERSEDED_PREFIX,
    MemoryChunk,
    parse_timestamp,
    utc_now,
    validate_delivery_policy,
    validate_memory_kind,
    validate_namespace,
    validate_review_state,
    validate_text,
)
from contextplane.memory.stamps import creation_stamps
from contextplane.records.backend import register_backend
from contextplane.records.injections import InjectionRow
from contextplane.records.snapshots import PromptSnapshot, SnapshotRow, decode_snapshot
from contextplane.records.summaries import SessionSummary, validate_summary
from contextplane.store.protocol import SearchHit

_WORD = re.compile(r"\w+")
_FIELDS = (
    "content",
    "domain",
    "source_type",
    "memory_kind",
    "delivery_policy",
    "review_state",
    "namespace",
    "heading",
    "source",
    "subject",
    "epoch",
    "expires_at",
    "expires_in_days",
)
_INHERITED = ("domain", "memory_kind", "delivery_policy", "namespace", "heading", "subject", "epoch")


class InMemoryKnowledgeStore:
    """A dict of ``MemoryChunk`` values under one lock; search is word overlap."""

    def __init__(self) -> None:
        self._rows: dict[str, MemoryChunk] = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        #: The backend this store belongs to; set by the backend that wraps it.
        self.backend: Any = None

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[InMemoryKnowledgeStore]:
        """A view over a copy of the rows taken now: later commits are invisible to it."""
        with self._lock:
            rows = dict(self._rows)
        yield _FrozenView(self, rows)

    # ------------------------------------------------------------------ writes

    def _make(self, row: Mapping[str, Any], now: datetime) -> MemoryChunk:
        unknown = set(row) - set(_FIELDS)
        if unknown:
            raise ValidationError(f"{sorted(unknown)[0]}: not a memory attribute")
        content = validate_text(row.get("content"), "content", allow_empty=False)
        domain = validate_text(row.get("domain", "general"), "domain")
        source_type = validate_text(row.get("source_type", ""), "source_type")
        stamp = creation_stamps(
            domain=domain,
            source_type=source_type,
            memory_kind=row.get("memory_kind"),
            delivery_policy=row.get("delivery_policy"),
            review_state=row.get("review_state"),
            expires_at=row.get("expires_at"),
            expires_in_days=row.get("expires_in_days"),
            now=now,
        )
        return MemoryChunk(
            id=str(next(self._ids)),
            content=content,
            created_at=now,
            updated_at=now,
            domain=domain,
            source_type=source_type,
            memory_kind=stamp.memory_kind,
            delivery_policy=stamp.delivery_policy,
            review_state=stamp.review_state,
            namespace=validate_namespace(row.get("namespace", "")),
            heading=validate_text(row.get("heading", ""), "heading"),
            source=validate_text(row.get("source", ""), "source"),
            subject=validate_text(row.get("subject", ""), "subject"),
            epoch=validate_text(row.get("epoch", ""), "epoch"),
            expires_at=stamp.expires_at,
        )

    def add_chunk(self, content: str, domain: str = "general", source_type: str = "", **kw: Any) -> str:
        return self.add_chunks([{"content": content, "domain": domain, "source_type": source_type, **kw}])[0]

    def add_chunks(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        now = utc_now()
        with self._lock:
            made = [self._make(row, now) for row in rows]
            for chunk in made:
                self._rows[chunk.id] = chunk
        return [c.id for c in made]

    def _require(self, chunk_id: str) -> MemoryChunk:
        found = self._rows.get(chunk_id)
        if found is None:
            raise StoreError(f"no memory with id {chunk_id!r}")
        return found

    def _update(self, chunk_id: str, **changes: Any) -> MemoryChunk:
        with self._lock:
            chunk = attrs.evolve(self._require(chunk_id), updated_at=utc_now(), **changes)
            self._rows[chunk_id] = chunk
            return chunk

    def set_review_state(self, chunk_id: str, state: str) -> MemoryChunk:
        return self._update(chunk_id, review_state=validate_review_state(state))

    def set_expires_at(self, chunk_id: str, expires_at: datetime | str | None) -> MemoryChunk:
        value = None if expires_at is None else parse_timestamp(expires_at, "expires_at")
        return self._update(chunk_id, expires_at=value)

    def invalidate_chunk(
        self, chunk_id: str, *, superseded_by: str | None = None, reason: str | None = None
    ) -> MemoryChunk:
        with self._lock:
            if self._require(chunk_id).invalidated_at is not None:
                raise StoreError(f"memory {chunk_id} is already invalidated")
            text = (
                f"{SUPERSEDED_PREFIX}{superseded_by}"
                if superseded_by is not None
                else reason or "invalidated"
            )
            return self._update(chunk_id, invalidated_at=utc_now(), invalidation_reason=text)

    def supersede(self, old_id: str, content: str, **attrs_: Any) -> str:
        with self._lock:
            old = self._require(old_id)
            row = {name: getattr(old, name) for name in _INHERITED}
            row.update(attrs_, content=content)
            new_id = self.add_chunks([row])[0]  # insert first: a bad row leaves the old one alone
            self.invalidate_chunk(old_id, superseded_by=new_id)
            return new_id

    def purge(self, now: datetime | None = None) -> int:
        with self._lock:
            doomed = [
                c.id
                for c in self._rows.values()
                if (c.is_expired(now) or c.invalidated_at is not None) and not c.is_superseded
            ]
            for chunk_id in doomed:
                del self._rows[chunk_id]
            return len(doomed)

    # ------------------------------------------------------------------ reads

    def get(self, chunk_id: str) -> MemoryChunk | None:
        return self._rows.get(chunk_id) if isinstance(chunk_id, str) else None

    def _deliverable(self, c: MemoryChunk, now: datetime | None, include_superseded: bool = False) -> bool:
        if include_superseded and c.is_superseded:
            return c.review_state != "rejected" and not c.is_expired(now)
        return c.is_deliverable(now)

    def list_chunks(
        self,
        *,
        deliverable: bool = False,
        memory_kind: str | None = None,
        review_state: str | None = None,
        delivery_policy: str | None = None,
        namespace: str | None = None,
        namespaces: Sequence[str] | None = None,
        limit: int | None = None,
        now: datetime | None = None,
    ) -> list[MemoryChunk]:
        kind = validate_memory_kind(memory_kind) if memory_kind is not None else None
        review = validate_review_state(review_state) if review_state is not None else None
        policy = validate_delivery_policy(delivery_policy) if delivery_policy is not None else None
        with self._lock:
            rows = sorted(self._rows.values(), key=lambda c: int(c.id))
        out = [
            c
            for c in rows
            if (kind is None or c.memory_kind == kind)
            and (review is None or c.review_state == review)
            and (policy is None or c.effective_delivery_policy == policy)
            and (namespace is None or c.namespace == namespace)
            and (namespaces is None or c.namespace in namespaces)
            and (not deliverable or self._deliverable(c, now))
        ]
        return out if limit is None else out[:limit]

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        deliverable: bool = True,
        namespaces: Sequence[str] | None = None,
        include_superseded: bool = False,
        now: datetime | None = None,
    ) -> list[SearchHit]:
        words = {w.lower() for w in _WORD.findall(validate_text(query, "query", storable=False))}
        if not words:
            return []
        scored = []
        with self._lock:
            rows = list(self._rows.values())
        for c in rows:
            if namespaces is not None and c.namespace not in namespaces:
                continue
            if deliverable and not self._deliverable(c, now, include_superseded):
                continue
            overlap = len(words & {w.lower() for w in _WORD.findall(c.content + " " + c.heading)})
            if overlap:
                scored.append((overlap, c))
        scored.sort(key=lambda pair: (-pair[0], int(pair[1].id)))
        return [SearchHit(c, float(s), r) for r, (s, c) in enumerate(scored[:k], start=1)]

    # ------------------------------------------------------------------ async (AsyncKnowledgeStore)
    # Dict operations under a lock held for microseconds: nothing here can block a loop, so the
    # async forms run the synchronous ones in place (a store over a network awaits its client).

    async def asearch(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        return self.search(query, k, **options)

    async def alist_chunks(self, **filters: Any) -> list[MemoryChunk]:
        return self.list_chunks(**filters)

    async def aadd_chunk(self, content: str, *args: Any, **attrs_: Any) -> str:
        return self.add_chunk(content, *args, **attrs_)

    async def asupersede(self, old_id: str, content: str, **attrs_: Any) -> str:
        return self.supersede(old_id, content, **attrs_)

    async def aset_review_state(self, chunk_id: str, state: str) -> MemoryChunk:
        return self.set_review_state(chunk_id, state)

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _FrozenView(InMemoryKnowledgeStore):
    """Reads see the copy taken when the view opened; writes go to the live store."""

    def __init__(self, origin: InMemoryKnowledgeStore, rows: dict[str, MemoryChunk]) -> None:
        super().__init__()
        self._origin = origin
        self._rows = rows
        self.backend = origin.backend

    def add_chunks(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        return self._origin.add_chunks(rows)

    def set_review_state(self, chunk_id: str, state: str) -> MemoryChunk:
        return self._origin.set_review_state(chunk_id, state)

    def set_expires_at(self, chunk_id: str, expires_at: datetime | str | None) -> MemoryChunk:
        return self._origin.set_expires_at(chunk_id, expires_at)

    def invalidate_chunk(
        self, chunk_id: str, *, superseded_by: str | None = None, reason: str | None = None
    ) -> MemoryChunk:
        return self._origin.invalidate_chunk(chunk_id, superseded_by=superseded_by, reason=reason)

    def supersede(self, old_id: str, content: str, **attrs_: Any) -> str:
        return self._origin.supersede(old_id, content, **attrs_)

    def purge(self, now: datetime | None = None) -> int:
        return self._origin.purge(now)


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
                at or utc_now().isoformat(timespec="seconds"),
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


class InMemorySnapshotStore:
    """``SnapshotStore`` in dicts; no retention (a test's life is short)."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, int, int], SnapshotRow] = {}
        self._prefixes: dict[str, tuple[str | None, str]] = {}
        self._lock = threading.Lock()

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


class InMemoryBackend:
    """Every record protocol in memory; ``trajectory`` is an optional ``TrajectoryWriter``.

    Any part may be given instead (a test's fake memory store, a real summaries table): the
    backend is then the bundle that routes a turn's records, which is all composition needs."""

    def __init__(
        self,
        memories: Any = None,
        trajectory: Any = None,
        *,
        summaries: Any = None,
        injections: Any = None,
        snapshots: Any = None,
    ) -> None:
        self._memories = memories if memories is not None else InMemoryKnowledgeStore()
        self._summaries = summaries if summaries is not None else InMemorySessionSummaries()
        self._injections = injections if injections is not None else InMemoryInjectionLog()
        self._snapshots = snapshots if snapshots is not None else InMemorySnapshotStore()
        self._trajectory = trajectory
        register_backend(self)

    @property
    def name(self) -> str:
        return f"memory:{id(self):x}"

    @property
    def memories(self) -> Any:
        return self._memories

    @property
    def summaries(self) -> Any:
        return self._summaries

    @property
    def injections(self) -> Any:
        return self._injections

    @property
    def snapshots(self) -> Any:
        return self._snapshots

    @property
    def trajectory(self) -> Any:
        return self._trajectory

    def close(self) -> None:
        if self._trajectory is not None:
            self._trajectory.close()
