"""Where one row ranked for one query in the embedded store's search: the evidence ``explain``
gives for "never retrieved".

It fuses the very legs ``search`` reads (``legs``: the same depth for the same ``k``, the
same widening), with the final cut lifted, so the row's place in the fused list is the place
that search gave it. Then, per leg, the row's rank among the leg's candidates before any
filter and among those that pass the filters: full text by BM25 over every match, the vector
leg among every row in scope (scan form) or the vectors its probed lists hold (index form).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from contextplane.store import fusion, legs, migrate, sql, vector_index
from contextplane.store.protocol import LegRank, SearchTrace
from contextplane.store.query_terms import FtsPlan


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


def _scan_leg(
    conn: apsw.Connection,
    chunk_id: int,
    scope_where: str,
    scan_where: str,
    params: dict[str, Any],
    n: int,
) -> LegRank:
    """The scan form's evidence: every in-scope row was compared, so the row's rank among the
    rows in scope that pass the filters is exact; its rank before the filters is among every
    row in scope."""
    ordered = (
        "WITH qv AS (SELECT vec_normalize(:v) AS v) SELECT c.id FROM chunks AS c CROSS JOIN chunks_vec AS cv "
        "ON cv.chunk_id = c.id WHERE {w} ORDER BY vec_distance_l2(cv.embedding, (SELECT v FROM qv)), c.id"
    )
    everyone = [int(r[0]) for r in conn.execute(ordered.format(w=scope_where), params)]
    if chunk_id not in everyone:
        return LegRank("vector", None, len(everyone), n, None, "it has no vector (or is out of scope)")
    kept = [int(r[0]) for r in conn.execute(ordered.format(w=scan_where), params)]
    filtered = kept.index(chunk_id) + 1 if chunk_id in kept else None
    return LegRank(
        "vector", everyone.index(chunk_id) + 1, len(everyone), n, filtered,
        "exact cosine over every row in scope",
    )


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
    found: Sequence[legs.Leg],
    scan: bool,
) -> SearchTrace:
    """The trace of ``search(query, k, deliverable=True, namespaces=namespaces, now=now)``
    for the row ``chunk_id`` (caller holds the connection's lock): ``found`` are the legs that
    search read (``legs``, same depth, same widening), so the fused list here is search's own;
    the row's rank in it is reported even past ``k``."""
    n = legs.depth(k)
    filters = sql.search_filters(namespaces, now=now)
    where, scan_where, scope_where = filters.where, filters.scan_where, filters.scope_where
    params: dict[str, Any] = {
        **filters.params, "k": k, "n": n, "nc": 2 * n * max((leg.width for leg in found), default=1)
    }
    expression = plan.expression
    if expression is None and vector is None:
        return SearchTrace(
            query, k, "none", None, (), (LegRank("fts", None, 0, 0, None, "the query has no word"),)
        )
    fused = [key for key, _ in fusion.fuse([leg.ids for leg in found])]
    form = "exact" if any(leg.form == "exact" for leg in found) else "fast"
    evidence = []
    if expression is not None:
        evidence.append(_fts_leg(conn, expression, chunk_id, where, {**params, "q": expression}))
    if vector is not None:
        params["v"] = vector
        params["probes"] = probes
        if scan:
            evidence.append(_scan_leg(conn, chunk_id, scope_where, scan_where, params, n))
        else:
            evidence.append(_vector_leg(conn, vector, chunk_id, where, params))
    rank = fused.index(chunk_id) + 1 if chunk_id in fused else None
    return SearchTrace(query, k, form, rank, tuple(str(i) for i in fused[:k]), tuple(evidence))
