"""Consolidation on write on PostgreSQL: the embedded store's three rules, in SQL of this backend.

The rules, their keys and the outcome values are ``contextplane.memory.consolidation``'s (exact
duplicate -> the existing id; same subject, scope and kind -> supersede; near duplicates
reported for review); this module only finds the rows they apply to and writes the result,
inside the write's own transaction.

Why a lock per scope: on the embedded store one writer at a time decides (``BEGIN
IMMEDIATE``). Here, two processes writing the same subject (or the same text) at once would
each look, find nothing of the other's, and both insert: two heads, or a stored duplicate.
So a consolidating write first takes a transaction-scoped advisory lock per scope it writes
to (in key order, so two writers never wait on each other crosswise): writers of one scope
decide one after the other, writers of different scopes do not wait at all. An explicit
``supersede`` takes the same lock (``store.supersede``): its new row is the subject's head, and a
same-subject write deciding meanwhile would not see it (issue 26: two heads).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import numpy as np
import psycopg

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
from contextplane.memory.model import SUPERSEDED_PREFIX
from contextplane.store.outcomes import write_outcomes
from contextplane_postgres import history
from contextplane_postgres.codec import content_key, dec
from contextplane_postgres.schema import TS_CONFIG
from contextplane_postgres.sql import tsquery_text

#: First key of the per-scope advisory locks ("cp" + "cons"olidation).
SCOPE_LOCK_CLASS: Final[int] = 0x636F6E73
#: The D6 filter on ``chunks AS c`` at the write's time (``%(now)s``).
DELIVERABLE: Final[str] = (
    "(c.review_state IS NULL OR c.review_state <> 'rejected') "
    "AND (c.expires_at IS NULL OR c.expires_at > %(now)s) AND c.invalidated_at IS NULL"
)

Insert = Callable[[psycopg.Connection[Any], list[list[Any]], list[np.ndarray[Any, Any]] | None], list[int]]


def _at(columns: Sequence[str]) -> dict[str, int]:
    return {name: i for i, name in enumerate(columns)}


def _dedupe_key(row: Sequence[Any], at: dict[str, int]) -> tuple[Any, ...]:
    """What makes two writes the same memory: scope, provenance, the text (whitespace runs
    collapsed), event time (the same words said on another day are another event)."""
    return (
        row[at["namespace"]],
        row[at["source_type"]],
        normalise_content(dec(row[at["content"]])),
        row[at["occurred_at"]],
    )


def _utc(value: datetime | None) -> datetime | None:
    """A stored event time as the prepared rows hold it (UTC), so the two compare as keys."""
    return None if value is None else value.astimezone(UTC)


def _deliverable_when_written(row: Sequence[Any], at: dict[str, int], now: datetime) -> bool:
    expires = row[at["expires_at"]]
    return row[at["review_state"]] != "rejected" and (expires is None or expires > now)


def lock_scopes(conn: psycopg.Connection[Any], namespaces: Iterable[str]) -> None:
    """Take the advisory lock of every scope named, in key order. Every write that can make or
    unmake a subject's head takes it before its ids are drawn: a consolidating write and an
    explicit ``supersede`` (whose new row a concurrent same-subject write would otherwise not
    see, leaving two heads), so the later of two such writers sees the earlier one's rows."""
    scopes = sorted({str(n) for n in namespaces})
    conn.execute(
        "SELECT count(pg_advisory_xact_lock(%s, s.k)) FROM "
        "(SELECT DISTINCT hashtext(n) AS k FROM unnest(%s::text[]) AS n ORDER BY k OFFSET 0) AS s",
        (SCOPE_LOCK_CLASS, scopes),
    )


