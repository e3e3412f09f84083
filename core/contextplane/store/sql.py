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
from functools import partial
from typing import Any

import attrs

from contextplane.store import filters
from contextplane.store.columns import SELECT_COLUMNS
from contextplane.store.filters import SQLITE, ListQuery
from contextplane.store.filters import check_whole as check_whole

#: The filters of the embedded store: the shared spec (``filters``) in SQLite's dialect.
scope_filter = partial(filters.scope_filter, SQLITE)
deliverable_filter = partial(filters.deliverable_filter, SQLITE)
event_time_filter = partial(filters.event_time_filter, SQLITE)


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


def list_sql(*, count: bool = False, **query: Any) -> tuple[str, dict[str, Any]]:
    """The statement and parameters of ``list_chunks`` (``count``: of ``count_chunks``), keyword
    by keyword as ``ListQuery`` names them."""
    return filters.list_sql(SQLITE, ListQuery(**query), SELECT_COLUMNS, count=count)


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
