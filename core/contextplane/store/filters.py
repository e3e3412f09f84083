"""The filter spec every SQL memory store renders: which rows ``list_chunks``, ``count_chunks`` and
``search`` admit, written once and rendered by a ``Dialect`` (SQLite's ``:x`` parameters and
text timestamps, psycopg's ``%(x)s`` and ``timestamptz``).

Why one spec: the embedded store and the PostgreSQL store wrote each clause twice (the scope
list, the D6 deliverable filter, the event-time window, the listing's kind, review and policy
filters and its paging), and a rule changed in one and forgotten in the other is two stores
that deliver different rows. A dialect says only how its SQL spells a parameter, a false
condition, an inequality, a prefix and a page, and how a value travels; what is filtered, in
which order the clauses stand and how every value is validated is here.
Everything here builds text and parameters; the store runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

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
from contextplane.store.columns import as_id


class ListQuery(NamedTuple):
    """The filters of one ``list_chunks`` / ``count_chunks`` call, as the caller gave them
    (validated when rendered, so a bad value is named whatever the store)."""

    deliverable: bool = False
    memory_kind: str | None = None
    review_state: str | None = None
    delivery_policy: str | None = None
    namespace: str | None = None
    namespaces: Sequence[str] | None = None
    limit: int | None = None
    now: datetime | None = None
    occurred_after: datetime | str | None = None
    occurred_before: datetime | str | None = None
    offset: int = 0


class Dialect:
    """How one SQL dialect spells the filters. The base is SQLite's; a dialect overrides what
    it spells otherwise (``contextplane_postgres.sql.POSTGRES``)."""

    #: A condition no row meets (an empty scope list).
    false = "0"
    not_equal = "!="

    def mark(self, name: str) -> str:
        """The placeholder of the parameter ``name``."""
        return f":{name}"

    def head(self, expr: str, n: int) -> str:
        """The first ``n`` characters of ``expr``."""
        return f"substr({expr}, 1, {n})"

    def time(self, value: datetime) -> Any:
        """A timestamp parameter (SQLite stores ISO text)."""
        return format_timestamp(value)

    def text(self, value: str) -> Any:
        """A text parameter, as the dialect stores text."""
        return value

    def scope(self, names: list[str], params: dict[str, Any], *, indexed: bool) -> str:
        """The clause admitting rows in ``names`` (never empty); ``indexed=False`` keeps the
        planner off the namespace index."""
        marks = []
        for i, name in enumerate(names):
            params[f"ns{i}"] = name
            marks.append(self.mark(f"ns{i}"))
        column = "c.namespace" if indexed else "+c.namespace"
        return f"{column} IN ({', '.join(marks)})"

    def key(self, chunk_id: object) -> int | None:
        """The row key an id names, or None when it can name no row of this store."""
        return as_id(chunk_id)

    def following(self, select: str, marks: Sequence[str], clauses: Sequence[str]) -> str:
        """``following``'s statement over the rows ``h`` whose ids are ``marks``: each one's id,
        then ``select`` of the first row ``c`` after it in its scope that meets ``clauses``. A
        correlated lookup per id: SQLite's scope index holds the rowid, so ``namespace = ? AND
        rowid > ?`` is one step down it."""
        where = " AND ".join(["c.namespace = h.namespace", "c.id > h.id", *clauses])
        nearest = f"SELECT c.id FROM chunks AS c WHERE {where} ORDER BY c.id LIMIT 1"
        return (
            f"SELECT f.after, {select} FROM (SELECT h.id AS after, ({nearest}) AS next_id "
            f"FROM chunks AS h WHERE h.id IN ({', '.join(marks)})) AS f JOIN chunks AS c ON c.id = f.next_id"
        )

    def page(self, limit: int | None, offset: int, params: dict[str, Any]) -> str:
        """``LIMIT`` / ``OFFSET`` (checked whole numbers, written into the statement)."""
        text = "" if limit is None else f" LIMIT {limit}"
        if offset:
            text += f"{'' if limit is not None else ' LIMIT -1'} OFFSET {offset}"
        return text


#: The embedded store's dialect.
SQLITE = Dialect()


def check_whole(value: object, name: str) -> int:
    """``limit`` and ``offset``: a non-negative whole number."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{name}: expected a non-negative whole number, got {value!r}")
    return value


def scope_filter(
    dialect: Dialect,
    namespaces: Sequence[str] | None,
    params: dict[str, Any],
    clauses: list[str],
    *,
    indexed: bool = True,
) -> None:
    """Only rows in ``namespaces`` (None: any scope; empty: none). ``indexed=False`` (search)
    keeps the planner off the namespace index where the dialect can say so: a search is driven
    by its leg's candidates, and scanning every row of the global scope through the index made
    a scoped search at 100k rows cost 40-100 ms instead of about 1 (SQLite)."""
    if namespaces is None:
        return
    if isinstance(namespaces, str):
        raise ValidationError("namespaces: expected a list of scopes, got a single string")
    names = [dialect.text(validate_text(n, "namespaces")) for n in namespaces]
    if not names:
        clauses.append(dialect.false)
        return
    clauses.append(dialect.scope(names, params, indexed=indexed))


