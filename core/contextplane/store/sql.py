"""The SQL of the store's reads: the filters, and the full-text leg's statement.

Search ranks each leg on its own and fuses them in Python (``legs``, ``fusion``). The full-text
leg first takes its best ``:nc`` candidates unfiltered, then joins and filters only those
(scope, deliverable); ``legs`` widens ``:nc`` when the filters starve it, and the *exact* form
filters every candidate before the cut as the last step. Everything here builds text and
parameters; the store runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import attrs

from contextplane.errors import ValidationError
from contextplane.memory.model import (
    SUPERSEDED_PREFIX,
    format_timestamp,
    parse_timestamp,
    utc_now,
    validate_delivery_policy,
    validate_memory_kind,
    validate_review_state,
    validate_text,
)
from contextplane.store.columns import SELECT_COLUMNS


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


def event_time_filter(
    occurred_after: datetime | str | None,
    occurred_before: datetime | str | None,
    params: dict[str, Any],
    clauses: list[str],
) -> None:
    """Only rows whose event time lies in ``[occurred_after, occurred_before)``: half open, so
    consecutive windows never hold a row twice. A row without an event time is in no window."""
    if occurred_after is not None:
        params["occurred_after"] = format_timestamp(parse_timestamp(occurred_after, "occurred_after"))
        clauses.append("c.occurred_at >= :occurred_after")
    if occurred_before is not None:
        params["occurred_before"] = format_timestamp(parse_timestamp(occurred_before, "occurred_before"))
        clauses.append("c.occurred_at < :occurred_before")


@attrs.frozen
class SearchFilters:
    """One search's filters, written twice: ``where`` for the legs driven by their own candidates
    (the scope index kept out of the plan) and ``scan_where`` for the vector leg's scan form,
    driven by the scope index; ``scope_where`` is the scope alone (indexed); ``filtered`` says
    whether anything is filtered at all (a leg then widens its candidates when starved)."""

    params: dict[str, Any]
    where: str
    scan_where: str
    scope_where: str
    filtered: bool


def search_filters(
    namespaces: Sequence[str] | None,
    *,
    deliverable: bool = True,
    include_superseded: bool = False,
    now: datetime | None = None,
    occurred_after: datetime | str | None = None,
    occurred_before: datetime | str | None = None,
) -> SearchFilters:
    """The filters of ``search`` (and of ``trace_search``, which must filter as it did)."""
    params: dict[str, Any] = {}
    clauses: list[str] = []
    scope_filter(namespaces, params, clauses, indexed=False)
    scoped: list[str] = []
    scope_filter(namespaces, params, scoped, indexed=True)
    scan = list(scoped)
    event_time_filter(occurred_after, occurred_before, params, clauses)
    event_time_filter(occurred_after, occurred_before, params, scan)
    if deliverable:
        deliverable_filter(include_superseded, now, params, clauses)
        deliverable_filter(include_superseded, now, params, scan)
    return SearchFilters(
        params,
        " AND ".join(clauses) or "1",
        " AND ".join(scan) or "1",
        " AND ".join(scoped) or "1",
        bool(clauses),
    )


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
    occurred_after: datetime | str | None = None,
    occurred_before: datetime | str | None = None,
    offset: int = 0,
    count: bool = False,
) -> tuple[str, dict[str, Any]]:
    """The statement and parameters of ``list_chunks``: rows matching every given filter,
    oldest first, from the ``offset``-th (``count``: how many match, for ``count_chunks``).
    ``delivery_policy="retrieved"`` also matches NULL; ``review_state="pending"`` also matches
    NULL (legacy rows)."""
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
        if params["policy"] == "always":  # a literal, so the partial index chunks_always applies
            clauses.append("c.delivery_policy = 'always'")
        else:
            clauses.append(
                "(c.delivery_policy = :policy OR c.delivery_policy IS NULL)"
                if delivery_policy == "retrieved"
                else "c.delivery_policy = :policy"
            )
    if namespace is not None:
        params["namespace"] = validate_text(namespace, "namespace")
        clauses.append("c.namespace = :namespace")
    scope_filter(namespaces, params, clauses)
    event_time_filter(occurred_after, occurred_before, params, clauses)
    if deliverable:
        deliverable_filter(False, now, params, clauses)
    sql = f"SELECT {'count(*)' if count else SELECT_COLUMNS} FROM chunks AS c"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    if count:
        return sql, params
    sql += " ORDER BY c.id"
    if limit is not None:
        sql += f" LIMIT {check_whole(limit, 'limit')}"
    if check_whole(offset, "offset"):
        sql += f"{'' if limit is not None else ' LIMIT -1'} OFFSET {offset}"
    return sql, params


def check_whole(value: object, name: str) -> int:
    """``limit`` and ``offset``: a non-negative whole number (put into the statement)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{name}: expected a non-negative whole number, got {value!r}")
    return value


def fts_leg(where: str, *, exact: bool, limit: str) -> str:
    """Ids, BM25 scores (lower is better) and lexical relevance (``-bm25 / :ideal``, the
    IDF-weighted share of the query matched, capped at 1) of the best ``limit`` deliverable FTS
    matches. Fast form: FTS5 picks the top ``:nc`` matches by itself, then only those are
    joined and filtered. Exact form: every match is joined and filtered before the cut.
    ``CROSS JOIN`` keeps the full-text side outer: left to itself the planner may drive the join
    from the scope index and read every row in scope (measured: 107 vs 54 ms at 100k)."""
    if exact:
        return (
            "SELECT c.id AS id, bm25(chunks_fts) AS s, min(1.0, -bm25(chunks_fts) / :ideal) AS lex "
            "FROM chunks_fts CROSS JOIN chunks AS c ON c.id = chunks_fts.rowid "
            f"WHERE chunks_fts MATCH :q AND {where} ORDER BY s, id LIMIT {limit}"
        )
    return (
        "SELECT t.id AS id, t.s AS s, min(1.0, -t.s / :ideal) AS lex FROM (SELECT rowid AS id, "
        "bm25(chunks_fts) AS s FROM chunks_fts WHERE chunks_fts MATCH :q ORDER BY s LIMIT :nc) AS t "
        f"CROSS JOIN chunks AS c ON c.id = t.id WHERE {where} ORDER BY t.s, t.id LIMIT {limit}"
    )