def consolidate(
    conn: psycopg.Connection[Any],
    columns: Sequence[str],
    prepared: list[list[Any]],
    vectors: list[np.ndarray[Any, Any]] | None,
    now: datetime,
    policy: Consolidation,
    insert: Insert,
    *,
    single: bool,
) -> list[WriteOutcome]:
    """Decide each prepared row's outcome and write what is new, with its events (the caller
    holds the transaction). ``columns`` names the cells of a prepared row."""
    at = _at(columns)
    if policy.deduplicate or policy.auto_supersede:
        lock_scopes(conn, (row[at["namespace"]] for row in prepared))
    existing = _duplicates(conn, prepared, at, now) if policy.deduplicate else {}
    outdated = _outdated(conn, prepared, at, now) if policy.deduplicate else {}
    first_of: dict[tuple[Any, ...], int] = {}  # a duplicate within the batch: its first row
    keep: list[int] = []
    duplicate_of: dict[int, str | int] = {}
    outdated_of: dict[int, tuple[str, str]] = {}  # the text of a superseded row: (head, that row)
    for index, row in enumerate(prepared):
        key = _dedupe_key(row, at)
        if key in existing:
            duplicate_of[index] = existing[key]
        elif key in first_of:
            duplicate_of[index] = first_of[key]
        elif key in outdated:
            outdated_of[index] = outdated[key]
        else:
            if policy.deduplicate and _deliverable_when_written(row, at, now):
                first_of[key] = index  # only a deliverable row absorbs copies
            keep.append(index)
    near: dict[int, tuple[tuple[str, float], ...]] = {}
    if single:
        for index in keep:
            near[index] = _near_duplicates(conn, prepared[index], at, now, policy)
    new_ids: dict[int, int] = {}
    superseded: dict[int, list[str]] = {}
    if keep:
        kept_vectors = [vectors[i] for i in keep] if vectors is not None else None
        ids = insert(conn, [prepared[i] for i in keep], kept_vectors)
        new_ids = dict(zip(keep, ids, strict=True))
        if policy.auto_supersede:
            for index in keep:
                if prepared[index][at["subject"]]:
                    superseded[index] = _supersede_subject(conn, prepared[index], at, new_ids[index])
    outcomes, stored = write_outcomes(len(prepared), new_ids, duplicate_of, outdated_of, superseded, near)
    details = {new_ids[i]: json.dumps(r.detail()) for i, r in stored.items() if r.outcome != "stored"}
    history.record_created(conn, sorted(new_ids.values()), details)
    for index, chunk_id in sorted(new_ids.items()):
        for old in superseded.get(index, []):
            history.record_change(
                conn,
                int(old),
                "superseded",
                dec(str(prepared[index][at["source_type"]])),
                detail={"by": str(chunk_id), "rule": "same subject, scope and kind"},
            )
    for index, target in sorted(duplicate_of.items()):
        found = str(new_ids[target]) if isinstance(target, int) else target
        history.record_change(
            conn,
            int(found),
            "consolidated",
            dec(str(prepared[index][at["source_type"]])),
            at=now,
            detail={"outcome": "duplicate", "message": "an exact duplicate write returned this row"},
        )
    for index, (head, old) in sorted(outdated_of.items()):
        history.record_change(
            conn,
            int(head),
            "consolidated",
            dec(str(prepared[index][at["source_type"]])),
            at=now,
            detail={"outcome": "outdated", "message": outdated_message(old)},
        )
    return outcomes


def _outdated(
    conn: psycopg.Connection[Any], prepared: Sequence[Sequence[Any]], at: dict[str, int], now: datetime
) -> dict[tuple[Any, ...], tuple[str, str]]:
    """Superseded rows (not rejected) with the content key of a prepared row whose chain ends
    in a deliverable head: dedupe key -> (head id, row id), the newest row of a key winning
    (``memory.consolidation``: the text of a superseded row)."""
    texts = sorted({str(row[at["content"]]) for row in prepared})

    def step(chunk_id: str) -> tuple[str | None, bool] | None:
        row = conn.execute(
            f"SELECT c.invalidated_at, c.invalidation_reason, ({DELIVERABLE}) FROM chunks AS c "
            "WHERE c.id = %(id)s",
            {"id": int(chunk_id), "now": now},
        ).fetchone()
        if row is None:
            return None
        invalidated, reason, deliverable = row
        reason = str(reason or "")
        superseded = invalidated is not None and reason.startswith(SUPERSEDED_PREFIX)
        following = reason[len(SUPERSEDED_PREFIX) :] if superseded else ""
        return following or None, bool(deliverable)

    found: dict[tuple[Any, ...], tuple[str, str]] = {}
    for chunk_id, content, namespace, source_type, occurred, reason in conn.execute(
        "SELECT c.id, c.content, c.namespace, c.source_type, c.occurred_at, c.invalidation_reason "
        "FROM chunks AS c "
        f"WHERE {content_key('c.content')} = ANY(ARRAY(SELECT {content_key('x')} "
        "FROM unnest(%(texts)s::text[]) AS x)) AND c.invalidated_at IS NOT NULL "
        "AND starts_with(c.invalidation_reason, %(prefix)s) "
        "AND (c.review_state IS NULL OR c.review_state <> 'rejected') ORDER BY c.id DESC",
        {"texts": texts, "prefix": SUPERSEDED_PREFIX},
    ):
        key = (namespace, source_type, normalise_content(dec(content)), _utc(occurred))
        successor = str(reason)[len(SUPERSEDED_PREFIX) :]
        if key in found or not successor.isdigit():
            continue
        head = current_head(successor, step)
        if head is not None:
            found[key] = (head, str(chunk_id))
    return found


