"""Writes: validating a row, stamping it (ADR D7), consolidating it, and inserting it with its
vector and its ``created`` event (all in one transaction).

Every write path goes through ``_prepare``: a row is checked against ``ADD_FIELDS``, its text
validated and its creation stamps (kind, delivery policy, review state, expiry) decided once,
before the write lock is taken, and laid out in ``INSERT_COLUMNS`` order. Bulk rows usually
share their attributes, so the stamps are memoised per attribute tuple within a batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import apsw

from contextplane.errors import StoreError, ValidationError
from contextplane.memory.consolidation import (
    NEAR_DUPLICATE_CANDIDATES,
    Consolidation,
    Outcome,
    WriteOutcome,
    candidate_terms,
    content_hash,
    near_duplicates,
    normalise_content,
)
from contextplane.memory.model import (
    SUPERSEDED_PREFIX,
    format_timestamp,
    utc_now,
    validate_namespace,
    validate_text,
)
from contextplane.memory.stamps import creation_stamps
from contextplane.store import history, migrate, vector_index
from contextplane.store.columns import (
    ADD_FIELDS,
    ATTRIBUTE_FIELDS,
    BULK_INSERT_SQL,
    INSERT_COLUMNS,
    INSERT_SQL,
)
from contextplane.store.fts_query import to_match_expression
from contextplane.store.vector_upkeep import VectorUpkeep

#: Where each column sits in a prepared row (``INSERT_COLUMNS`` order).
_AT: Final[dict[str, int]] = {c.name: i for i, c in enumerate(INSERT_COLUMNS)}
#: The D6 filter on ``chunks AS c`` at the write's time (the one parameter).
_DELIVERABLE: Final[str] = (
    "(c.review_state IS NULL OR c.review_state != 'rejected') "
    "AND (c.expires_at IS NULL OR c.expires_at > ?) AND c.invalidated_at IS NULL"
)


def _deliverable_when_written(row: tuple[Any, ...], now_text: str) -> bool:
    expires = row[_AT["expires_at"]]
    return row[_AT["review_state"]] != "rejected" and (expires is None or expires > now_text)


def _dedupe_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """What makes two writes the same memory: content key, scope, provenance, the text."""
    return (
        row[_AT["content_hash"]],
        row[_AT["namespace"]],
        row[_AT["source_type"]],
        normalise_content(str(row[0])),
    )


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
    ) -> WriteOutcome:
        """Store one row stamped per D7 (kind, delivery policy, review state, expiry), consolidated
        per ``memory.consolidation``; return its id as a ``WriteOutcome`` (a ``str`` that also
        says whether it was stored, a duplicate, superseded rows or has near duplicates).
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
        return self._write([row], single=True)[0]

    def add_chunks(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """Bulk insert in one transaction (all rows or none). Each mapping holds ``add_chunk``
        keywords. Rows are validated and embedded before the write lock is taken. Exact
        duplicates and same-subject rows are consolidated as for ``add_chunk``; near duplicates
        are looked for on single writes only (a full-text search per row would make bulk
        ingest a search workload). Each returned id is a ``WriteOutcome``."""
        return list(self._write(rows, single=False))

    def _write(self, rows: Iterable[Mapping[str, Any]], *, single: bool) -> list[WriteOutcome]:
        now_text, prepared = self._prepared(rows)
        if not prepared:
            return []
        vectors = self._embed([p[0] for p in prepared]) if self._embedder is not None else None
        return self._write_prepared(prepared, vectors, now_text, single=single)

    def _prepared(self, rows: Iterable[Mapping[str, Any]]) -> tuple[str, list[tuple[Any, ...]]]:
        """The rows validated and stamped (no I/O: the async write prepares on the loop)."""
        now = utc_now()
        now_text = format_timestamp(now)
        cache: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        return now_text, [self._prepare(row, now, now_text, index, cache) for index, row in enumerate(rows)]

    def _write_prepared(
        self, prepared: list[tuple[Any, ...]], vectors: list[bytes] | None, now_text: str, *, single: bool
    ) -> list[WriteOutcome]:
        """Prepared (and embedded) rows written in one transaction, consolidated."""
        with self._writing() as conn:
            outcomes = self._consolidate(conn, prepared, vectors, now_text, single=single)
        self._maybe_train()
        with self._lock:
            migrate.maybe_analyze(self.conn)  # the planner's statistics, when the table doubled
        return outcomes

    def _consolidate(
        self,
        conn: apsw.Connection,
        prepared: list[tuple[Any, ...]],
        vectors: list[bytes] | None,
        now_text: str,
        *,
        single: bool,
    ) -> list[WriteOutcome]:
        """Decide each row's outcome (``memory.consolidation``) and write what is new, inside
        the caller's write transaction, so concurrent writers of one subject serialise on it."""
        policy = self._consolidation
        existing = self._duplicates(conn, prepared, now_text) if policy.deduplicate else {}
        first_of: dict[tuple[Any, ...], int] = {}  # a duplicate within the batch: its first row
        keep: list[int] = []
        duplicate_of: dict[int, str | int] = {}
        for index, row in enumerate(prepared):
            key = _dedupe_key(row)
            if key in existing:
                duplicate_of[index] = existing[key]
            elif key in first_of:
                duplicate_of[index] = first_of[key]
            else:
                if policy.deduplicate and _deliverable_when_written(
                    row, now_text
                ):  # only a deliverable row absorbs copies
                    first_of[key] = index
                keep.append(index)
        near: dict[int, tuple[tuple[str, float], ...]] = {}
        if single:
            for index in keep:
                near[index] = self._near_duplicates(conn, prepared[index], now_text, policy)
        new_ids: dict[int, int] = {}
        superseded: dict[int, list[str]] = {}
        if keep:
            rows = [prepared[i] for i in keep]
            kept_vectors = [vectors[i] for i in keep] if vectors is not None else None
            ids = self._insert(conn, rows, kept_vectors, record=False)
            new_ids = dict(zip(keep, ids, strict=True))
            if policy.auto_supersede:
                for index in keep:
                    if prepared[index][_AT["subject"]]:
                        superseded[index] = self._supersede_subject(conn, prepared[index], new_ids[index])
        outcomes: list[WriteOutcome] = []
        details: dict[int, str] = {}
        for index in range(len(prepared)):
            if index in duplicate_of:
                target = duplicate_of[index]
                found = str(new_ids[target]) if isinstance(target, int) else target
                outcomes.append(WriteOutcome(found, "duplicate", duplicate_of=found))
                continue
            olds = superseded.get(index, [])
            close = tuple(p for p in near.get(index, ()) if p[0] not in olds)
            outcome: Outcome = "superseded" if olds else "near_duplicate" if close else "stored"
            result = WriteOutcome(str(new_ids[index]), outcome, superseded=olds, near_duplicates=close)
            if outcome != "stored":
                details[new_ids[index]] = json.dumps(result.detail())
            outcomes.append(result)
        if keep:
            self._record_created(conn, range(min(new_ids.values()), max(new_ids.values()) + 1), details)
        for index, chunk_id in sorted(new_ids.items()):
            for old in superseded.get(index, []):
                self._record_change(
                    conn,
                    int(old),
                    "superseded",
                    str(prepared[index][_AT["source_type"]]),
                    detail={"by": str(chunk_id), "rule": "same subject, scope and kind"},
                )
        for index, target in sorted(duplicate_of.items()):
            found = str(new_ids[target]) if isinstance(target, int) else target
            self._record_change(
                conn,
                int(found),
                "consolidated",
                str(prepared[index][_AT["source_type"]]),
                at=now_text,
                detail={"outcome": "duplicate", "message": "an exact duplicate write returned this row"},
            )
        return outcomes

    def _duplicates(
        self, conn: apsw.Connection, prepared: list[tuple[Any, ...]], now_text: str
    ) -> dict[tuple[Any, ...], str]:
        """Deliverable rows with the same content key as a prepared row: dedupe key -> oldest id."""
        hashes = sorted({row[_AT["content_hash"]] for row in prepared})
        found: dict[tuple[Any, ...], str] = {}
        for chunk_id, content, namespace, source_type, key in conn.execute(
            "SELECT c.id, c.content, c.namespace, c.source_type, c.content_hash FROM chunks AS c "
            "WHERE c.content_hash IN (SELECT value FROM json_each(?)) AND " + _DELIVERABLE + " ORDER BY c.id",
            (json.dumps(hashes), now_text),
        ):
            dedupe = (key, namespace, source_type, normalise_content(str(content)))
            found.setdefault(dedupe, str(chunk_id))
        return found

    def _near_duplicates(
        self, conn: apsw.Connection, row: tuple[Any, ...], now_text: str, policy: Consolidation
    ) -> tuple[tuple[str, float], ...]:
        """Deliverable rows of the row's scope at or above the similarity threshold. Candidates:
        rows holding one of the write's prefix-filter words (``candidate_terms``), newest first,
        at most ``NEAR_DUPLICATE_CANDIDATES`` of them; no BM25 (scoring every match of common
        words would make a single write cost a search of the whole store)."""
        expression = to_match_expression(
            " ".join(candidate_terms(str(row[0]), policy.near_duplicate_threshold))
        )
        if expression is None:
            return ()
        candidates = conn.execute(
            "SELECT c.id, c.content FROM (SELECT rowid AS id FROM chunks_fts WHERE chunks_fts MATCH ? "
            f"ORDER BY rowid DESC LIMIT {NEAR_DUPLICATE_CANDIDATES * 4}) AS t "
            "JOIN chunks AS c ON c.id = t.id "
            f"WHERE c.namespace = ? AND {_DELIVERABLE} ORDER BY c.id DESC LIMIT {NEAR_DUPLICATE_CANDIDATES}",
            (expression, row[_AT["namespace"]], now_text),
        ).fetchall()
        return near_duplicates(
            str(row[0]), ((str(i), str(text)) for i, text in candidates), policy.near_duplicate_threshold
        )

    def _supersede_subject(self, conn: apsw.Connection, row: tuple[Any, ...], new_id: int) -> list[str]:
        """Invalidate every older deliverable row holding the row's subject in its scope and
        kind with ``superseded_by:<new_id>``; return their ids."""
        stamp = str(row[_AT["created_at"]])
        olds = [
            str(r[0])
            for r in conn.execute(
                "SELECT c.id FROM chunks AS c WHERE c.subject = ? AND c.namespace = ? AND c.memory_kind = ? "
                f"AND c.id < ? AND {_DELIVERABLE} ORDER BY c.id",
                (row[_AT["subject"]], row[_AT["namespace"]], row[_AT["memory_kind"]], new_id, stamp),
            )
        ]
        for old in olds:
            conn.execute(
                "UPDATE chunks SET invalidated_at = ?, invalidation_reason = ?, updated_at = ? WHERE id = ?",
                (stamp, f"{SUPERSEDED_PREFIX}{new_id}", stamp, int(old)),
            )
        return olds

    # The history's three seams (bench/history_bench.py replaces them to measure its cost).

    def _record_created(self, conn: apsw.Connection, ids: range, details: dict[int, str]) -> None:
        """The ``created`` events of a write."""
        history.record_created(conn, ids, details)

    def _record_change(
        self,
        conn: apsw.Connection,
        chunk_id: int,
        event: str,
        actor: str,
        *,
        at: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """The event of one change to one row."""
        history.record_change(conn, chunk_id, event, actor, at=at, detail=detail)

    def _record_purged(self, conn: apsw.Connection, where: str, params: Mapping[str, Any], at: str) -> None:
        """The ``purged`` events of the rows a purge is about to delete."""
        history.record_purged(conn, where, params, at)

    def _insert(
        self,
        conn: apsw.Connection,
        prepared: list[tuple[Any, ...]],
        vectors: list[bytes] | None,
        *,
        record: bool = True,
    ) -> range:
        """Insert prepared rows (caller holds the write transaction) and their vectors; with
        ``record``, their ``created`` events too."""
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
        if record:
            self._record_created(conn, ids, {})
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
        return (content, *tail, content_hash(content))

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
            if column.on_add == "derived":
                continue  # computed from the content in ``_prepare``
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
