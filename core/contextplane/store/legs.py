"""The embedded store's two search legs, each a ranking of the deliverable rows in scope: full
text by BM25, and vectors by cosine similarity. ``search`` fuses them (``fusion``); ``ranks``
re-runs them for ``explain``, so both see the same leg rankings.

Why each leg ranks on its own, deep, before any fusion: a row must be found by a leg to be
fused at all. The previous single statement took each leg's best ``4k`` (``k`` = 8 by
default) and the vector leg scanned 8 IVF lists: on real conversations a row that exact cosine
ranks first in its scope was often "not in the 8 vector lists scanned".

Vector leg, two forms:
- *Scan*: when the rows in scope are few (at most ``EXACT_VECTOR_MAX``; a conversation, a
  project), every in-scope vector is compared, driven by the scope index: exact neighbours, at
  the cost of one distance per row in scope.
- *Index*: otherwise the IVF index (``vector_index``): the nearest ``probes`` lists, best
  ``nc`` unfiltered, then filtered, widened like the full-text leg when filters starve it.

Full-text leg: FTS5's own top ``nc`` matches, then filtered; when the filters (a small scope in
a big store, many rejected rows) leave fewer than the leg's depth, ``nc`` is widened 4x, then
16x, then every match is filtered (exact). The width that worked is kept per scope set by the
store, so the next turn in the same scopes starts there.
"""

from __future__ import annotations

from typing import Any, Final

import apsw
import attrs

from contextplane.store import sql, vector_index, vector_matrix

#: In-scope rows at or below which the vector leg compares every one (the scan form).
EXACT_VECTOR_MAX: Final[int] = 4096
#: The widest fast form: 16 times the base candidates before filtering every one.
WIDEST: Final[int] = 16


def depth(k: int) -> int:
    """How deep each leg ranks for a search of ``k`` rows: twice ``k`` (at least 40), so a row
    the fused list keeps near ``k`` was seen by both legs when both hold it."""
    return max(2 * k, 40)


@attrs.frozen
class Leg:
    """One leg's ranking: ``ids`` best first, ``values`` its lexical relevance (full text) or
    cosine similarity (vectors) per id; ``form`` is how it was read ("fast", "exact", "scan")
    and ``width`` the candidate widening it needed."""

    name: str
    ids: tuple[int, ...]
    values: dict[int, float]
    form: str
    width: int


def _widened(
    conn: apsw.Connection,
    fast: str,
    exact: str,
    params: dict[str, Any],
    *,
    base: int,
    width: int,
    want: int,
    filtered: bool,
    reachable: int,
) -> tuple[list[Any], str, int]:
    """Run the fast form from ``width`` up, widening 4x while the filters leave fewer than
    ``want`` rows and the leg holds more than it looked at; past ``WIDEST``, the exact form."""
    while True:
        if width > WIDEST:
            return conn.execute(exact, params).fetchall(), "exact", WIDEST
        params["nc"] = base * width
        rows = conn.execute(fast, params).fetchall()
        if len(rows) >= want or not filtered or reachable <= base * width:
            return rows, "fast", width
        width *= 4


def fts_leg(
    conn: apsw.Connection,
    where: str,
    params: dict[str, Any],
    n: int,
    *,
    width: int,
    filtered: bool,
    postings: int,
) -> Leg:
    """The best ``n`` deliverable full-text matches of ``params["q"]`` (caller sets ``q`` and
    ``ideal``; BM25 order, ties by id)."""
    args = {**params, "n": n}
    fast, exact = fts_statements(where)
    rows, form, used = _widened(
        conn, fast, exact, args, base=2 * n, width=width, want=n, filtered=filtered, reachable=postings
    )
    return Leg("fts", tuple(int(r[0]) for r in rows), {int(r[0]): float(r[2]) for r in rows}, form, used)


def fts_statements(where: str) -> tuple[str, str]:
    """The full-text leg's fast and exact statements (see the module docstring)."""
    return sql.fts_leg(where, exact=False, limit=":n"), sql.fts_leg(where, exact=True, limit=":n")


def vector_statements(where: str) -> tuple[str, str]:
    """The vector leg's index form: fast and exact statements (``vector_index.vector_leg``)."""
    select = " SELECT id, sim FROM vec ORDER BY r"
    return (
        "WITH " + ", ".join(vector_index.vector_leg(where, exact=False)) + select,
        "WITH " + ", ".join(vector_index.vector_leg(where, exact=True)) + select,
    )


def scope_rows(conn: apsw.Connection, scope_where: str, params: dict[str, Any], cap: int) -> int:
    """How many rows ``scope_where`` (an indexed scope filter on ``chunks AS c``) admits, counted
    no further than ``cap + 1``: enough to choose the vector leg's form, at a bounded cost."""
    found: Any = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM chunks AS c WHERE {scope_where} LIMIT {int(cap) + 1})", params
    ).fetchone()
    return int(found[0])


def scan_statement(where: str) -> str:
    """The vector leg's scan form in SQL (without numpy or past ``vector_matrix.MATRIX_MAX``)."""
    return (
        "WITH qv AS (SELECT vec_normalize(:v) AS v) SELECT id, 1.0 - d * d / 2.0 AS sim FROM ("
        "SELECT c.id AS id, vec_distance_l2(cv.embedding, (SELECT v FROM qv)) AS d FROM chunks AS c "
        f"CROSS JOIN chunks_vec AS cv ON cv.chunk_id = c.id WHERE {where}) ORDER BY d, id LIMIT :n"
    )


def vector_leg(
    conn: apsw.Connection,
    where: str,
    scan_where: str,
    params: dict[str, Any],
    n: int,
    *,
    scan: bool,
    width: int,
    filtered: bool,
    vectors: int,
    held: tuple[Any, Any] | None = None,
    listed: tuple[Any, Any] | None = None,
) -> Leg:
    """The ``n`` deliverable rows nearest to ``params["v"]`` (caller sets ``v``, and ``probes``
    for the index form). ``scan``: compare every row ``scan_where`` admits (``where`` with the
    scope filter free to use the scope index), from ``held`` (ids and their similarities, from
    the store's ``vector_matrix``) when given, else in SQL; else the IVF index: from ``listed``
    (the probed lists' ids and similarities, from the store's ``vector_lists``) when given,
    else in SQL."""
    args = {**params, "n": n}
    if scan:
        if held is not None:
            ids, sims = held
            found = vector_matrix.scan(conn, ids, sims, scan_where, params, n)
            return Leg("vector", tuple(k for k, _ in found), dict(found), "scan", 1)
        scanned: list[Any] = conn.execute(scan_statement(scan_where), args).fetchall()
        return Leg(
            "vector", tuple(int(r[0]) for r in scanned), {int(r[0]): float(r[1]) for r in scanned}, "scan", 1
        )
    if listed is not None:
        ids, sims = listed
        # the index form's first width, as in SQL: the scope filter keeps most candidates of a
        # turn's scopes, and each costs a row lookup
        found = vector_matrix.admitted_in_order(conn, ids, sims, where, params, n)
        return Leg("vector", tuple(k for k, _ in found), dict(found), "held", 1)
    fast, exact = vector_statements(where)
    rows, form, used = _widened(
        conn, fast, exact, args, base=2 * n, width=width, want=n, filtered=filtered, reachable=vectors
    )
    return Leg("vector", tuple(int(r[0]) for r in rows), {int(r[0]): float(r[1]) for r in rows}, form, used)
