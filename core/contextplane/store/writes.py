"""Writes: a row validated and stamped, consolidated, and inserted with its vector and its
``created`` event, all in one transaction. This module consolidates (``memory.consolidation``'s rules: exact
duplicates, outdated text, near duplicates, same-subject supersession) before the insert
(``inserts``: validation, D7 stamps, the insert and the history seams).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

import apsw

from contextplane.embedding import refused_write
from contextplane.memory.consolidation import (
    NEAR_DUPLICATE_CANDIDATES,
    Consolidation,
    WriteOutcome,
    candidate_terms,
    current_head,
    near_duplicates,
    normalise_content,
    outdated_message,
)
from contextplane.memory.model import (
    SUPERSEDED_PREFIX,
    format_timestamp,
    utc_now,
)
from contextplane.store import migrate, unkeyed, write_spec
from contextplane.store.connection import store_error
from contextplane.store.fts_query import to_match_expression
from contextplane.store.inserts import (
    _AT,
    _AT_EXPIRES,
    _AT_HASH,
    _AT_NAMESPACE,
    _AT_OCCURRED,
    _AT_REVIEW,
    _AT_SOURCE_TYPE,
    _AT_SUBJECT,
    StoreInserts,
)
from contextplane.store.outcomes import write_outcomes

#: The D6 filter on ``chunks AS c`` at the write's time (the one parameter).
_DELIVERABLE: Final[str] = (
    "(c.review_state IS NULL OR c.review_state != 'rejected') "
    "AND (c.expires_at IS NULL OR c.expires_at > ?) AND c.invalidated_at IS NULL"
)


#: The deliverable rows holding any of a batch's (subject, scope, kind) keys (a JSON array),
#: older than its first new row. CROSS JOIN: the keys drive, one ``chunks_subject`` probe each;
#: ``subject != ''`` lets the planner use that partial index (without it, it scanned every row
#: of the scope: 100k rows for one write).
SUBJECT_HEADS_SQL: Final[str] = (
    "SELECT c.id, c.subject, c.namespace, c.memory_kind FROM json_each(?) AS k CROSS JOIN chunks AS c "
    "WHERE c.subject = k.value ->> 0 AND c.subject != '' AND c.namespace = k.value ->> 1 "
    f"AND c.memory_kind = k.value ->> 2 AND c.id < ? AND {_DELIVERABLE} ORDER BY c.id"
)


def _deliverable_when_written(row: tuple[Any, ...], now_text: str) -> bool:
    expires = row[_AT_EXPIRES]
    return row[_AT_REVIEW] != "rejected" and (expires is None or expires > now_text)


def _dedupe_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """What makes two writes the same memory: content key, scope, provenance, event time (the
    same words said on another day are another event: "thanks!" in two sessions), and the
    text, which is compared only when the rest is equal (``_match``): normalising every row's
    text to build the key cost bulk ingest more than the lookup it serves."""
    return (row[_AT_HASH], row[_AT_NAMESPACE], row[_AT_SOURCE_TYPE], row[_AT_OCCURRED])


def _match(candidates: list[tuple[str, Any]] | None, content: str) -> Any | None:
    """The value kept for an earlier row with the same dedupe key and the same text, if any
    (a 64-bit key can collide, so the text decides)."""
    if candidates:
        for text, value in candidates:
            if text == content or normalise_content(text) == normalise_content(content):
                return value
    return None


class StoreWrites(write_spec.ChunkWrites, StoreInserts):
    """Adding rows: one or a batch, all or none."""

    #: Set once the store's rows all have their content key (``_keys_complete``).
    _all_keyed: bool = False

    def _write(self, rows: Iterable[Mapping[str, Any]], *, single: bool) -> list[WriteOutcome]:
        """``add_chunk``/``add_chunks`` (``ChunkWrites``): rows are validated and embedded before
        the write lock is taken, then written in one transaction, consolidated."""
        now_text, prepared = self._prepared(rows)
        if not prepared:
            return []
        with refused_write():
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
        if len(prepared) > 1 and not self._read_only:
            self._key_before_bulk(len(prepared))
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
        outdated = self._outdated(conn, prepared, now_text) if policy.deduplicate else {}
        # a duplicate within the batch: its first row (dedupe key -> [(text, index)])
        first_of: dict[tuple[Any, ...], list[tuple[str, Any]]] = {}
        keep: list[int] = []
        duplicate_of: dict[int, str | int] = {}
        outdated_of: dict[int, tuple[str, str]] = {}  # the text of a superseded row: (head, that row)
        for index, row in enumerate(prepared):
            if policy.deduplicate:
                key = _dedupe_key(row)
                found = _match(existing.get(key), row[0]) if existing else None
                if found is None:
                    found = _match(first_of.get(key), row[0])
                if found is not None:
                    duplicate_of[index] = found
                    continue
                stale = _match(outdated.get(key), row[0]) if outdated else None
                if stale is not None:
                    outdated_of[index] = stale
                    continue
                if _deliverable_when_written(row, now_text):  # only a deliverable row absorbs copies
                    first_of.setdefault(key, []).append((row[0], index))
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
            ids = self._insert(conn, rows, kept_vectors)
            new_ids = dict(zip(keep, ids, strict=True))
            if policy.auto_supersede:
                superseded = self._subject_heads(conn, prepared, new_ids, now_text)
        outcomes, stored = write_outcomes(len(prepared), new_ids, duplicate_of, outdated_of, superseded, near)
        details = {new_ids[i]: json.dumps(r.detail()) for i, r in stored.items() if r.outcome != "stored"}
        if details:
            self._record_created(conn, details)
        for index, chunk_id in sorted(new_ids.items()):
            stamp = str(prepared[index][_AT["created_at"]])
            for old in superseded.get(index, []):
                self._change(
                    conn,
                    int(old),
                    "invalidated_at = ?, invalidation_reason = ?, updated_at = ?",
                    (stamp, f"{SUPERSEDED_PREFIX}{chunk_id}", stamp),
                    "superseded",
                    str(prepared[index][_AT["source_type"]]),
                    stamp,
                    detail={"by": str(chunk_id), "rule": "same subject, scope and kind"},
                )
        for index, target in sorted(duplicate_of.items()):
            found = str(new_ids[target]) if isinstance(target, int) else target
            self._change(
                conn,
                int(found),
                "",
                (),
                "consolidated",
                str(prepared[index][_AT["source_type"]]),
                now_text,
                detail={"outcome": "duplicate", "message": "an exact duplicate write returned this row"},
            )
        for index, (head, old) in sorted(outdated_of.items()):
            self._change(
                conn,
                int(head),
                "",
                (),
                "consolidated",
                str(prepared[index][_AT["source_type"]]),
                now_text,
                detail={"outcome": "outdated", "message": outdated_message(old)},
            )
        return outcomes

    def _outdated(
        self, conn: apsw.Connection, prepared: list[tuple[Any, ...]], now_text: str
    ) -> dict[tuple[Any, ...], list[tuple[str, Any]]]:
        """Superseded rows (not rejected) with the content key of a prepared row whose chain
        ends in a deliverable head: dedupe key -> [(text, (head id, row id))], newest first
        (``memory.consolidation``: the text of a superseded row)."""
        hashes = list({row[_AT_HASH] for row in prepared if row[_AT_HASH] is not None})
        found: dict[tuple[Any, ...], list[tuple[str, Any]]] = {}
        if not hashes:
            return found

        def step(chunk_id: str) -> tuple[str | None, bool] | None:
            row = conn.execute(
                "SELECT c.invalidated_at, c.invalidation_reason, "
                f"({_DELIVERABLE}) FROM chunks AS c WHERE c.id = ?",
                (now_text, int(chunk_id)),
            ).fetchone()
            if row is None:
                return None
            invalidated, reason, deliverable = row
            reason = str(reason or "")
            superseded = invalidated is not None and reason.startswith(SUPERSEDED_PREFIX)
            return (reason[len(SUPERSEDED_PREFIX) :] or None) if superseded else None, bool(deliverable)

        for chunk_id, content, namespace, source_type, occurred, key, reason in conn.execute(
            "SELECT c.id, c.content, c.namespace, c.source_type, c.occurred_at, c.content_hash, "
            "c.invalidation_reason "
            "FROM chunks AS c WHERE c.content_hash IN (SELECT value FROM json_each(?)) "
            "AND c.content_hash IS NOT NULL AND c.invalidated_at IS NOT NULL "
            "AND c.invalidation_reason LIKE 'superseded^_by:%' ESCAPE '^' "
            "AND (c.review_state IS NULL OR c.review_state != 'rejected') ORDER BY c.id DESC",
            (json.dumps(hashes),),
        ):
            successor = str(reason)[len(SUPERSEDED_PREFIX) :]
            if not successor.isdigit():
                continue
            head = current_head(successor, step)
            if head is not None:
                pair = (head, str(chunk_id))
                found.setdefault((key, namespace, source_type, occurred), []).append((str(content), pair))
        return found

    def _duplicates(
        self, conn: apsw.Connection, prepared: list[tuple[Any, ...]], now_text: str
    ) -> dict[tuple[Any, ...], list[tuple[str, Any]]]:
        """Deliverable rows with the content key of a prepared row, in one statement for the
        batch: dedupe key -> [(text, id)], oldest first. While a migrated store's rows are not
        all keyed yet (``migrate.migrate_content_hashes``), the unkeyed ones are looked up too."""
        hashes = list({row[_AT_HASH] for row in prepared if row[_AT_HASH] is not None})
        found: dict[tuple[Any, ...], list[tuple[str, Any]]] = {}
        if not hashes:
            return found
        for chunk_id, content, namespace, source_type, occurred, key in conn.execute(
            "SELECT c.id, c.content, c.namespace, c.source_type, c.occurred_at, c.content_hash "
            "FROM chunks AS c WHERE c.content_hash IN (SELECT value FROM json_each(?)) "
            "AND c.content_hash IS NOT NULL AND " + _DELIVERABLE + " ORDER BY c.id",
            (json.dumps(hashes), now_text),
        ):
            key_of = (key, namespace, source_type, occurred)
            found.setdefault(key_of, []).append((str(content), str(chunk_id)))
        if not self._keys_complete(conn):
            writes = [(_dedupe_key(row), str(row[0])) for row in prepared]
            for key, rows in unkeyed.duplicates(conn, writes, _DELIVERABLE, now_text).items():
                both = set(found.get(key, [])) | set(rows)
                found[key] = sorted(both, key=lambda pair: int(pair[1]))
        return found

    def _key_before_bulk(self, rows: int) -> None:
        """Before a bulk write into a store whose rows are not all keyed: when looking each row's
        duplicates up through the full-text index would cost more than keying the rest of the
        store (``unkeyed.LOOKUP_COST_IN_KEYS`` rows keyed per lookup), key the rest first."""
        with self._lock:
            conn = self.conn
            if self._keys_complete(conn):
                return
            worth = rows * unkeyed.LOOKUP_COST_IN_KEYS
            if migrate.content_hash_rows_left(conn, worth + 1) <= worth:
                try:
                    migrate.migrate_content_hashes(conn)
                except apsw.Error as exc:
                    raise store_error(self.path, exc, migrate.MIGRATING) from None

    def _keys_complete(self, conn: apsw.Connection) -> bool:
        """True once every row has its content key (the pass's marker never goes away again)."""
        if not self._all_keyed:
            self._all_keyed = migrate.meta_get(conn, migrate.CONTENT_HASH_BACKFILL) is not None
        return self._all_keyed

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

    def _subject_heads(
        self,
        conn: apsw.Connection,
        prepared: list[tuple[Any, ...]],
        new_ids: Mapping[int, int],
        now_text: str,
    ) -> dict[int, list[str]]:
        """For each new row naming a subject, the older deliverable rows holding that subject
        in its scope and kind, which it supersedes (the caller invalidates them with
        ``superseded_by:<new id>``). The rows already stored are found in one statement for the
        batch; within the batch each row supersedes the one before it (when that one was
        deliverable when written), so a batch naming one subject twice leaves a chain, as two
        writes would."""
        named = [(i, new_ids[i]) for i in sorted(new_ids) if prepared[i][_AT_SUBJECT]]
        if not named:
            return {}
        keys = sorted({self._subject_key(prepared[i]) for i, _ in named})
        heads: dict[tuple[str, str, str], list[str]] = {}
        for chunk_id, subject, namespace, kind in conn.execute(
            SUBJECT_HEADS_SQL, (json.dumps(keys), min(i for _, i in named), now_text)
        ):
            heads.setdefault((subject, namespace, kind), []).append(str(chunk_id))
        superseded: dict[int, list[str]] = {}
        for index, new_id in named:
            row = prepared[index]
            key = self._subject_key(row)
            olds = heads.get(key, [])
            if olds:
                superseded[index] = olds
            heads[key] = [str(new_id)] if _deliverable_when_written(row, now_text) else []
        return superseded

    @staticmethod
    def _subject_key(row: tuple[Any, ...]) -> tuple[str, str, str]:
        return (str(row[_AT_SUBJECT]), str(row[_AT_NAMESPACE]), str(row[_AT["memory_kind"]]))
