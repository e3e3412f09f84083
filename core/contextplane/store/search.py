"""The embedded store's reads: one row, a listing (the shared read spec, ``read_spec``, in SQLite's
dialect) and hybrid search, with ``trace_search`` beside it since it must rank as search does.

Search is hybrid when an embedder is configured: a BM25 ranking from FTS5 over the query's
meaningful terms (``query_terms``) and a vector ranking, each deep and filtered on its own
(``legs``), fused by rank (``fusion``). Without an embedder, or when sqlite-vec cannot be
loaded, search is FTS-only. Filters can slow a leg down (it widens its candidates, then
filters every one) but never hide a row. Every read runs on the connection ``_reading``
gives: a consistent view's (under its lock), else the store's.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Hashable, Iterator, Sequence
from datetime import datetime
from typing import Any

import apsw

from contextplane.errors import StoreError, ValidationError
from contextplane.memory.model import MemoryChunk
from contextplane.store import (
    fusion,
    legs,
    query_terms,
    ranks,
    sql,
    vector_index,
    vector_lists,
    vector_matrix,
)
from contextplane.store.columns import SELECT_COLUMNS, as_id, chunk_from_row
from contextplane.store.connection import store_error
from contextplane.store.filters import SQLITE
from contextplane.store.protocol import SearchHit, SearchTrace
from contextplane.store.query_terms import TermStats
from contextplane.store.read_spec import SearchOptions, SearchTracing, SQLReads, search_k
from contextplane.store.restore_writes import StoreRestore
from contextplane.store.view import StoreView


class StoreReads(StoreRestore, SQLReads, SearchTracing):
    """The reads of ``SQLiteKnowledgeStore`` (its other seams: see ``base``)."""

    dialect = SQLITE
    select = SELECT_COLUMNS
    chunk_from_row = chunk_from_row
    _term_stats: TermStats
    _matrix: vector_matrix.VectorMatrix
    _lists: vector_lists.HeldLists
    _widths: dict[tuple[str, tuple[str, ...] | None], int]
    _scope_sizes: dict[tuple[tuple[str, ...] | None, Hashable], int]

    def get(self, chunk_id: str, _on: StoreView | None = None) -> MemoryChunk | None:
        with self._reading(_on) as conn:
            return self._get(conn, chunk_id)

    @contextlib.contextmanager
    def _reading(self, view: StoreView | None) -> Iterator[apsw.Connection]:
        """The connection a read runs on: the view's (under its own lock), else the store's."""
        try:
            if view is None:
                with self._lock:
                    yield self.conn
            elif view.lock is None:
                with self._lock:
                    yield view.conn
            else:
                with view.lock:
                    if view.closed:
                        raise StoreError(
                            f"{self.path}: read through a consistent view after its composition ended (a "
                            "provider abandoned at context.provider_timeout_ms reads on); read inside draft"
                        )
                    yield view.conn
        except apsw.Error as exc:
            raise store_error(self.path, exc, "the read") from None

    def _search(
        self, query: str, k: int, options: SearchOptions, _on: StoreView | None, vector: bytes | None
    ) -> list[SearchHit]:
        """Hybrid (BM25 + vector, fused by rank) or FTS-only search (``ChunkReads.search``). Raw
        user text is never FTS syntax (see ``fts_query``). ``vector``: the query already
        embedded, by ``asearch``."""
        k = search_k(query, k)
        n = legs.depth(k)
        namespaces = options.namespaces
        filters = sql.search_filters(
            namespaces,
            deliverable=options.deliverable,
            include_superseded=options.include_superseded,
            now=options.now,
            occurred_after=options.occurred_after,
            occurred_before=options.occurred_before,
        )
        scope_key = None if namespaces is None else tuple(namespaces)
        # embed before taking the lock: a slow embedder must not stall other threads' reads
        if vector is None and self._embedder is not None and query.strip() and not options.full_text:
            vector = self._embed([query])[0]
        with self._reading(_on) as conn:
            version = _corpus_of(_on)
            if version is None:
                version = query_terms.corpus_version(conn)
            plan = self._term_stats.plan(conn, query, version)
            if plan.expression is None and vector is None:
                return []
            found, chance = self._legs(conn, plan, vector, filters, n, scope_key, version)
            order = fusion.fuse([leg.ids for leg in found])[:k]
            chunks = self._rows_by_id(conn, [key for key, _ in order])
        hits: list[SearchHit] = []
        for key, score in order:
            relevance = 0.0
            for leg in found:
                value = leg.values.get(key)
                if value is None:
                    continue
                if leg.name == "vector":
                    value = vector_index.vector_relevance(value, chance)
                relevance = max(relevance, value)
            relevance = min(1.0, relevance)  # a float32 cosine may exceed 1 by a rounding error
            hits.append(SearchHit(chunk=chunks[key], score=score, rank=len(hits) + 1, relevance=relevance))
        return hits

    def _legs(
        self,
        conn: apsw.Connection,
        plan: Any,
        vector: bytes | None,
        filters: sql.SearchFilters,
        n: int,
        scope_key: tuple[str, ...] | None,
        version: Hashable,
    ) -> tuple[list[legs.Leg], float]:
        """Each leg's ranking for one search (``legs``), remembering per scope set the candidate
        widening each needed, so the next turn in the same scopes starts there; and the chance
        level the vector leg's similarities are measured from (0.0 without one)."""
        found: list[legs.Leg] = []
        chance = 0.0
        params, filtered = filters.params, filters.filtered
        if len(self._widths) > 512:
            self._widths.clear()
        if plan.expression is not None:
            leg = legs.fts_leg(
                conn,
                filters.where,
                {**params, "q": plan.expression, "ideal": max(plan.ideal, 1e-6)},
                n,
                width=self._widths.get(("fts", scope_key), 1),
                filtered=filtered,
                postings=plan.postings,
            )
            self._widths[("fts", scope_key)] = leg.width
            found.append(leg)
        if vector is not None:
            vectors = self._vector_count(conn)
            matrix = self._matrix.get(conn, vectors)
            held = None
            if matrix is not None:
                ids, rows = matrix
                sims = vector_matrix.similarities(rows, vector)
                held = (ids, sims)
                chance = self._chance.of(conn, vector, vectors, first_rows=sims)
            else:
                chance = self._chance.of(conn, vector, vectors)
            if held is not None or scope_key is None:  # held: every vector is in memory anyway
                scan = held is not None or vectors <= legs.EXACT_VECTOR_MAX
            else:
                # counted once per scope set and corpus version: a turn's scopes rarely change
                # between writes, and the count was 5% of a turn at 100k memories
                sized = (scope_key, version)
                in_scope = self._scope_sizes.get(sized)
                if in_scope is None:
                    if len(self._scope_sizes) > 512:
                        self._scope_sizes.clear()
                    in_scope = legs.scope_rows(conn, filters.scope_where, params, legs.EXACT_VECTOR_MAX)
                    self._scope_sizes[sized] = in_scope
                scan = in_scope <= legs.EXACT_VECTOR_MAX
            probes = 0 if scan else self._probes(conn)
            listed = None
            if not scan and self._lists.holds(vectors, len(vector) // 4):
                listed = self._lists.candidates(conn, vector, probes, version)
            leg = legs.vector_leg(
                conn,
                filters.where,
                filters.scan_where,
                {**params, "v": vector, "probes": probes},
                n,
                scan=scan,
                width=self._widths.get(("vector", scope_key), 1),
                filtered=filtered,
                vectors=vectors,
                held=held,
                listed=listed,
            )
            self._widths[("vector", scope_key)] = leg.width
            found.append(leg)
        return found, chance

    def _rows_by_id(self, conn: apsw.Connection, keys: Sequence[int]) -> dict[int, MemoryChunk]:
        """The chunks of ``keys`` (ids the legs returned, so they exist in this read)."""
        if not keys:
            return {}
        statement = (
            f"SELECT {SELECT_COLUMNS} FROM chunks AS c WHERE c.id IN (SELECT value FROM json_each(:ids))"
        )
        rows = conn.execute(statement, {"ids": json.dumps(list(keys))})
        return {int(row[0]): chunk_from_row(row) for row in rows}

    def _vector_count(self, conn: apsw.Connection) -> int:
        """About how many vectors the vector leg could return (the full-text row count: every
        row has a vector when an embedder is set)."""
        return query_terms.indexed_rows(conn)

    def _trace(
        self,
        query: str,
        chunk_id: str,
        k: int,
        namespaces: Sequence[str] | None,
        now: datetime | None,
        _on: StoreView | None,
    ) -> SearchTrace:
        """``trace_search`` (``SearchTracing``): the search's legs and fusion, replayed for one
        row (``store.ranks``)."""
        search_k(query, k)  # checked as search checks them; the trace reports ``k`` as given
        key = as_id(chunk_id)
        if key is None:
            raise ValidationError(f"chunk_id: {chunk_id!r} names no memory")
        vector = self._embed([query])[0] if self._embedder is not None and query.strip() else None
        n = legs.depth(k)
        filters = sql.search_filters(namespaces, now=now)
        scope_key = None if namespaces is None else tuple(namespaces)
        with self._reading(_on) as conn:
            version = _corpus_of(_on)
            if version is None:
                version = query_terms.corpus_version(conn)
            plan = self._term_stats.plan(conn, query, version)
            indexed = plan.postings if vector is None else max(plan.postings, self._vector_count(conn))
            found: list[legs.Leg] = []
            if plan.expression is not None or vector is not None:
                found, _ = self._legs(conn, plan, vector, filters, n, scope_key, version)
            scan = any(leg.form == "scan" for leg in found)
            return ranks.trace(
                conn,
                query,
                key,
                k,
                namespaces=namespaces,
                now=now,
                vector=vector,
                probes=self._probes(conn) if vector is not None and not scan else 0,
                plan=plan,
                indexed=indexed,
                found=found,
                scan=scan,
            )


def _corpus_of(view: StoreView | None) -> Hashable | None:
    """The corpus an as-of view's own full-text index holds (the rows at its position), or None:
    the read sees the present index, whose version ``query_terms.corpus_version`` reads."""
    overlay = view.overlay if view is not None else None
    if overlay is None or not overlay.exact_ranking or not (overlay.written_after or overlay.purged_after):
        return None
    return ("as_of", overlay.position.seq)
