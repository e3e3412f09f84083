"""The in-memory reference store's reads: ``list_chunks``, ``count_chunks``, ``search`` and
``trace_search`` over a dict of rows, through the shared read spec (``ChunkReads``). Search is the
IDF share of the query's meaningful words a row holds (see ``contextplane.backends.memory``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from contextplane.backends.spec import (
    ChunkReads,
    ListQuery,
    Scopes,
    SearchOptions,
    SearchTracing,
)
from contextplane.errors import ValidationError
from contextplane.memory.model import (
    MemoryChunk,
    parse_timestamp,
    validate_delivery_policy,
    validate_memory_kind,
    validate_review_state,
    validate_text,
)
from contextplane.store.protocol import LegRank, SearchHit, SearchTrace
from contextplane.store.query_terms import fts5_idf, meaningful_words

_WORD = re.compile(r"\w+")


def _window(
    occurred_after: datetime | str | None, occurred_before: datetime | str | None
) -> Callable[[MemoryChunk], bool]:
    """The event-time filter: ``[occurred_after, occurred_before)``; no event time, no window."""
    after = None if occurred_after is None else parse_timestamp(occurred_after, "occurred_after")
    before = None if occurred_before is None else parse_timestamp(occurred_before, "occurred_before")
    if after is None and before is None:
        return lambda _c: True

    def inside(c: MemoryChunk) -> bool:
        at = c.occurred_at
        return at is not None and (after is None or at >= after) and (before is None or at < before)

    return inside


def _scored(query: str, rows: Sequence[MemoryChunk]) -> list[tuple[float, MemoryChunk]]:
    """(relevance, row) for the rows holding a meaningful word of ``query``, best first.

    Relevance has the embedded store's meaning (``contextplane.store.query_terms``): the IDF
    share of the query's meaningful words (function words never count) that the row holds,
    with the IDF counted over every row (as a full-text index counts). A word ending in ``*``
    matches by prefix. No term-frequency factor and no "too common" cut: small on purpose."""
    terms = [t.strip('"*') + ("*" if t.endswith("*") else "") for t in meaningful_words(query)]
    if not terms or not rows:
        return []
    bags = [(c, {w.lower() for w in _WORD.findall(c.content + " " + c.heading)}) for c in rows]

    def holds(bag: set[str], term: str) -> bool:
        return any(w.startswith(term[:-1]) for w in bag) if term.endswith("*") else term in bag

    frequency = {t: sum(holds(bag, t) for _, bag in bags) for t in terms}
    weight = {t: fts5_idf(len(rows), n) for t, n in frequency.items() if n}
    ideal = sum(weight.values())
    scored = []
    for c, bag in bags:
        matched = [t for t in weight if holds(bag, t)]
        if matched:
            scored.append((min(1.0, sum(weight[t] for t in matched) / ideal), len(matched), c))
    scored.sort(key=lambda item: (-item[0], -item[1], int(item[2].id)))
    return [(relevance, c) for relevance, _, c in scored]


class MemoryReads(ChunkReads, SearchTracing):
    """The reads of ``InMemoryKnowledgeStore`` (and of its frozen views), over ``_rows``."""

    _rows: dict[str, MemoryChunk]
    _lock: threading.RLock

    def get(self, chunk_id: str) -> MemoryChunk | None:
        return self._rows.get(chunk_id) if isinstance(chunk_id, str) else None

    def _deliverable(self, c: MemoryChunk, now: datetime | None, include_superseded: bool = False) -> bool:
        if include_superseded and c.is_superseded:
            return c.review_state != "rejected" and not c.is_expired(now)
        return c.is_deliverable(now)

    def _list(self, query: ListQuery, on: Any) -> list[MemoryChunk]:
        """``list_chunks`` (``ChunkReads``): the filters in Python, oldest first."""
        q = query
        offset, namespace, namespaces, now = q.offset, q.namespace, q.namespaces, q.now
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValidationError(f"offset: expected a non-negative whole number, got {offset!r}")
        kind = validate_memory_kind(q.memory_kind) if q.memory_kind is not None else None
        in_window = _window(q.occurred_after, q.occurred_before)
        review = validate_review_state(q.review_state) if q.review_state is not None else None
        policy = validate_delivery_policy(q.delivery_policy) if q.delivery_policy is not None else None
        with self._lock:
            rows = sorted(self._rows.values(), key=lambda c: int(c.id))
        out = [
            c
            for c in rows
            if (kind is None or c.memory_kind == kind)
            and (review is None or c.review_state == review)
            and (policy is None or c.effective_delivery_policy == policy)
            and (namespace is None or c.namespace == namespace)
            and (namespaces is None or c.namespace in namespaces)
            and in_window(c)
            and (not q.deliverable or self._deliverable(c, now))
        ][offset:]
        return out if q.limit is None else out[: q.limit]

    def _following(
        self, chunk_ids: list[str], deliverable: bool, now: datetime | None, on: Any
    ) -> dict[str, MemoryChunk]:
        """``following`` (``ChunkReads``): each id's next row in its scope from the same source,
        in id order."""
        with self._lock:
            rows = sorted(self._rows.values(), key=lambda c: int(c.id))
        found: dict[str, MemoryChunk] = {}
        for chunk_id in chunk_ids:
            this = self.get(chunk_id)
            if this is None:
                continue
            after = int(this.id)
            found_next = next(
                (
                    c
                    for c in rows
                    if int(c.id) > after
                    and c.namespace == this.namespace
                    and c.source_type == this.source_type
                    and c.source == this.source
                    and (not deliverable or self._deliverable(c, now))
                ),
                None,
            )
            if found_next is not None:
                found[chunk_id] = found_next
        return found

    def _count(self, query: ListQuery, on: Any) -> int:
        return len(self._list(query, on))

    def _search(self, query: str, k: int, options: SearchOptions, on: Any, vector: Any) -> list[SearchHit]:
        """``search`` (``ChunkReads``): every row scored (``_scored``), then filtered; there is
        no vector leg, so ``full_text`` changes nothing."""
        validate_text(query, "query", storable=False)
        in_window = _window(options.occurred_after, options.occurred_before)
        namespaces, now = options.namespaces, options.now
        with self._lock:
            rows = list(self._rows.values())
        scored = [
            (relevance, c)
            for relevance, c in _scored(query, rows)
            if (namespaces is None or c.namespace in namespaces)
            and in_window(c)
            and (not options.deliverable or self._deliverable(c, now, options.include_superseded))
        ]
        return [SearchHit(c, s, r, relevance=s) for r, (s, c) in enumerate(scored[:k], start=1)]

    def _trace(
        self, query: str, chunk_id: str, k: int, namespaces: Scopes, now: datetime | None, on: Any
    ) -> SearchTrace:
        """``trace_search`` (``SearchTracing``): where ``chunk_id`` ranked for ``query``: the IDF
        share of its meaningful words is the one leg, every row a candidate; the filters are the
        search's."""
        validate_text(query, "query")
        with self._lock:
            rows = list(self._rows.values())
        scored = _scored(query, rows)
        every = [c.id for _, c in scored]
        kept = [
            c.id
            for _, c in scored
            if (namespaces is None or c.namespace in namespaces) and self._deliverable(c, now)
        ]
        leg = LegRank(
            "overlap",
            every.index(chunk_id) + 1 if chunk_id in every else None,
            len(every),
            len(every),
            kept.index(chunk_id) + 1 if chunk_id in kept else None,
            "" if chunk_id in every else "no meaningful word of the query occurs in it",
        )
        rank = kept.index(chunk_id) + 1 if chunk_id in kept else None
        return SearchTrace(query, k, "exact", rank, tuple(kept[:k]), (leg,))