def _duplicates(
    conn: psycopg.Connection[Any], prepared: Sequence[Sequence[Any]], at: dict[str, int], now: datetime
) -> dict[tuple[Any, ...], str]:
    """Deliverable rows with the same content key as a prepared row: dedupe key -> oldest id."""
    texts = sorted({str(row[at["content"]]) for row in prepared})
    found: dict[tuple[Any, ...], str] = {}
    for chunk_id, content, namespace, source_type, occurred in conn.execute(
        "SELECT c.id, c.content, c.namespace, c.source_type, c.occurred_at FROM chunks AS c "
        f"WHERE {content_key('c.content')} = ANY(ARRAY(SELECT {content_key('x')} "
        f"FROM unnest(%(texts)s::text[]) AS x)) AND {DELIVERABLE} ORDER BY c.id",
        {"texts": texts, "now": now},
    ):
        key = (namespace, source_type, normalise_content(dec(content)), _utc(occurred))
        found.setdefault(key, str(chunk_id))
    return found


def _near_duplicates(
    conn: psycopg.Connection[Any],
    row: Sequence[Any],
    at: dict[str, int],
    now: datetime,
    policy: Consolidation,
) -> tuple[tuple[str, float], ...]:
    """Deliverable rows of the row's scope at or above the similarity threshold, among the
    newest ``NEAR_DUPLICATE_CANDIDATES`` holding one of the prefix-filter words (no ranking:
    scoring every match of common words would make one write a search of the whole store)."""
    content = dec(str(row[at["content"]]))
    words = candidate_terms(content, policy.near_duplicate_threshold)
    if not words:
        return ()
    # One statement on one table, filtered here: joined back to ``chunks`` (for the scope and
    # the deliverable filter) the planner may sort a whole scope to merge it with the 200 ids.
    newest = conn.execute(
        "SELECT c.id, c.content, c.namespace, c.review_state, c.expires_at, c.invalidated_at "
        f"FROM chunks AS c WHERE c.tsv @@ to_tsquery('{TS_CONFIG}', %(q)s) "
        f"ORDER BY c.id DESC LIMIT {NEAR_DUPLICATE_CANDIDATES * 4}",
        {"q": tsquery_text([f'"{w}"' for w in words])},
    ).fetchall()
    scope = row[at["namespace"]]
    candidates = [
        (i, text)
        for i, text, namespace, review, expires, invalidated in newest
        if namespace == scope
        and review != "rejected"
        and invalidated is None
        and (expires is None or expires > now)
    ][:NEAR_DUPLICATE_CANDIDATES]
    return near_duplicates(
        content, ((str(i), dec(text)) for i, text in candidates), policy.near_duplicate_threshold
    )


def _supersede_subject(
    conn: psycopg.Connection[Any], row: Sequence[Any], at: dict[str, int], new_id: int
) -> list[str]:
    """Invalidate every older deliverable row holding the row's subject in its scope and kind
    with ``superseded_by:<new_id>``; return their ids."""
    stamp = row[at["created_at"]]
    olds = conn.execute(
        "UPDATE chunks AS c SET invalidated_at = %(now)s, invalidation_reason = %(why)s, "
        "updated_at = %(now)s "
        "WHERE c.subject = %(subject)s AND c.namespace = %(ns)s AND c.memory_kind = %(kind)s "
        f"AND c.id < %(new)s AND {DELIVERABLE} RETURNING c.id",
        {
            "now": stamp,
            "why": f"{SUPERSEDED_PREFIX}{new_id}",
            "subject": row[at["subject"]],
            "ns": row[at["namespace"]],
            "kind": row[at["memory_kind"]],
            "new": new_id,
        },
    ).fetchall()
    return [str(r[0]) for r in sorted(olds)]
