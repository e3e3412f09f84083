"""The memory browser's reads and writes, over the public ``KnowledgeStore`` protocol only.

Why only the protocol: the console serves whatever backend the agent uses (the embedded
SQLite file, or a plugin's), so it may not reach past ``list_chunks``, ``search``, ``get`` and
the D7 lifecycle calls. What that costs, and how it is kept cheap:

- **Pending first.** Review is the console's main job, so the list shows pending rows, then
  confirmed, then rejected, each oldest first (a review queue). That is one ``list_chunks``
  per review state, each with ``limit`` set, so the first page reads about one page of rows.
- **Filters the protocol has** (kind, delivery policy, review state, scope, and "active",
  which is ``deliverable`` for the non-rejected states) go to the store. **Filters it lacks**
  (trust tier, the other lifecycle states) are applied here, on batches that grow fourfold,
  so a rare value costs a scan but a common one costs a page.
- **Pagination** is by offset. A store that counts (``count_chunks``) and applies every
  filter reads a deep page at its place (``list_chunks(offset=...)``, each review state before
  it skipped by its count); otherwise page ``n`` reads the ``n`` pages before it (measured in
  bench/console_bench.py).
- **Search** is the store's own full-text (and vector) search over every row, deliverable or
  not, best ``SEARCH_LIMIT`` matches, then filtered and ordered pending first (relevance
  within a state).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs

from contextplane import KnowledgeStore, MemoryChunk
from contextplane.memory.model import (
    DELIVERY_POLICIES,
    MEMORY_KINDS,
    REVIEW_STATES,
    utc_now,
    validate_namespace,
)
from contextplane_console.errors import refuse
from contextplane_console.params import ANY, choice, whole

#: Lifecycle states (ADR D7), one per row: ``superseded`` (replaced by a newer row),
#: ``invalidated`` (for another reason), ``expired`` (past ``expires_at``), else ``active``.
LIFECYCLE_STATES: Final[tuple[str, ...]] = ("active", "expired", "superseded", "invalidated")
#: The order review states are listed in: what needs a decision first.
REVIEW_ORDER: Final[tuple[str, ...]] = ("pending", "confirmed", "rejected")
TRUST_TIERS: Final[tuple[str, ...]] = ("1", "2", "3")

DEFAULT_PAGE: Final[int] = 50
MAX_PAGE: Final[int] = 500
#: The most matches one search considers (then filtered and paged).
SEARCH_LIMIT: Final[int] = 1000
#: The longest supersession chain followed (a cycle would be a store bug; never loop on it).
MAX_CHAIN: Final[int] = 50


def lifecycle_state(chunk: MemoryChunk, now: datetime | None = None) -> str:
    if chunk.is_superseded:
        return "superseded"
    if chunk.invalidated_at is not None:
        return "invalidated"
    if chunk.is_expired(now):
        return "expired"
    return "active"


def chunk_json(chunk: MemoryChunk, now: datetime | None = None) -> dict[str, Any]:
    """A row for the JSON API: ``MemoryChunk.to_dict`` plus its lifecycle state."""
    out = chunk.to_dict()
    out["lifecycle"] = lifecycle_state(chunk, now)
    return out


@attrs.frozen
class MemoryFilter:
    """What the list shows. None means "no filter"; ``scope`` ``""`` is the global scope."""

    memory_kind: str | None = None
    delivery_policy: str | None = None
    review_state: str | None = None
    scope: str | None = None
    trust_tier: int | None = None
    lifecycle: str | None = None
    query: str | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> MemoryFilter:
        """Read the filters from query parameters (``any`` or empty: no filter; ``scope=global``:
        the global scope), refusing a bad value by its parameter name."""
        tier = choice(params, "trust_tier", TRUST_TIERS)
        raw_scope = params.get("scope")
        scope: str | None = None
        if raw_scope is not None and raw_scope.strip() not in ANY:
            scope = "" if raw_scope.strip() == "global" else raw_scope
            if scope:
                try:
                    validate_namespace(scope, "scope")
                except ValueError as exc:
                    raise refuse(
                        "scope", str(exc).removeprefix("scope: ") + ", 'global' or 'any'"
                    ) from None
        query = params.get("q")
        return cls(
            memory_kind=choice(params, "memory_kind", MEMORY_KINDS),
            delivery_policy=choice(params, "delivery_policy", DELIVERY_POLICIES),
            review_state=choice(params, "review_state", REVIEW_STATES),
            scope=scope,
            trust_tier=int(tier) if tier is not None else None,
            lifecycle=choice(params, "lifecycle", LIFECYCLE_STATES),
            query=query.strip() if query and query.strip() else None,
        )

    def as_params(self) -> dict[str, str]:
        """The filters as query parameters (what ``from_params`` reads back)."""
        out: dict[str, str] = {}
        for name in ("memory_kind", "delivery_policy", "review_state", "lifecycle"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.scope is not None:
            out["scope"] = self.scope or "global"
        if self.trust_tier is not None:
            out["trust_tier"] = str(self.trust_tier)
        if self.query is not None:
            out["q"] = self.query
        return out

    def keeps(self, chunk: MemoryChunk, now: datetime) -> bool:
        """Every filter, applied to one row (the ones the store also applied cost nothing)."""
        return (
            (self.memory_kind is None or chunk.memory_kind == self.memory_kind)
            and (self.delivery_policy is None or chunk.effective_delivery_policy == self.delivery_policy)
            and (self.review_state is None or chunk.review_state == self.review_state)
            and (self.scope is None or chunk.namespace == self.scope)
            and (self.trust_tier is None or chunk.trust_tier == self.trust_tier)
            and (self.lifecycle is None or lifecycle_state(chunk, now) == self.lifecycle)
        )


@attrs.frozen
class Page:
    """One page of the list, and where the next one starts (None: this is the last)."""

    items: tuple[MemoryChunk, ...]
    offset: int
    limit: int
    next_offset: int | None
    #: For a search: whether the store had more matches than ``SEARCH_LIMIT`` considered.
    search_truncated: bool = False


def page_params(params: Mapping[str, str]) -> tuple[int, int]:
    offset = whole(params, "offset", default=0, lo=0)
    limit = whole(params, "limit", default=DEFAULT_PAGE, lo=1, hi=MAX_PAGE)
    assert offset is not None and limit is not None
    return offset, limit


def list_page(
    store: KnowledgeStore, flt: MemoryFilter, offset: int, limit: int, now: datetime | None = None
) -> Page:
    """The rows at ``[offset, offset + limit)`` of the filtered list, pending first."""
    now = now or utc_now()
    want = offset + limit + 1  # one more than the page says whether a next page exists
    if flt.query is not None:
        hits = store.search(
            flt.query,
            SEARCH_LIMIT,
            deliverable=False,
            namespaces=None if flt.scope is None else [flt.scope],
            now=now,
        )
        kept = [h.chunk for h in hits if flt.keeps(h.chunk, now)]
        kept.sort(key=lambda c: REVIEW_ORDER.index(c.review_state))  # stable: relevance within a state
        rows = kept[:want]
        truncated = len(hits) >= SEARCH_LIMIT
    else:
        deep = _page_from_store(store, flt, offset, limit + 1, now)
        if deep is not None:
            more = len(deep) > limit
            return Page(tuple(deep[:limit]), offset, limit, offset + limit if more else None)
        rows = []
        for state in REVIEW_ORDER if flt.review_state is None else (flt.review_state,):
            need = want - len(rows)
            rows.extend(_take(_state_rows(store, flt, state, now, need), need))
            if len(rows) >= want:
                break
        truncated = False
    items = tuple(rows[offset : offset + limit])
    more = len(rows) > offset + limit
    return Page(items, offset, limit, offset + limit if more else None, truncated)


def _page_from_store(
    store: KnowledgeStore, flt: MemoryFilter, offset: int, n: int, now: datetime
) -> list[MemoryChunk] | None:
    """Up to ``n`` rows from the ``offset``-th, read at their place: when the store applies
    every filter and counts (``count_chunks``), a review state before the page is skipped by
    its count and the page read with ``list_chunks(offset=...)``, so a deep page costs a
    page, not the rows before it. None when the store cannot (then the rows before are read)."""
    count = getattr(store, "count_chunks", None)
    if not callable(count) or flt.trust_tier is not None or flt.lifecycle is not None:
        return None
    rows: list[MemoryChunk] = []
    skip = offset
    for state in REVIEW_ORDER if flt.review_state is None else (flt.review_state,):
        filters: dict[str, Any] = {
            "memory_kind": flt.memory_kind,
            "review_state": state,
            "delivery_policy": flt.delivery_policy,
            "namespace": flt.scope,
            "now": now,
        }
        if skip:
            held = int(count(**filters))
            if skip >= held:
                skip -= held
                continue
        rows.extend(store.list_chunks(**filters, limit=n - len(rows), offset=skip))
        skip = 0
        if len(rows) >= n:
            break
    return rows


def _take(rows: Iterator[MemoryChunk], n: int) -> list[MemoryChunk]:
    out: list[MemoryChunk] = []
    if n <= 0:
        return out
    for row in rows:
        out.append(row)
        if len(out) >= n:
            break
    return out


def _state_rows(
    store: KnowledgeStore, flt: MemoryFilter, state: str, now: datetime, need: int = 0
) -> Iterator[MemoryChunk]:
    """The rows of one review state that pass every filter, oldest first, read in growing
    batches (the protocol has no offset, so each batch re-reads the one before it). The first
    batch is the ``need`` rows wanted (at least 64): when the store applies every filter, a
    deep page is one read of the rows before it, not a series of re-reads growing to it."""
    # "active" is the store's "deliverable" for every state but rejected (never deliverable)
    deliverable = flt.lifecycle == "active" and state != "rejected"

    def fetch(n: int) -> Sequence[MemoryChunk]:
        return store.list_chunks(
            deliverable=deliverable,
            memory_kind=flt.memory_kind,
            review_state=state,
            delivery_policy=flt.delivery_policy,
            namespace=flt.scope,
            limit=n,
            now=now,
        )

    batch, seen = max(64, need), 0
    while True:
        rows = fetch(batch)
        for chunk in rows[seen:]:
            if flt.keeps(chunk, now):
                yield chunk
        if len(rows) < batch:
            return
        seen, batch = len(rows), batch * 4


def chain(store: KnowledgeStore, chunk: MemoryChunk) -> list[MemoryChunk]:
    """The supersession chain from ``chunk`` forward: it, the row that replaced it, and so on
    to the current version."""
    out = [chunk]
    seen = {chunk.id}
    current = chunk
    while current.superseded_by is not None and len(out) < MAX_CHAIN:
        nxt = store.get(current.superseded_by)
        if nxt is None or nxt.id in seen:
            break
        out.append(nxt)
        seen.add(nxt.id)
        current = nxt
    return out


def require(store: KnowledgeStore, chunk_id: str) -> MemoryChunk:
    """The row, or a 404 refusal naming the id."""
    chunk = store.get(chunk_id)
    if chunk is None:
        raise refuse("id", f"no memory with id {chunk_id!r}", status=404)
    return chunk


#: Review states a bulk action may set: the decisions (resetting to pending is per row).
BULK_STATES: Final[tuple[str, ...]] = ("confirmed", "rejected")
MAX_BULK: Final[int] = 1000


def bulk_review(store: KnowledgeStore, ids: Sequence[str], state: str, *, by: str) -> list[MemoryChunk]:
    """Set ``state`` on every row of ``ids``, recorded as done ``by`` the reviewer. Every id is
    checked first, so a bad selection changes nothing; the rows are then reviewed one by one
    (the protocol has no batch write)."""
    if state not in BULK_STATES:
        raise refuse("state", f"{state!r} is not one of {', '.join(BULK_STATES)}")
    if not ids:
        raise refuse("ids", "select at least one memory")
    if len(ids) > MAX_BULK:
        raise refuse("ids", f"at most {MAX_BULK} memories per request, got {len(ids)}")
    missing = [i for i in dict.fromkeys(ids) if store.get(i) is None]
    if missing:
        raise refuse("ids", f"no memory with id {', '.join(map(repr, missing))}; nothing was changed", 404)
    return [store.set_review_state(i, state, by=by) for i in dict.fromkeys(ids)]