def deliverable_filter(
    dialect: Dialect,
    include_superseded: bool,
    now: datetime | None,
    params: dict[str, Any],
    clauses: list[str],
) -> None:
    """Only rows the model may be shown (D6): not rejected, not expired, not invalidated
    (superseded ones admitted when ``include_superseded``)."""
    params["now"] = dialect.time(now or utc_now())
    clauses.append(f"(c.review_state IS NULL OR c.review_state {dialect.not_equal} 'rejected')")
    clauses.append(f"(c.expires_at IS NULL OR c.expires_at > {dialect.mark('now')})")
    if include_superseded:
        head = dialect.head("c.invalidation_reason", len(SUPERSEDED_PREFIX))
        clauses.append(f"(c.invalidated_at IS NULL OR {head} = '{SUPERSEDED_PREFIX}')")
    else:
        clauses.append("c.invalidated_at IS NULL")


def event_time_filter(
    dialect: Dialect,
    occurred_after: datetime | str | None,
    occurred_before: datetime | str | None,
    params: dict[str, Any],
    clauses: list[str],
) -> None:
    """Only rows whose event time lies in ``[occurred_after, occurred_before)``: half open, so
    consecutive windows never hold a row twice. A row without an event time is in no window."""
    if occurred_after is not None:
        params["occurred_after"] = dialect.time(parse_timestamp(occurred_after, "occurred_after"))
        clauses.append(f"c.occurred_at >= {dialect.mark('occurred_after')}")
    if occurred_before is not None:
        params["occurred_before"] = dialect.time(parse_timestamp(occurred_before, "occurred_before"))
        clauses.append(f"c.occurred_at < {dialect.mark('occurred_before')}")


def list_filters(dialect: Dialect, query: ListQuery, params: dict[str, Any]) -> list[str]:
    """The clauses of ``list_chunks``: ``delivery_policy="retrieved"`` also matches NULL;
    ``review_state="pending"`` also matches NULL (legacy rows)."""
    clauses: list[str] = []
    if query.memory_kind is not None:
        params["kind"] = validate_memory_kind(query.memory_kind)
        clauses.append(f"c.memory_kind = {dialect.mark('kind')}")
    if query.review_state is not None:
        params["review"] = validate_review_state(query.review_state)
        review = dialect.mark("review")
        clauses.append(
            f"(c.review_state = {review} OR c.review_state IS NULL)"
            if query.review_state == "pending"
            else f"c.review_state = {review}"
        )
    if query.delivery_policy is not None:
        params["policy"] = validate_delivery_policy(query.delivery_policy)
        policy = dialect.mark("policy")
        if params["policy"] == "always":  # a literal, so a partial index on it applies
            clauses.append("c.delivery_policy = 'always'")
        else:
            clauses.append(
                f"(c.delivery_policy = {policy} OR c.delivery_policy IS NULL)"
                if query.delivery_policy == "retrieved"
                else f"c.delivery_policy = {policy}"
            )
    if query.namespace is not None:
        params["namespace"] = dialect.text(validate_text(query.namespace, "namespace"))
        clauses.append(f"c.namespace = {dialect.mark('namespace')}")
    scope_filter(dialect, query.namespaces, params, clauses)
    event_time_filter(dialect, query.occurred_after, query.occurred_before, params, clauses)
    if query.deliverable:
        deliverable_filter(dialect, False, query.now, params, clauses)
    return clauses


def list_sql(
    dialect: Dialect, query: ListQuery, select: str, *, count: bool = False
) -> tuple[str, dict[str, Any]]:
    """The statement and parameters of ``list_chunks`` (``select``: the store's select list):
    rows matching every filter, oldest first, from the ``offset``-th (``count``: how many
    match, for ``count_chunks``)."""
    params: dict[str, Any] = {}
    clauses = list_filters(dialect, query, params)
    sql = f"SELECT {'count(*)' if count else select} FROM chunks AS c"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    if count:
        return sql, params
    limit = None if query.limit is None else check_whole(query.limit, "limit")
    return sql + " ORDER BY c.id" + dialect.page(limit, check_whole(query.offset, "offset"), params), params


def following_sql(
    dialect: Dialect, chunk_ids: Sequence[str], deliverable: bool, now: datetime | None, select: str
) -> tuple[str | None, dict[str, Any]]:
    """The statement of ``following``: for each id that names a row, that id's key and the
    cells of the first row written after it (ids ascend in write order) in its scope from the
    same source (``source_type`` and ``source``),
    deliverable at ``now`` when ``deliverable``; None when no id can name a row. One statement,
    a lookup per id that a (namespace, id) index answers in a step, written by the dialect
    (``Dialect.following``)."""
    keys = sorted({key for i in chunk_ids if (key := dialect.key(i)) is not None})
    if not keys:
        return None, {}
    params: dict[str, Any] = {}
    marks = []
    for n, key in enumerate(keys):
        params[f"id{n}"] = key
        marks.append(dialect.mark(f"id{n}"))
    # the same conversation: a note extracted from it, or another writer's row written in
    # between, is stepped over
    clauses = ["c.source_type = h.source_type", "c.source = h.source"]
    if deliverable:
        deliverable_filter(dialect, False, now, params, clauses)
    return dialect.following(select, marks, clauses), params
