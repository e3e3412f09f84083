"""The read spec every memory store shares: ``list_chunks``, ``count_chunks`` and ``search`` with
their keywords written once (``ChunkReads``), over a store's own ``_list``, ``_count`` and
``_search``; for a SQL store, ``SQLReads`` renders the listing from the filter spec
(``filters``) in the store's dialect and reads rows with its row codec (``row_codec``).

Why: the embedded, PostgreSQL and in-memory stores each wrote the three signatures out (eleven
filters each) and the SQL stores the same listing bodies, so a filter added to one store was
a keyword the others refused. Backend authors import it from ``contextplane.backends.spec``;
it lives here because the embedded store needs it while ``contextplane.backends`` is still
being imported (as ``write_spec``). The ``KnowledgeStore`` protocol states the same signatures
as the contract; a test keeps them equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar, NamedTuple

from contextplane.errors import ValidationError
from contextplane.memory.model import MemoryChunk, parse_timestamp, validate_text
from contextplane.store.columns import SEARCH_K_MAX
from contextplane.store.filters import Dialect, ListQuery, following_sql, list_sql
from contextplane.store.protocol import SearchHit, SearchTrace

#: A scope allow-list as reads take it (None: any scope).
Scopes = Sequence[str] | None


class SearchOptions(NamedTuple):
    """The filters and switches of one ``search`` call, as the caller gave them."""

    deliverable: bool = True
    namespaces: Sequence[str] | None = None
    include_superseded: bool = False
    now: datetime | None = None
    occurred_after: datetime | str | None = None
    occurred_before: datetime | str | None = None
    full_text: bool = False


def read_now(now: object) -> datetime | None:
    """A read's ``now`` (the time the deliverable filter is evaluated at): None, or an aware
    datetime or ISO-8601 text with an offset, in UTC. Why checked here: a string reached the
    embedded store's SQL as an ``AttributeError`` and a naive time was read as UTC on one store
    and compared as local on another."""
    return None if now is None else parse_timestamp(now, "now")


def search_k(query: str, k: int) -> int:
    """Check a search's text and depth (a lone surrogate is searchable text, never stored) and
    cap the depth at what statements can ask for (``SEARCH_K_MAX``)."""
    validate_text(query, "query", storable=False)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValidationError(f"k: expected a whole number >= 1, got {k!r}")
    return min(k, SEARCH_K_MAX)


class ChunkReads:
    """``list_chunks``, ``count_chunks`` and ``search`` for a store that implements ``_list``,
    ``_count`` and ``_search``. ``_on`` is the store's view a read runs through (None: the store
    itself); ``_vector``, a query already embedded (an async search embeds on the loop)."""

    def list_chunks(
        self,
        *,
        deliverable: bool = False,
        memory_kind: str | None = None,
        review_state: str | None = None,
        delivery_policy: str | None = None,
        namespace: str | None = None,
        namespaces: Sequence[str] | None = None,
        limit: int | None = None,
        now: datetime | None = None,
        occurred_after: datetime | str | None = None,
        occurred_before: datetime | str | None = None,
        offset: int = 0,
        _on: Any = None,
    ) -> list[MemoryChunk]:
        """Rows matching every given filter, oldest first: at most ``limit`` from the
        ``offset``-th. ``delivery_policy="retrieved"`` also matches NULL;
        ``review_state="pending"`` also matches NULL (legacy rows). ``occurred_after`` /
        ``occurred_before``: only rows whose event time is in that half-open window (a row
        without an event time is in none)."""
        now = read_now(now)
        query = ListQuery(
            deliverable,
            memory_kind,
            review_state,
            delivery_policy,
            namespace,
            namespaces,
            limit,
            now,
            occurred_after,
            occurred_before,
            offset,
        )
        return self._list(query, _on)

    def count_chunks(
        self,
        *,
        deliverable: bool = False,
        memory_kind: str | None = None,
        review_state: str | None = None,
        delivery_policy: str | None = None,
        namespace: str | None = None,
        namespaces: Sequence[str] | None = None,
        now: datetime | None = None,
        occurred_after: datetime | str | None = None,
        occurred_before: datetime | str | None = None,
        _on: Any = None,
    ) -> int:
        """How many rows ``list_chunks`` with these filters returns without a limit (so a
        listing can say "50 of N", and a deep page can skip whole review states)."""
        now = read_now(now)
        query = ListQuery(
            deliverable,
            memory_kind,
            review_state,
            delivery_policy,
            namespace,
            namespaces,
            None,
            now,
            occurred_after,
            occurred_before,
        )
        return self._count(query, _on)

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        deliverable: bool = True,
        namespaces: Sequence[str] | None = None,
        include_superseded: bool = False,
        now: datetime | None = None,
        occurred_after: datetime | str | None = None,
        occurred_before: datetime | str | None = None,
        full_text: bool = False,
        _on: Any = None,
        _vector: Any = None,
    ) -> list[SearchHit]:
        """Ranked hits for ``query``, each with its relevance (0 to 1, see ``SearchHit``). Raw
        user text is never query syntax; function words and terms too common to inform are not
        scored. ``include_superseded`` admits superseded rows but still never rejected, expired
        or otherwise-invalidated ones. ``occurred_after`` / ``occurred_before`` keep only rows
        whose event time is in that half-open window, as ``list_chunks``. ``full_text`` searches
        without the vector leg, as a store without an embedder does (a turn's fallback when the
        embedder fails: ``EmbedderError``)."""
        now = read_now(now)
        options = SearchOptions(
            deliverable, namespaces, include_superseded, now, occurred_after, occurred_before, full_text
        )
        return self._search(query, k, options, _on, _vector)

    def following(
        self,
        chunk_ids: Sequence[str],
        *,
        deliverable: bool = True,
        now: datetime | None = None,
        _on: Any = None,
    ) -> dict[str, MemoryChunk]:
        """For each id, the memory written right after it in its scope from the same source
        (``FollowingReads``):
        deliverable at ``now`` when ``deliverable`` (an undeliverable row is stepped over). Ids
        naming no row, or with nothing after them in their scope, are absent (an id that is not
        text among them too: every store then answers alike, and none fails on it)."""
        if isinstance(chunk_ids, str):
            raise ValidationError("chunk_ids: expected a list of memory ids, got a single string")
        if isinstance(chunk_ids, bytes | bytearray) or not isinstance(chunk_ids, Iterable):
            raise ValidationError(
                f"chunk_ids: expected a list of memory ids, got {type(chunk_ids).__name__}"
            )
        ids = [i for i in chunk_ids if isinstance(i, str)]
        return self._following(list(dict.fromkeys(ids)), deliverable, read_now(now), _on)

    def _list(self, query: ListQuery, on: Any) -> list[MemoryChunk]:
        raise NotImplementedError

    def _following(
        self, chunk_ids: list[str], deliverable: bool, now: datetime | None, on: Any
    ) -> dict[str, MemoryChunk]:
        raise NotImplementedError

    def _count(self, query: ListQuery, on: Any) -> int:
        raise NotImplementedError

    def _search(self, query: str, k: int, options: SearchOptions, on: Any, vector: Any) -> list[SearchHit]:
        raise NotImplementedError


class SearchTracing:
    """``trace_search`` (the optional ``SearchTracer`` protocol) for a store that implements
    ``_trace``: where a row ranked for a query, with the search's filters."""

    def trace_search(
        self,
        query: str,
        chunk_id: str,
        k: int = 10,
        *,
        namespaces: Sequence[str] | None = None,
        now: datetime | None = None,
        _on: Any = None,
    ) -> SearchTrace:
        """Where ``chunk_id`` ranked in ``search(query, k, namespaces=..., now=...)``: in the
        final list and in each leg. For ``explain``; callers want ``search``."""
        return self._trace(query, chunk_id, k, namespaces, read_now(now), _on)

    def _trace(
        self, query: str, chunk_id: str, k: int, namespaces: Scopes, now: datetime | None, on: Any
    ) -> SearchTrace:
        raise NotImplementedError


