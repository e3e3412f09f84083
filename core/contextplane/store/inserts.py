"""Inserting rows: a write's rows validated and stamped (ADR D7) into insert order by the write
spec (``write_spec``), inserted in one statement with their vectors at one history position,
and the history's seams every write path appends its events through.

Every write path goes through ``_prepare``: a row is checked against the write spec, its text
validated and its creation stamps (kind, delivery policy, review state, expiry) decided once,
before the write lock is taken, and laid out in ``INSERT_COLUMNS`` order. Bulk rows usually
share their attributes, so the stamps are memoised per attribute tuple within a batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import apsw

from contextplane.errors import StoreError
from contextplane.memory.consolidation import (
    content_hash,
)
from contextplane.memory.model import (
    format_timestamp,
    parse_occurred_at,
    validate_namespace,
    validate_text,
)
from contextplane.store import history, migrate, vector_index, write_spec
from contextplane.store.columns import (
    ATTRIBUTE_FIELDS,
    BULK_INSERT_SQL,
    INSERT_COLUMNS,
    INSERT_SQL,
    STAGE_SQL,
    STAGING_SQL,
    UNSTAGE_SQL,
)
from contextplane.store.vector_upkeep import VectorUpkeep

#: Where each column sits in a prepared row (``INSERT_COLUMNS`` order).
_AT: Final[dict[str, int]] = {c.name: i for i, c in enumerate(INSERT_COLUMNS)}
_AT_HASH: Final[int] = _AT["content_hash"]
_AT_NAMESPACE: Final[int] = _AT["namespace"]
_AT_SOURCE_TYPE: Final[int] = _AT["source_type"]
_AT_REVIEW: Final[int] = _AT["review_state"]
_AT_SUBJECT: Final[int] = _AT["subject"]
_AT_EXPIRES: Final[int] = _AT["expires_at"]
_AT_OCCURRED: Final[int] = _AT["occurred_at"]


class StoreInserts(VectorUpkeep):
    """Preparing and inserting rows, and the history seams (see ``writes``, which consolidates)."""

    # The history seams: every write path appends its events through these, in its own write
    # transaction (``store.history``). bench/history_bench.py replaces them to measure the
    # history's cost, so each does exactly the history's part and nothing else.

    def _log_created(self, conn: apsw.Connection, ids: range, at: str) -> int | None:
        """The position of a write batch, logged before its rows are inserted with it."""
        return history.log_created(conn, ids, at)

    def _record_created(self, conn: apsw.Connection, details: dict[int, str]) -> None:
        """What consolidation said about created rows (id -> JSON detail)."""
        if details:
            history.record_created(conn, details)

    def _change(
        self,
        conn: apsw.Connection,
        chunk_id: int,
        sets: str,
        params: Sequence[Any],
        event: str,
        actor: str,
        at: str,
        *,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """One change to one row (``UPDATE chunks SET {sets}``) with its event; a row that is not
        there raises, so the write transaction rolls back with nothing changed."""
        if not history.change(conn, chunk_id, sets, params, event, actor, at, detail=detail):
            raise StoreError(f"{self.path}: no memory with id {str(chunk_id)!r}")

    def _record_purged(self, conn: apsw.Connection, where: str, params: Mapping[str, Any], at: str) -> None:
        """The ``purged`` events of the rows a purge is about to delete."""
        history.record_purged(conn, where, params, at)

    def _insert(
        self,
        conn: apsw.Connection,
        prepared: list[tuple[Any, ...]],
        vectors: list[bytes] | None,
    ) -> range:
        """Insert prepared rows (caller holds the write transaction) and their vectors, at one
        history position (their ``created`` events)."""
        # AUTOINCREMENT under our write lock hands out max(seq, max id) + 1, +2, ... in order.
        first = 1 + int(
            migrate.scalar(
                conn,
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunks'), 0), "
                "coalesce((SELECT max(id) FROM chunks), 0))",
            )
        )
        at = str(prepared[0][_AT["created_at"]])
        seq = self._log_created(conn, range(first, first + len(prepared)), at)
        if len(prepared) > 1:  # one statement for the batch (see ``columns.STAGE_SQL``)
            conn.execute(STAGING_SQL)
            conn.executemany(STAGE_SQL, prepared)
            conn.execute(BULK_INSERT_SQL, (seq,))
            conn.execute(UNSTAGE_SQL)
        else:
            conn.execute(INSERT_SQL, (*prepared[0], seq))
        last = int(conn.last_insert_rowid())
        if last - first + 1 != len(prepared):
            raise StoreError(
                f"{self.path}: inserted ids are not contiguous ({first}..{last}); nothing stored"
            )
        ids = range(first, last + 1)
        if vectors is not None:
            assert self._embedder is not None
            vector_index.require_space(conn, self.path, self._embedder)  # one lookup; never a mix
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
        write_spec.check_fields(row, index)
        content = validate_text(row["content"], "content", allow_empty=False)
        occurred = parse_occurred_at(row.get("occurred_at"))
        key = tuple(map(row.get, ATTRIBUTE_FIELDS))
        try:
            tail = cache.get(key) if cache is not None else None
        except TypeError:  # an unhashable value: validation below will name it
            tail, cache = None, None
        if tail is None:
            tail = self._stamp_tail(row, now, now_text)
            if cache is not None:
                cache[key] = tail
        event = None if occurred is None else format_timestamp(occurred)
        return (content, *tail, event, content_hash(content))

    @staticmethod
    def _stamp_tail(row: Mapping[str, Any], now: datetime, now_text: str) -> tuple[Any, ...]:
        """Everything after the content, in ``INSERT_COLUMNS`` order."""
        domain, source_type, stamp = write_spec.stamped(row, now)
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
            if column.on_add in ("event", "derived"):
                continue  # per row, in ``_prepare``
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
