"""The SQL of the PostgreSQL store's reads: filters, listing, and hybrid search in one statement.

Hybrid search is two legs fused by relevance, as on the embedded store (``contextplane.store.
sql``): score = lexical relevance + cosine similarity (each in [0, 1]; a leg that did not return
the row adds 0), relevance = the larger of the two (``SearchHit.relevance``, which the relevance
floor ``context.min_relevance`` compares against):

- **full text**: ``tsv @@ query`` through the GIN index over the *scored* terms only (the term
  plan, ``terms``: no function words, no term in more than a tenth of the rows), filtered
  (scope, deliverable) before ranking. A row's lexical relevance is the IDF share of the scored
  terms it contains (one ``@@`` per term on its own ``tsvector``); the leg ranks by it, then by
  ``ts_rank``. Only the newest ``:fts_cap`` filtered matches are ranked, which bounds the leg
  whatever the query (a one-frequent-word query would match half of a large store).
- **vector**: ``ORDER BY embedding <=> :v LIMIT :n`` through the HNSW index. pgvector before
  0.8 has no iterative index scan: a filter is applied to the ``hnsw.ef_search`` rows the
  index yields, so a selective filter (one scope in a hundred) leaves fewer than ``:n`` rows
  or none. The statement detects that in SQL (``count(*) < :n`` on the index leg, a one-time
  filter) and only then computes the exact leg: the filtered rows scanned and sorted by
  distance. A search therefore never loses a row to its filter; a selective one costs an
  exact scan of the rows it admits. Similarity is ``1 - cosine distance``, floored at 0.

Why not reciprocal-rank fusion (this backend's first form): it has no scale a floor can apply
to, and it buried exact lexical matches on the embedded store (issue 11: BM25 rank 1 in 44 of
50 questions, delivered in 19).

Everything here builds text and parameters; the store runs it. Values are always parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any, Final

from contextplane.store import filters
from contextplane.store.filters import Dialect, ListQuery
from contextplane.store.fusion import FUSION_C
from contextplane_postgres.codec import SELECT_COLUMNS, as_id, enc
from contextplane_postgres.schema import TS_CONFIG
from contextplane_postgres.terms import TermPlan, tsquery_term

#: Full-text matches ranked at most (the newest first); see the module docstring.
FTS_CAP: Final[int] = 2_000


class PostgresDialect(Dialect):
    """The shared filter spec (``contextplane.store.filters``) in psycopg's spelling: ``%(x)s``
    parameters, ``timestamptz`` values, text escaped for ``text`` cells (``codec.enc``), a scope
    list as one array parameter, and paging by parameters."""

    false = "false"
    not_equal = "<>"

    def mark(self, name: str) -> str:
        return f"%({name})s"

    def head(self, expr: str, n: int) -> str:
        return f"left({expr}, {n})"

    def time(self, value: datetime) -> Any:
        return value

    def text(self, value: str) -> Any:
        return enc(value)

    def scope(self, names: list[str], params: dict[str, Any], *, indexed: bool) -> str:
        params["ns"] = names
        return "c.namespace = ANY(%(ns)s)"

    def key(self, chunk_id: object) -> int | None:
        return as_id(chunk_id)  # a bigint: a longer id names no row

    def following(self, select: str, marks: Sequence[str], clauses: Sequence[str]) -> str:
        """A ``LATERAL`` lookup per id: the first row after ``h`` in (namespace, id) order that
        meets ``clauses``, kept when it is in ``h``'s scope. One step down the (namespace, id)
        index (schema step 8); past the scope's end it stops at the next scope's first row.

        Written for the planner's estimates, which the shared form (``c.namespace = h.namespace
        AND c.id > h.id ORDER BY c.id`` in a scalar subquery joined back to ``chunks``) left to
        chance (figures: bench/following_bench.py). With statistics it walked the primary key
        through every other scope's rows (15 ms for a turn 50,000 rows before the next of its
        scope); before a table's first ``ANALYZE`` (a store just filled) it hashed the whole
        table for the join back. The deliverable filter goes in one ``CASE``: as plain clauses,
        with no statistics to estimate them by (before that ``ANALYZE``, and always in an as-of
        view, whose state columns are ``CASE`` expressions) the planner took them to pass a
        row in thousands and scanned and sorted each scope for its one row (0.4 s for 40 ids
        at 10k rows); as one opaque condition it counts on half, and walks the index in order
        to the first."""
        # the scope bounds the walk: the last turn of a scope, or one whose source has no later
        # row, must not walk on through the next scopes' rows looking for one
        where = "(c.namespace, c.id) > (h.namespace, h.id) AND c.namespace = h.namespace"
        if clauses:
            where += f" AND CASE WHEN {' AND '.join(clauses)} THEN true ELSE false END"
        nearest = f"SELECT {select} FROM chunks AS c WHERE {where} ORDER BY c.namespace, c.id LIMIT 1"
        return (
            f"SELECT h.id AS after, n.* FROM chunks AS h CROSS JOIN LATERAL ({nearest}) AS n "
            f"WHERE h.id IN ({', '.join(marks)}) AND n.namespace = h.namespace"
        )

    def page(self, limit: int | None, offset: int, params: dict[str, Any]) -> str:
        text = ""
        if limit is not None:
            params["limit"] = limit
            text += " LIMIT %(limit)s"
        if offset:
            params["offset"] = offset
            text += " OFFSET %(offset)s"
        return text


#: This backend's dialect of the shared filter spec.
POSTGRES: Final[Dialect] = PostgresDialect()
scope_filter = partial(filters.scope_filter, POSTGRES)
deliverable_filter = partial(filters.deliverable_filter, POSTGRES)
event_time_filter = partial(filters.event_time_filter, POSTGRES)


def list_sql(*, count: bool = False, **query: Any) -> tuple[str, dict[str, Any]]:
    """``list_chunks``: rows matching every filter, oldest first, from the ``offset``-th (NULL
    policy is retrieved, NULL review state is pending); ``count``: how many match."""
    return filters.list_sql(POSTGRES, ListQuery(**query), SELECT_COLUMNS, count=count)


def tsquery_text(terms: Sequence[str]) -> str:
    """``to_tsquery`` input from ``fts_query.fts_terms`` output (``"word"`` or ``"word"*``),
    the words OR-ed (for callers that want every word; search scores its term plan's)."""
    return " | ".join(tsquery_term(t) for t in terms)


def term_params(plan: TermPlan, params: dict[str, Any]) -> None:
    """The full-text leg's parameters: the OR of the scored terms, each term and its weight."""
    params["q"] = plan.query
    for i, (term, weight) in enumerate(zip(plan.terms, plan.weights, strict=True)):
        params[f"t{i}"] = term
        params[f"w{i}"] = weight


def lexical(count: int, tsv: str = "t.tsv") -> str:
    """A row's lexical relevance: the summed weights of the ``count`` scored terms it holds,
    capped at 1 (the weights of all of them sum to at most 1; the cap absorbs rounding)."""
    parts = [
        f"CASE WHEN {tsv} @@ to_tsquery('{TS_CONFIG}', %(t{i})s) THEN %(w{i})s::float8 ELSE 0.0 END"
        for i in range(count)
    ]
    return f"least(1.0, {' + '.join(parts)})"


def fts_leg(where: str, count: int) -> str:
    """(id, lex, s) of the best ``:n`` filtered full-text matches among the newest ``:fts_cap``,
    by lexical relevance (``count`` scored terms), then ``ts_rank``."""
    return (
        f"SELECT t.id, {lexical(count)} AS lex, ts_rank(t.tsv, to_tsquery('{TS_CONFIG}', %(q)s), 1) AS s "
        f"FROM (SELECT c.id, c.tsv FROM chunks AS c WHERE c.tsv @@ to_tsquery('{TS_CONFIG}', %(q)s) "
        f"AND {where} ORDER BY c.id DESC LIMIT %(fts_cap)s) AS t ORDER BY lex DESC, s DESC, t.id LIMIT %(n)s"
    )


def vector_legs(where: str) -> list[str]:
    """CTEs ``vfast`` (the HNSW leg), ``vexact`` (only when ``vfast`` came up short) and ``vec``
    (id, sim)."""
    return [
        "vfast AS MATERIALIZED (SELECT c.id, c.embedding <=> %(v)s AS d FROM chunks AS c "
        f"WHERE c.embedding IS NOT NULL AND {where} ORDER BY c.embedding <=> %(v)s LIMIT %(n)s)",
        "vexact AS (SELECT x.id, x.d FROM (SELECT c.id, c.embedding <=> %(v)s AS d FROM chunks AS c "
        f"WHERE c.embedding IS NOT NULL AND {where} OFFSET 0) AS x "
        "WHERE (SELECT count(*) FROM vfast) < %(n)s ORDER BY x.d, x.id LIMIT %(n)s)",
        "vec AS (SELECT id, 1.0 - d AS sim FROM ("
        "SELECT id, d FROM vfast WHERE (SELECT count(*) FROM vfast) >= %(n)s "
        "UNION ALL SELECT id, d FROM vexact) AS u)",
    ]


def search_sql(terms: int, has_vector: bool, where: str) -> str:
    """The search statement (``terms``: how many scored terms; 0, no full-text leg); rows are
    ``SELECT_COLUMNS`` followed by the score and the relevance. Hybrid legs are fused by rank
    (reciprocal rank fusion with the embedded store's constant, ``store.fusion``; ties by id),
    so a row one leg ranks first is never buried by the other leg's silence about it."""
    if not has_vector:
        return (
            f"WITH fts AS ({fts_leg(where, terms)}) SELECT {SELECT_COLUMNS}, fts.lex, fts.lex FROM fts "
            "JOIN chunks AS c ON c.id = fts.id ORDER BY fts.lex DESC, fts.s DESC, c.id LIMIT %(k)s"
        )
    legs = vector_legs(where)
    legs.append("vecr AS (SELECT id, sim, row_number() OVER (ORDER BY sim DESC, id) AS r FROM vec)")
    union = f"SELECT id, NULL::float8 AS lex, sim, 1.0 / ({FUSION_C} + r) AS rrf FROM vecr"
    if terms:
        legs.append(f"fts AS ({fts_leg(where, terms)})")
        legs.append(
            "ftsr AS (SELECT id, lex, row_number() OVER (ORDER BY lex DESC, s DESC, id) AS r FROM fts)"
        )
        union += f" UNION ALL SELECT id, lex, NULL::float8 AS sim, 1.0 / ({FUSION_C} + r) AS rrf FROM ftsr"
    legs.append(
        "fused AS (SELECT id, coalesce(max(lex), 0.0) AS lex, greatest(coalesce(max(sim), 0.0), 0.0) AS sim, "
        f"sum(rrf) AS score FROM ({union}) AS u GROUP BY id)"
    )
    return (
        "WITH " + ", ".join(legs) + f" SELECT {SELECT_COLUMNS}, fused.score AS score, "
        "greatest(fused.lex, CASE WHEN fused.sim > %(chance)s "
        "THEN (fused.sim - %(chance)s) / (1.0 - %(chance)s) ELSE 0.0 END) AS relevance "
        "FROM fused JOIN chunks AS c ON c.id = fused.id "
        "ORDER BY score DESC, c.id LIMIT %(k)s"
    )
