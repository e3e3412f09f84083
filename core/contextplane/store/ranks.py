"""Where one row ranked for one query in the embedded store's search: the evidence ``explain``
gives for "never retrieved".

It re-runs ``search``'s own statement (``sql.search_sql``, the same candidate sizes for the
same ``k``) with the final cut lifted, so the row's place in the fused list is the place that
search gave it; when ``search`` would have widened its candidates or fallen back to the
exact form (fewer than ``k`` results), the trace does too. Then, per leg, the row's rank
among the leg's candidates before any filter (the cut the fast form makes) and among those
that pass the filters: full text by BM25 over every match, the vector leg among the vectors
its probed lists hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from contextplane.store import migrate, sql, vector_index
from contextplane.store.protocol import LegRank, SearchTrace
from contextplane.store.query_terms import FtsPlan, indexed_rows

#: How far past ``k`` the lifted final cut reaches (a fused list never holds more than 2n).
_LIFT = 4


def _fts_leg(
    conn: apsw.Connection, expression: str, chunk_id: int, where: str, params: dict[str, Any]
) -> LegRank:
    nc = int(params["nc"])
    mine = conn.execute(
        "SELECT bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH :q AND rowid = :id",
        {"q": expression, "id": chunk_id},
    ).fetchone()
    matches = int(
        migrate.scalar(conn, "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH :q", {"q": expression})
    )
    if mine is None:
        return LegRank("fts", None, matches, nc, None, "no word of the query occurs in it")
    score = float(mine[0])
    better = "(t.s < :sm OR (t.s = :sm AND t.id < :id))"
    scored = "SELECT rowid AS id, bm25(chunks_fts) AS s FROM chunks_fts WHERE chunks_fts MATCH :q"
    args = {**params, "q": expression, "sm": score, "id": chunk_id}
    rank = 1 + int(migrate.scalar(conn, f"SELECT count(*) FROM ({scored}) AS t WHERE {better}", args))
    passes = conn.execute(f"SELECT 1 FROM chunks AS c WHERE c.id = :id AND {where}", args).fetchone()
    filtered = None
    if passes is not None:
        filtered = 1 + int(
            migrate.scalar(
                conn,
                f"SELECT count(*) FROM ({scored}) AS t JOIN chunks AS c ON c.id = t.id "
                f"WHERE {where} AND {better}",
                args,
            )
        )
    return LegRank("fts", rank, matches, nc, filtered, f"BM25 score {-score:.6g}")


def _vector_leg(
    conn: apsw.Connection, vector: bytes, chunk_id: int, where: str, params: dict[str, Any]
) -> LegRank:
    nc = int(params["nc"])
    scanned_sql = (
        "WITH " + ", ".join(vector_index.vector_leg("1", exact=False)) + " SELECT id FROM vec ORDER BY r"
    )
    base = {"v": vector, "probes": params["probes"], "n": 10**9}
    scanned = [int(r[0]) for r in conn.execute(scanned_sql, base)]
    if chunk_id not in scanned:
        return LegRank(
            "vector", None, len(scanned), nc, None, f"not in the {params['probes']} vector lists scanned"
        )
    rank = scanned.index(chunk_id) + 1
    filtered_sql = (
        "WITH " + ", ".join(vector_index.vector_leg(where, exact=True)) + " SELECT id FROM vec ORDER BY r"
    )
    kept = [int(r[0]) for r in conn.execute(filtered_sql, {**params, **base})]
    filtered = kept.index(chunk_id) + 1 if chunk_id in kept else None
    return LegRank("vector", rank, len(scanned), nc, filtered, "L2 distance over normalised vectors")


def trace(
    conn: apsw.Connection,
    query: str,
    chunk_id: int,
    k: int,
    *,
    namespaces: Sequence[str] | None,
    now: Any,
    vector: bytes | None,
    probes: int,
    plan: FtsPlan,
    indexed: int,
    width: int = 1,
    widest: int = 16,
) -> SearchTrace:
    """The trace of ``search(query, k, deliverable=True, namespaces=namespaces, now=now)``
    for the row ``chunk_id`` (caller holds the connection's lock): the same full-text plan
    (``plan``: the query's informative terms), the same widening from ``width`` while the
    filters leave fewer than ``k`` rows, and the exact form past ``widest``."""
    base = max(k * 8, 80)
    params: dict[str, Any] = {"k": k, "n": max(k * 4, 40), "nc": base}
    clauses: list[str] = []
    sql.scope_filter(namespaces, params, clauses, indexed=False)
    sql.deliverable_filter(False, now, params, clauses)
    where = " AND ".join(clauses) or "1"
    expression = plan.expression
    if expression is None and vector is None:
        return SearchTrace(
            query, k, "none", None, (), (LegRank("fts", None, 0, 0, None, "the query has no word"),)
        )
    if vector is not None:
        params["v"] = vector
        params["probes"] = probes
        params["chance"] = vector_index.chance_similarity(conn, vector, indexed_rows(conn))
    params["q"] = expression
    params["ideal"] = max(plan.ideal, 1e-6)
    lifted = {**params, "k": params["n"] * _LIFT}
    form = "fast"
    while True:
        if width > widest:
            form = "exact"
            rows = [
                int(r[0]) for r in conn.execute(sql.search_sql(expression, vector, where, exact=True), lifted)
            ]
            break
        lifted["nc"] = params["nc"] = base * width
        statement = sql.search_sql(expression, vector, where, exact=False)
        # search's own cut (k rows) decides whether it widens; the lifted list is the evidence
        kept = conn.execute(statement, {**lifted, "k": k}).fetchall()
        if len(kept) >= k or not clauses or indexed <= base * width:
            rows = [int(r[0]) for r in conn.execute(statement, lifted)]
            break
        width *= 4
    legs = []
    if expression is not None:
        legs.append(_fts_leg(conn, expression, chunk_id, where, params))
    if vector is not None:
        legs.append(_vector_leg(conn, vector, chunk_id, where, params))
    rank = rows.index(chunk_id) + 1 if chunk_id in rows else None
    return SearchTrace(query, k, form, rank, tuple(str(i) for i in rows[:k]), tuple(legs))
