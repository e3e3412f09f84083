"""A row's life after it is written (ADR D7): review, expiry, invalidation, supersession, purge.

Rows are never edited in place and never deleted while they explain something: a rejected,
expired or invalidated row stays for audit until ``purge``, and a superseded row (and the row
that superseded it) stays for good, so the chain can always be read back. Every change appends
its history event (``store.history``) in the change's own transaction; ``by`` names who made it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import apsw

from contextplane.embedding import refused_write
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.model import (
    SUPERSEDED_PREFIX,
    MemoryChunk,
    format_timestamp,
    parse_timestamp,
    utc_now,
    validate_review_state,
    validate_text,
)
from contextplane.store.columns import SELECT_COLUMNS, as_id, chunk_from_row, superseding_row
from contextplane.store.lifecycle_spec import ChunkLifecycle
from contextplane.store.writes import StoreWrites


class StoreLifecycle(StoreWrites, ChunkLifecycle):
    """Review, expiry, invalidation, supersession and purge."""

    def set_review_state(self, chunk_id: str, state: str, *, by: str = "") -> MemoryChunk:
        """Confirm, reject or reset a row to pending (D7 step 2); ``by`` says who did (kept in
        the history)."""
        checked = validate_review_state(state)
        actor = validate_text(by, "by")
        stamp = format_timestamp(utc_now())
        with self._writing() as conn:  # an unknown id changes nothing; ``_changed`` says so
            sets = "review_state = ?, updated_at = ?"
            return self._changed(conn, chunk_id, sets, (checked, stamp), "review", actor, stamp)

    def set_expires_at(
        self, chunk_id: str, expires_at: datetime | str | None, *, by: str = ""
    ) -> MemoryChunk:
        """Set (or clear, with ``None``) a row's expiry; stored as UTC."""
        value = None if expires_at is None else format_timestamp(parse_timestamp(expires_at, "expires_at"))
        actor = validate_text(by, "by")
        stamp = format_timestamp(utc_now())
        with self._writing() as conn:  # an unknown id changes nothing; ``_changed`` says so
            sets = "expires_at = ?, updated_at = ?"
            return self._changed(conn, chunk_id, sets, (value, stamp), "expiry", actor, stamp)

    def _invalidate_chunk(
        self, chunk_id: str, superseded_by: str | None, reason: str | None, by: str
    ) -> MemoryChunk:
        """``invalidate_chunk`` (``ChunkLifecycle``), in one write transaction."""
        actor = validate_text(by, "by")
        with self._writing() as conn:
            return self._invalidate(conn, chunk_id, superseded_by=superseded_by, reason=reason, actor=actor)

    def _invalidate(
        self,
        conn: apsw.Connection,
        chunk_id: str,
        *,
        superseded_by: str | None,
        reason: str | None,
        actor: str = "",
    ) -> MemoryChunk:
        if superseded_by is not None and reason is not None:
            raise ValidationError("reason: give either superseded_by or reason, not both")
        current = self._require(conn, chunk_id)
        if current.invalidated_at is not None:
            raise StoreError(
                f"{self.path}: memory {chunk_id} is already invalidated ({current.invalidation_reason}); "
                + (f"supersede {current.superseded_by} instead" if current.superseded_by else "nothing to do")
            )
        if superseded_by is not None:
            successor = self._require(conn, superseded_by)
            if successor.id == current.id:
                raise ValidationError("superseded_by: a memory cannot supersede itself")
            text = f"{SUPERSEDED_PREFIX}{successor.id}"
        else:
            text = validate_text(reason if reason is not None else "invalidated", "reason", allow_empty=False)
            if text.startswith(SUPERSEDED_PREFIX):
                raise ValidationError("reason: use superseded_by=<id> to record a supersession")
        stamp = format_timestamp(utc_now())
        event = "superseded" if superseded_by is not None else "invalidated"
        detail = {"by": text[len(SUPERSEDED_PREFIX) :]} if superseded_by is not None else None
        sets = "invalidated_at = ?, invalidation_reason = ?, updated_at = ?"
        return self._changed(conn, chunk_id, sets, (stamp, text, stamp), event, actor, stamp, detail=detail)

    def _changed(
        self,
        conn: apsw.Connection,
        chunk_id: str,
        sets: str,
        params: tuple[Any, ...],
        event: str,
        actor: str,
        at: str,
        *,
        detail: Mapping[str, Any] | None = None,
    ) -> MemoryChunk:
        """One change to one row (inside its transaction), with its event, and the row as it
        now is; an id that names no row raises (rolling the transaction back)."""
        key = as_id(chunk_id)
        if key is None:
            raise StoreError(f"{self.path}: no memory with id {chunk_id!r}")
        self._change(conn, key, sets, params, event, actor, at, detail=detail)
        for cells in conn.execute(f"SELECT {SELECT_COLUMNS} FROM chunks AS c WHERE c.id = ?", (key,)):
            return chunk_from_row(cells)
        raise StoreError(f"{self.path}: no memory with id {chunk_id!r}")

    def supersede(self, old_id: str, content: str, **attrs: Any) -> str:
        """Write the newer row, then invalidate the old one with ``superseded_by:<new id>``, in one
        transaction, insert first: if the insert fails the old row is untouched and still valid.
        Scope, domain, kind, delivery policy, heading, subject, epoch and event time
        (``occurred_at``) are inherited unless given; provenance and review state are not (they
        describe the new write)."""
        old, prepared, actor = self._superseding(old_id, content, attrs)
        with refused_write():
            vectors = self._embed([prepared[0][0]]) if self._embedder is not None else None
        return self._write_superseding(old, prepared, vectors, actor)

    def _superseding(
        self, old_id: str, content: str, attrs: Mapping[str, Any]
    ) -> tuple[MemoryChunk, list[tuple[Any, ...]], str]:
        """The row to supersede and the newer row, checked, before anything is embedded (so the
        async form can embed between the two halves, on the loop)."""
        with self._lock:
            old = self._require(self.conn, old_id)
        if old.invalidated_at is not None:
            hint = f"supersede {old.superseded_by} instead" if old.superseded_by else "it is not valid"
            raise StoreError(f"{self.path}: memory {old_id} is already invalidated; {hint}")
        row = superseding_row(old, attrs, content)
        now = utc_now()
        return old, [self._prepare(row, now, format_timestamp(now), 0)], str(row.get("source_type", ""))

    def _write_superseding(
        self, old: MemoryChunk, prepared: list[tuple[Any, ...]], vectors: list[bytes] | None, actor: str
    ) -> str:
        with self._writing() as conn:
            ids = self._insert(conn, prepared, vectors)
            new_id = str(ids[0])
            self._record_created(conn, {ids[0]: json.dumps({"supersedes": old.id})})
            # raises (rolling the insert back) if someone invalidated the old row meanwhile
            self._invalidate(conn, old.id, superseded_by=new_id, reason=None, actor=actor)
        self._maybe_train()
        return new_id

    def purge(self, now: datetime | None = None, *, ids: Sequence[str] | None = None) -> int:
        """Delete expired rows and rows invalidated for a reason other than supersession; return
        how many. Never deletes a superseded row, nor a row that superseded another (the chain
        stays readable). ``ids``: only those of them (``contextplane memory purge ID``)."""
        now_text = format_timestamp(now or utc_now())
        where = f"""((expires_at IS NOT NULL AND expires_at <= :now)
                     OR (invalidated_at IS NOT NULL
                         AND substr(coalesce(invalidation_reason, ''), 1, 14) != '{SUPERSEDED_PREFIX}'))
                    AND NOT (invalidated_at IS NOT NULL
                             AND substr(coalesce(invalidation_reason, ''), 1, 14) = '{SUPERSEDED_PREFIX}')
                    AND CAST(id AS TEXT) NOT IN (
                        SELECT substr(invalidation_reason, 15) FROM chunks
                        WHERE substr(invalidation_reason, 1, 14) = '{SUPERSEDED_PREFIX}')"""
        if ids is not None:
            keys = [key for key in (as_id(i) for i in ids) if key is not None]
            where = f"({where}) AND id IN ({', '.join(str(int(k)) for k in keys) or 'NULL'})"
        with self._writing() as conn:
            self._record_purged(conn, where, {"now": now_text}, format_timestamp(utc_now()))
            conn.execute(f"DELETE FROM chunks WHERE {where}", {"now": now_text})
            return int(conn.changes())
