"""In-memory knowledge stores written for the store kit's own tests.

``InMemoryKnowledgeStore`` is a correct, deliberately small second implementation of the
protocol: passing the kit on it shows the kit tests the contract, not SQLite. The two
subclasses are the deliberate faults the issue names; each overrides one method the way a
plausible bug would, so the kit must fail on them with the right requirement ids.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
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
        words = {w.lower() for w in _WORD.findall(validate_text(query, "query"))}
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

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class IgnoresExpiryStore(InMemoryKnowledgeStore):
    """Fault: the deliverable filter forgets ``expires_at`` (rejected and invalidated still work)."""

    def _deliverable(self, c: MemoryChunk, now: datetime | None, include_superseded: bool = False) -> bool:
        if include_superseded and c.is_superseded:
            return c.review_state != "rejected"
        return c.review_state != "rejected" and c.invalidated_at is None


class DeletesOnSupersedeStore(InMemoryKnowledgeStore):
    """Fault: supersession deletes the old row instead of invalidating it (no audit trail)."""

    def supersede(self, old_id: str, content: str, **attrs_: Any) -> str:
        with self._lock:
            old = self._require(old_id)
            row = {name: getattr(old, name) for name in _INHERITED}
            row.update(attrs_, content=content)
            new_id = self.add_chunks([row])[0]
            del self._rows[old_id]
            return new_id
