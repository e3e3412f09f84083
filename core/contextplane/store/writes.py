"""Writes: validating a row, stamping it (ADR D7), and inserting it with its vector.

Every write path goes through ``_prepare``: a row is checked against ``ADD_FIELDS``, its text
validated and its creation stamps (kind, delivery policy, review state, expiry) decided once,
before the write lock is taken, and laid out in ``INSERT_COLUMNS`` order. Bulk rows usually
share their attributes, so the stamps are memoised per attribute tuple within a batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import apsw

from contextplane.errors import StoreError, ValidationError
from contextplane.memory.model import format_timestamp, utc_now, validate_namespace, validate_text
from contextplane.memory.stamps import creation_stamps
from contextplane.store import migrate, vector_index
from contextplane.store.columns import (
    ADD_FIELDS,
    ATTRIBUTE_FIELDS,
    BULK_INSERT_SQL,
    INSERT_COLUMNS,
    INSERT_SQL,
)
from contextplane.store.vector_upkeep import VectorUpkeep


class StoreWrites(VectorUpkeep):
    """Adding rows: one or a batch, all or none."""

    def add_chunk(
        self,
        content: str,
        domain: str = "general",
        source_type: str = "",
        *,
        memory_kind: str | None = None,
        delivery_policy: str | None = None,
        review_state: str | None = None,
        namespace: str = "",
        heading: str = "",
        source: str = "",
        subject: str = "",
        epoch: str = "",
        expires_at: datetime | str | None = None,
        expires_in_days: int | None = None,
    ) -> str:
        """Store one row stamped per D7 (kind, delivery policy, review state, expiry); return its id.
        ``domain`` and ``source_type`` may be positional, as old-style callers pass them."""
        row = {
            "content": content,
            "domain": domain,
            "source_type": source_type,
            "memory_kind": memory_kind,
            "delivery_policy": delivery_policy,
            "review_state": review_state,
            "namespace": namespace,
            "heading": heading,
            "source": source,
            "subject": subject,
            "epoch": epoch,
            "expires_at": expires_at,
            "expires_in_days": expires_in_days,
        }
        return self.add_chunks([row])[0]

    def add_chunks(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """Bulk insert in one transaction (all rows or none). Each mapping holds ``add_chunk``
        keywords. Rows are validated and embedded before the write lock is taken."""
        now = utc_now()
        now_text = format_timestamp(now)
        cache: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        prepared = [self._prepare(row, now, now_text, index, cache) for index, row in enumerate(rows)]
        if not prepared:
            return []
        vectors = self._embed([p[0] for p in prepared]) if self._embedder is not None else None
        with self._writing() as conn:
            ids = self._insert(conn, prepared, vectors)
        self._maybe_train()
        with self._lock:
            migrate.maybe_analyze(self.conn)  # the planner's statistics, when the table doubled
        return [str(i) for i in ids]

    def _insert(
        self, conn: apsw.Connection, prepared: list[tuple[Any, ...]], vectors: list[bytes] | None
    ) -> range:
        """Insert prepared rows (caller holds the write transaction) and their vectors."""
        # AUTOINCREMENT under our write lock hands out max(seq, max id) + 1, +2, ... in order.
        first = 1 + int(
            migrate.scalar(
                conn,
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunks'), 0), "
                "coalesce((SELECT max(id) FROM chunks), 0))",
            )
        )
        payload = json.dumps(prepared, ensure_ascii=False) if len(prepared) > 1 else ""
        if payload and "\\u0000" not in payload:
            # One statement for the whole batch: FTS5 flushes its pending index at every statement
            # boundary, so per-row statements (executemany) index about 3x slower.
            conn.execute(BULK_INSERT_SQL, (payload,))
        else:  # one row, or text holding NUL (which JSON text cannot carry through ->> intact)
            conn.executemany(INSERT_SQL, prepared)
        last = int(conn.last_insert_rowid())
        if last - first + 1 != len(prepared):
            raise StoreError(
                f"{self.path}: inserted ids are not contiguous ({first}..{last}); nothing stored"
            )
        ids = range(first, last + 1)
        if vectors is not None:
            vector_index.add_vectors(conn, zip(ids, vectors, strict=True))
        return ids

    def _prepare(
        self,
        row: Mapping[str, Any],
        now: datetime,
        now_text: str,
        index: int,
        cache: dict[tuple[Any, ...], tuple[Any, ...]] | None = None,
    ) -> tuple[Any, ...]:
        """Validate and stamp one row into insert order. ``cache`` memoises everything but the
        content per distinct attribute tuple: bulk rows usually share their attributes, and the
        stamps depend only on those attributes and ``now`` (fixed for the batch)."""
        if not row.keys() <= ADD_FIELDS:
            unknown = sorted(set(row) - ADD_FIELDS)
            raise ValidationError(
                f"{unknown[0]}: not a memory attribute (row {index}); known: {', '.join(sorted(ADD_FIELDS))}"
            )
        if "content" not in row:
            raise ValidationError(f"content: missing (row {index})")
        content = validate_text(row["content"], "content", allow_empty=False)
        key = tuple(row.get(name) for name in ATTRIBUTE_FIELDS)
        try:
            tail = cache.get(key) if cache is not None else None
        except TypeError:  # an unhashable value: validation below will name it
            tail, cache = None, None
        if tail is None:
            tail = self._stamp_tail(row, now, now_text)
            if cache is not None:
                cache[key] = tail
        return (content, *tail)

    @staticmethod
    def _stamp_tail(row: Mapping[str, Any], now: datetime, now_text: str) -> tuple[Any, ...]:
        """Everything after the content, in ``INSERT_COLUMNS`` order."""
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
        stamped: dict[str, Any] = {
            "domain": domain,
            "source_type": source_type,
            "memory_kind": stamp.memory_kind,
            "delivery_policy": stamp.delivery_policy,
            "review_state": stamp.review_state,
            "expires_at": None if stamp.expires_at is None else format_timestamp(stamp.expires_at),
        }
        tail: list[Any] = []
        for column in INSERT_COLUMNS[1:]:
            name = column.name
            if name in stamped:
                tail.append(stamped[name])
            elif column.on_add == "text":
                tail.append(validate_text(row.get(name, column.default), name))
            elif column.on_add == "namespace":
                tail.append(validate_namespace(row.get(name, "")))
            elif column.on_add == "now":
                tail.append(now_text)
            else:  # a new kind of column must say how it is written
                raise AssertionError(f"column {name!r}: no rule for on_add={column.on_add!r}")
        return tuple(tail)