class SQLReads(ChunkReads):
    """``_list`` and ``_count`` for a SQL store: the listing rendered in ``dialect`` over the
    store's ``select`` list, run on the connection ``_reading(on)`` yields, each row read by
    ``chunk_from_row``."""

    dialect: ClassVar[Dialect]
    select: ClassVar[str]
    chunk_from_row: ClassVar[Callable[[Sequence[Any]], MemoryChunk]]

    def _reading(self, view: Any) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _list(self, query: ListQuery, on: Any) -> list[MemoryChunk]:
        statement, params = list_sql(self.dialect, query, self.select)
        read = type(self).chunk_from_row
        with self._reading(on) as conn:
            return [read(r) for r in conn.execute(statement, params)]

    def _following(
        self, chunk_ids: list[str], deliverable: bool, now: datetime | None, on: Any
    ) -> dict[str, MemoryChunk]:
        statement, params = following_sql(self.dialect, chunk_ids, deliverable, now, self.select)
        if statement is None:
            return {}
        read = type(self).chunk_from_row
        with self._reading(on) as conn:
            rows = list(conn.execute(statement, params))
        by_key = {str(r[0]): read(r[1:]) for r in rows}
        return {i: by_key[key] for i in chunk_ids if (key := str(self.dialect.key(i))) in by_key}

    def _count(self, query: ListQuery, on: Any) -> int:
        statement, params = list_sql(self.dialect, query, self.select, count=True)
        with self._reading(on) as conn:
            row = conn.execute(statement, params).fetchone()
        return int(row[0]) if row else 0
