"""The SQL of the store's reads: the filters, and the search statements (FTS, vector, fused).

Search is hybrid when an embedder is configured: a BM25 top-n from FTS5 and a vector top-n,
fused by reciprocal rank (RRF, k=60) in one SQL statement; without one it is FTS-only. Each
leg first takes its best ``8k`` (at least 80) candidates unfiltered, then joins and filters
only those (scope, deliverable); the *exact* form filters every candidate before the cut, for
when the fast form leaves fewer than ``k`` results. Everything here builds text and
parameters; the store runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from contextplane.errors import ValidationError
from contextplane.memory.model import (
    SUPERSEDED_PREFIX,
    format_timestamp,
    utc_now,
    validate_delivery_policy,
    validate_memory_kind,
    validate_review_state,
    validate_text,
)
from contextplane.store import vector_index
from contextplane.store.columns import SELECT_COLUMNS

RRF_K: Final[int] = 60


def scope_filter(
    namespaces: Sequence[str] | None, params: dict[str, Any], clauses: list[str], *, indexed: bool = True
) -> None:
    """Only rows in ``namespaces`` (None: any scope; empty: none). ``indexed=False`` (search)
    keeps the planner off the namespace index: a search is driven by its leg's candidates, and
    scanning every row of the global scope through the index made a scoped search at 100k rows
    cost 40-100 ms instead of about 1."""
    if namespaces is None:
        return
    if isinstance(namespaces, str):
        raise ValidationError("namespaces: expected a list of scopes, got a single string")
    names = [validate_text(n, "namespaces") for n in namespaces]
    if not names:
        clauses.append("0")
        return
    marks = []
    for i, name in enumerate(names):
        params[f"ns{i}"] = name
        marks.append(f":ns{i}")
    column = "c.namespace" if indexed else "+c.namespace"
    clauses.append(f"{column} IN ({', '.join(marks)})")


def deliverable_filter(
    include_superseded: bool, now: datetime | None, params: dict[str, Any], clauses: list[str]
) -> None:
    """Only rows the model may be shown: not rejected, not expired, not invalidated (superseded
    ones admitted when ``include_superseded``)."""
    params["now"] = format_timestamp(now or utc_now())
    clauses.append("(c.review_state IS NULL OR c.review_state != 'rejected')")
    clauses.append("(c.expires_at IS NULL OR c.expires_at > :now)")
    if include_superseded:
        clauses.append(
            f"(c.invalidated_at IS NULL OR substr(c.invalidation_reason, 1, 14) = '{SUPERSEDED_PREFIX}')"
        )
    else:
        clauses.append("c.invalidated_at IS NULL")


def list_sql(
    *,
    deliverable: bool,
    memory_kind: str | None,
    review_state: str | None,
    delivery_policy: str | None,
    namespace: str | None,
    namespaces: Sequence[str] | None,
    limit: int | None,
    now: datetime | None,
) -> tuple[str, dict[str, Any]]:
    """The statement and parameters of ``list_chunks``: rows matching every given filter,
    oldest first. ``delivery_policy="retrieved"`` also matches NULL; ``review_state="pending"``
    also matches NULL (legacy rows)."""
    params: dict[str, Any] = {}
    clauses: list[str] = []
    if memory_kind is not None:
        params["kind"] = validate_memory_kind(memory_kind)
        clauses.append("c.memory_kind = :kind")
    if review_state is not None:
        params["review"] = validate_review_state(review_state)
        clauses.append(
            "(c.review_state = :review OR c.review_state IS NULL)"
            if review_state == "pending"
            else "c.review_state = :review"
        )
    if delivery_policy is not None:
        params["policy"] = validate_delivery_policy(delivery_policy)
        clauses.append(
            "(c.delivery_policy = :policy OR c.delivery_policy IS NULL)"
            if delivery_policy == "retrieved"
            else "c.delivery_policy = :policy"
        )
    if namespace is not None:
        params["namespace"] = validate_text(namespace, "namespace")
        clauses.append("c.namespace = :namespace")
    scope_filter(namespaces, params, clauses)
    if deliverable:
        deliverable_filter(False, now, params, clauses)
    sql = f"SELECT {SELECT_COLUMNS} FROM chunks AS c"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += " ORDER BY c.id"
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValidationError(f"limit: expected a non-negative whole number, got {limit!r}")
        sql += f" LIMIT {limit}"
    return sql, params


def fts_leg(where: str, *, exact: bool, limit: str) -> str:
    """Ids and BM25 scores (lower is better) of the best ``limit`` deliverable FTS matches.
    Fast form: FTS5 picks the top ``:nc`` matches by itself, then only those are joined and
    filtered. Exact form: every match is joined and filtered before the cut."""
    if exact:
        return (
            "SELECT c.id AS id, bm25(chunks_fts) AS s FROM chunks_fts JOIN chunks AS c "
            f"ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH :q AND {where} "
            f"ORDER BY s, id LIMIT {limit}"
        )
    return (
        "SELECT t.id AS id, t.s AS s FROM (SELECT rowid AS id, bm25(chunks_fts) AS s FROM chunks_fts "
        "WHERE chunks_fts MATCH :q ORDER BY s LIMIT :nc) AS t JOIN chunks AS c ON c.id = t.id "
        f"WHERE {where} ORDER BY t.s, t.id LIMIT {limit}"
    )


def search_sql(expression: str | None, vector: bytes | None, where: str, *, exact: bool) -> str:
    """The search statement: FTS-only without a query vector, else the vector leg fused with
    the FTS leg (when the query has words) by reciprocal rank. Rows are ``SELECT_COLUMNS``
    followed by the score."""
    if vector is None:  # FTS-only: one join, the rows come straight from the filtering join
        if exact:
            return (
                f"SELECT {SELECT_COLUMNS}, -bm25(chunks_fts) AS score FROM chunks_fts JOIN chunks AS c "
                f"ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH :q AND {where} "
                "ORDER BY bm25(chunks_fts), c.id LIMIT :k"
            )
        return (
            f"SELECT {SELECT_COLUMNS}, -t.s AS score FROM (SELECT rowid AS id, bm25(chunks_fts) AS s "
            "FROM chunks_fts WHERE chunks_fts MATCH :q ORDER BY s LIMIT :nc) AS t "
            f"JOIN chunks AS c ON c.id = t.id WHERE {where} ORDER BY t.s, t.id LIMIT :k"
        )
    legs = vector_index.vector_leg(where, exact=exact)
    union = "SELECT id, r FROM vec"
    if expression is not None:
        fts = fts_leg(where, exact=exact, limit=":n")
        legs.append(f"fts AS (SELECT id, row_number() OVER (ORDER BY s, id) AS r FROM ({fts}))")
        union += " UNION ALL SELECT id, r FROM fts"
    legs.append(f"fused AS (SELECT id, sum(1.0 / ({RRF_K} + r)) AS score FROM ({union}) GROUP BY id)")
    return (
        "WITH " + ", ".join(legs) + f" SELECT {SELECT_COLUMNS}, fused.score FROM fused "
        "JOIN chunks AS c ON c.id = fused.id ORDER BY fused.score DESC, c.id LIMIT :k"
    )
