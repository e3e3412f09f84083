"""The embedded store: SQLite through apsw, FTS5 for words, sqlite-vec distances for vectors.

Why apsw: the stdlib ``sqlite3`` here cannot load extensions. WAL lets readers run beside one
writer; a busy timeout plus ``BEGIN IMMEDIATE`` makes concurrent writers (threads or
processes) wait instead of failing (``connection``).

Search is hybrid when an embedder is configured: a BM25 ranking from FTS5 over the query's
meaningful terms (``query_terms``) and a vector ranking, each deep and filtered on its own
(``legs``), fused by rank (``fusion``). Without an embedder, or when sqlite-vec cannot be
loaded (one warning at open), search is FTS-only. Filters can slow a leg down (it widens its
candidates, then filters every one) but never hide a row.

The vector leg is an inverted-file (IVF) index over sqlite-vec distances, in ``vector_index``
(its layout, training, and why IVF rather than sqlite-vec's ``vec0`` KNN). The store is one
class assembled from a module per seam (see ``base``): ``columns`` (the one column table),
``sql`` (filters and search statements), ``vector_upkeep``, ``writes`` (validation and D7
stamping), ``lifecycle`` (review, expiry, invalidation, supersession, purge), ``restore_writes``
(exact restore of exported rows) and this module:
opening the store, consistent reads and the reads themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar

import apsw

from contextplane.embedding import Embedder
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.consolidation import Consolidation
from contextplane.memory.history import HistoryEvent, HistoryPosition
from contextplane.memory.model import MemoryChunk, to_utc, utc_now, validate_text
from contextplane.store import (
    fusion,
    legs,
    migrate,
    query_terms,
    ranks,
    sql,
    vector_index,
    vector_lists,
    vector_matrix,
    vector_space,
)
from contextplane.store import history as store_history
from contextplane.store.columns import SEARCH_K_MAX, SELECT_COLUMNS, as_id, chunk_from_row
from contextplane.store.connection import SQLITE_HEADER as SQLITE_HEADER
from contextplane.store.connection import connect as connect
from contextplane.store.connection import is_read_only, store_error
from contextplane.store.protocol import SearchHit, SearchTrace
from contextplane.store.query_terms import TermStats
from contextplane.store.restore_writes import StoreRestore

# Re-exported: callers import the warning from here (and from ``contextplane.store``).
from contextplane.store.vector_index import VectorSearchUnavailableWarning as VectorSearchUnavailableWarning

T = TypeVar("T")

#: The widest fast form: 16 times the base candidates (16 x 8k) before filtering every one.
WIDEST = legs.WIDEST


class SQLiteKnowledgeStore(StoreRestore):
    """The embedded ``KnowledgeStore``. Thread-safe (one connection, one lock); process-safe
    through SQLite's own locking (WAL + busy timeout + ``BEGIN IMMEDIATE``)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        create: bool = True,
        sqlite_vec_path: str | None = None,
        busy_timeout_ms: int = 30_000,
        vector_index_min_rows: int = 4096,
        vector_probes: int | None = None,
        vector_memory_mb: int = vector_lists.DEFAULT_MEMORY_MB,
        on_migrate_batch: migrate.BatchCallback | None = None,
        migrate_batch_rows: int = migrate.DEFAULT_BATCH_ROWS,
        read_only: bool = False,
        consolidation: Consolidation | None = None,
    ) -> None:
        self.path = str(path)
        self._consolidation = consolidation if consolidation is not None else Consolidation()
        #: The backend this store belongs to; set by the backend that wraps it.
        self.backend: Any = None
        self._lock = threading.RLock()
        self._busy_timeout_ms = busy_timeout_ms
        self._sqlite_vec_path = sqlite_vec_path
        self._readers: list[apsw.Connection] = []
        self._readers_lock = threading.Lock()
        self._conn: apsw.Connection | None = connect(
            path, create=create, busy_timeout_ms=busy_timeout_ms, read_only=read_only
        )
        self._embedder: Embedder | None = None
        self._vector_index_min_rows = max(1, vector_index_min_rows)
        self._vector_probes = vector_probes
        #: A store that cannot be written (``read_only=True``, or the file or its directory is
        #: not writable) reads as usual and refuses every write, saying why.
        self._read_only = self.path != ":memory:" and is_read_only(self._conn)
        self._read_only_reason = (
            "it was opened with read_only=True" if read_only else "the file or its directory is not writable"
        )
        self._term_stats = TermStats()
        #: The similarity unrelated rows reach by chance, measured on a kept sample (``search``).
        self._chance = vector_index.ChanceLevel()
        #: A small store's vectors in memory, for the vector leg's scan form (``vector_matrix``).
        self._matrix = vector_matrix.VectorMatrix()
        #: A mid-sized store's IVF lists in memory, for the vector leg's index form (``vector_lists``).
        self._lists = vector_lists.HeldLists(vector_memory_mb)
        #: Per scope set, the candidate widening the last search needed (see ``search``).
        self._widths: dict[tuple[str, tuple[str, ...] | None], int] = {}
        #: Rows in a scope set (counted up to the vector leg's scan bound), per corpus version.
        self._scope_sizes: dict[tuple[tuple[str, ...] | None, Hashable], int] = {}
        try:
            if self._read_only:
                migrate.require_current(self._conn, self.path)
            else:
                migrate.ensure_schema(
                    self._conn,
                    self.path,
                    on_batch=on_migrate_batch,
                    batch_rows=migrate_batch_rows,
                    content_hash_rows=migrate.INLINE_CONTENT_HASH_MAX_ROWS,
                )
                migrate.prepare_read_path(self._conn, self.path)
            # Called directly, not through a helper method: both may warn with stacklevel=4,
            # counted from this frame, so the warning names the code that opened the store.
            if embedder is not None and vector_index.load_sqlite_vec(self.conn, self.path, sqlite_vec_path):
                if not self._read_only:
                    vector_index.attach(self.conn, self.path, embedder)
                    self._embedder = embedder
                elif migrate.meta_get(self.conn, "vector_dimensions") is not None:
                    vector_space.check(
                        self.path,
                        migrate.meta_get(self.conn, "vector_embedder"),
                        migrate.meta_get(self.conn, "vector_dimensions"),
                        embedder.name,
                        int(embedder.dimensions),
                    )
                    self._embedder = embedder  # read-only: search the vectors already there
        except (apsw.NotADBError, apsw.CorruptError) as exc:
            self.close()
            raise StoreError(
                f"{self.path}: the store file is corrupt ({exc}); restore it from a backup"
            ) from None
        except apsw.Error as exc:
            self.close()
            raise store_error(self.path, exc, migrate.MIGRATING) from None
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ plumbing

    def close(self) -> None:
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for reader in readers:
            with contextlib.suppress(apsw.Error):
                reader.close()
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(apsw.Error):
                    self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ consistent reads

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[StoreView]:
        """A point-in-time view for one composition: every read through it sees the same
        committed state, whatever commits meanwhile (ADR D2's "one projection, one state").

        On a file it is a read transaction on a pooled reader connection (WAL: it never blocks
        writers, and it starts its snapshot at once, not at the first section's read). An
        in-memory database has no second connection to read from, so the view reads a copy of
        it taken when the view opens (``serialize``): a write made during composition, even
        from a section on this thread, lands in the store and stays out of the view."""
        if self.path == ":memory:":
            with self._memory_copy() as copy:
                view = StoreView(self, copy, threading.Lock(), now=utc_now())
                try:
                    yield view
                finally:
                    view.close()
            return
        reader = self._take_reader()
        view = StoreView(self, reader, threading.Lock())
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT 1 FROM chunks LIMIT 1").fetchall()  # the snapshot starts here
            # The view's time: every commit it sees happened before it (so a position recorded
            # from the view names exactly its state), and the deliverable filter of every read
            # through it is evaluated at it, so one composition sees one state at one time.
            view.now = utc_now()
            yield view
        finally:
            view.close()
            healthy = True
            try:
                reader.execute("COMMIT")
            except apsw.Error:
                healthy = False
            self._give_back(reader, healthy)

    @contextlib.contextmanager
    def _memory_copy(self) -> Iterator[apsw.Connection]:
        """An in-memory store has no second connection to read from: a copy of it, taken now."""
        with self._lock:
            image = self.conn.serialize("main")
        copy = apsw.Connection(":memory:")
        try:
            if image:
                copy.deserialize("main", image)
            self._load_vectors(copy)
            yield copy
        finally:
            copy.close()

    # ------------------------------------------------------------------ history and as-of reads

    def history(self, chunk_id: str) -> list[HistoryEvent]:
        """Every lifecycle event of one row, oldest first (also for a purged row)."""
        key = as_id(chunk_id)
        if key is None:
            return []
        with self._reading(None) as conn:
            return store_history.events(conn, key)

    def history_position(self) -> HistoryPosition:
        """The position of the latest committed event, at the current time."""
        with self._reading(None) as conn:
            return HistoryPosition(store_history.latest_seq(conn), utc_now())

    @contextlib.contextmanager
    def as_of(self, when: HistoryPosition | datetime, *, exact_ranking: bool = True) -> Iterator[StoreView]:
        """A read view of the store as it was at ``when``: a ``HistoryPosition`` (what a
        composition recorded) or an aware time (the position of the last event by then).

        Rows written later are invisible, every row has the lifecycle state it had then, and
        the deliverable filter is evaluated at that time, for ``get``, ``list_chunks`` and
        ``search`` alike. ``exact_ranking`` rebuilds the full-text statistics of that corpus
        when rows were written or purged since (see ``store.history``); the view's
        ``overlay`` says what changed and what could not be restored."""
        if isinstance(when, datetime):
            when = to_utc(when, "as_of")
        elif not isinstance(when, HistoryPosition):
            raise ValidationError(
                f"as_of: expected a HistoryPosition or an aware datetime, got {type(when).__name__}"
            )
        with contextlib.ExitStack() as stack:
            stack.enter_context(_translated(self.path, "the as-of read"))
            if self.path == ":memory:":
                conn = stack.enter_context(self._memory_copy())
            else:
                # A pooled reader (its page cache is warm); the overlay's temporary objects are
                # dropped before it goes back, and a reader that cannot drop them is closed.
                conn = self._take_reader()
                stack.callback(self._return_overlaid, conn)
                conn.execute("BEGIN")
                stack.callback(_end_read, conn)
            position = (
                store_history.position_at(conn, self.path, when) if isinstance(when, datetime) else when
            )
            latest = store_history.latest_seq(conn)
            if position.seq > latest:
                raise StoreError(
                    f"{self.path}: history position {position.seq} is after the latest event ({latest}); "
                    "it was recorded by another store"
                )
            overlay = store_history.overlay(conn, position, exact_ranking=exact_ranking)
            view = StoreView(
                self, conn, threading.Lock(), now=position.at, position=position, overlay=overlay
            )
            stack.callback(view.close)
            yield view

    def _return_overlaid(self, conn: apsw.Connection) -> None:
        healthy = True
        try:
            store_history.drop_overlay(conn)
        except apsw.Error:
            healthy = False
        self._give_back(conn, healthy)

    def _take_reader(self) -> apsw.Connection:
        with self._readers_lock:
            if self._readers:
                return self._readers.pop()
        self.conn  # noqa: B018 - raises StoreError when the store is closed
        reader = connect(
            self.path, create=False, busy_timeout_ms=self._busy_timeout_ms, read_only=self._read_only
        )
        self._load_vectors(reader)
        return reader

    def _load_vectors(self, conn: apsw.Connection) -> None:
        """sqlite-vec on a reader, when this store searches vectors. It loaded once already on
        the main connection, so a failure here is a real error, not a quiet downgrade."""
        if self._embedder is None:
            return
        path = self._sqlite_vec_path
        if path is None:
            import sqlite_vec

            path = str(sqlite_vec.loadable_path())
        conn.enable_load_extension(True)
        conn.load_extension(path)

    def _give_back(self, reader: apsw.Connection, healthy: bool) -> None:
        with self._readers_lock:
            if healthy and self._conn is not None and len(self._readers) < 8:
                self._readers.append(reader)
                return
        with contextlib.suppress(apsw.Error):
            reader.close()

    # ------------------------------------------------------------------ reads

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
        _on: StoreView | None = None,
    ) -> list[MemoryChunk]:
        """Rows matching every given filter, oldest first. ``delivery_policy="retrieved"`` also
        matches NULL; ``review_state="pending"`` also matches NULL (legacy rows).
        ``occurred_after`` / ``occurred_before``: only rows whose event time is in that
        half-open window (a row without an event time is in none)."""
        statement, params = sql.list_sql(
            deliverable=deliverable,
            memory_kind=memory_kind,
            review_state=review_state,
            delivery_policy=delivery_policy,
            namespace=namespace,
            namespaces=namespaces,
            limit=limit,
            now=now,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            offset=offset,
        )
        with self._reading(_on) as conn:
            return [chunk_from_row(r) for r in conn.execute(statement, params)]

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
        _on: StoreView | None = None,
    ) -> int:
        """How many rows ``list_chunks`` with these filters returns without a limit (so a
        listing can say "50 of N", and a deep page can skip whole review states)."""
        statement, params = sql.list_sql(
            deliverable=deliverable,
            memory_kind=memory_kind,
            review_state=review_state,
            delivery_policy=delivery_policy,
            namespace=namespace,
            namespaces=namespaces,
            limit=None,
            now=now,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            count=True,
        )
        with self._reading(_on) as conn:
            row = conn.execute(statement, params).fetchone()
        return int(row[0]) if row else 0

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
        _on: StoreView | None = None,
        _vector: bytes | None = None,
    ) -> list[SearchHit]:
        """Hybrid (BM25 + vector, fused by rank) or FTS-only search; each hit carries
        its relevance (0 to 1, see ``SearchHit``). Raw user text is never FTS syntax (see
        ``fts_query``); function words and terms too common to inform are not scored.
        ``include_superseded`` admits superseded rows but still never rejected, expired or
        otherwise-invalidated ones. ``occurred_after`` / ``occurred_before`` keep only rows
        whose event time is in that half-open window, as ``list_chunks``. ``full_text`` searches
        without the vector leg, as a store without an embedder does (a turn's fallback when the
        embedder fails: ``EmbedderError``). (``_vector``: the query already embedded, by
        ``asearch``.)"""
        validate_text(query, "query", storable=False)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError(f"k: expected a whole number >= 1, got {k!r}")
        k = min(k, SEARCH_K_MAX)
        n = legs.depth(k)
        filters = sql.search_filters(
            namespaces,
            deliverable=deliverable,
            include_superseded=include_superseded,
            now=now,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
        )
        scope_key = None if namespaces is None else tuple(namespaces)
        # embed before taking the lock: a slow embedder must not stall other threads' reads
        vector = _vector
        if vector is None and self._embedder is not None and query.strip() and not full_text:
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

    # ------------------------------------------------------------------ async (AsyncKnowledgeStore)
    # Why worker threads and not an async SQLite driver: apsw releases the GIL while SQLite
    # works, a local query takes about a millisecond, and the store's own connections (a pooled
    # reader per read, the view's, the writer) already make it thread-safe; an async driver
    # would itself be a thread per connection. So each call is one hop to the loop's default
    # executor, and reads outside a view take a pooled reader, so concurrent turns do not
    # queue on the writer's lock. bench/async_bench.py measures what the hop costs.

    @property
    def threaded_async(self) -> bool:
        """True when this store's async reads are only its synchronous ones in a worker thread
        (no embedder with its own ``aembed``): ``aprojection.acompose`` then composes the whole
        turn in one worker thread, which is cheaper than a hop per read."""
        embedder = self._embedder
        return embedder is None or not hasattr(embedder, "aembed")

    def _off_loop(self, read: Callable[[StoreView | None], T], view: StoreView | None) -> T:
        """Run ``read`` in the calling worker thread: on ``view``, else on a pooled reader (the
        main connection for ``:memory:``, which has no second connection)."""
        if view is not None or self.path == ":memory:":
            return read(view)
        reader = self._take_reader()
        healthy = False
        try:
            result = read(StoreView(self, reader, threading.Lock()))
            healthy = True
            return result
        finally:
            self._give_back(reader, healthy)

    async def asearch(
        self, query: str, k: int = 10, *, _on: StoreView | None = None, **options: Any
    ) -> list[SearchHit]:
        """``search`` without blocking the event loop. An embedder with its own ``aembed`` (a
        remote service) embeds the query on the loop; any other embeds it in the worker thread
        that runs the SQL."""
        vector = None
        embedder = self._embedder
        wanted = not options.get("full_text") and isinstance(query, str) and bool(query.strip())
        if embedder is not None and hasattr(embedder, "aembed") and wanted:
            vector = self._packed([query], await self._aembed(embedder, [query]), embedder.dimensions)[0]

        def read(view: StoreView | None) -> list[SearchHit]:
            return self.search(query, k, **options, _on=view, _vector=vector)

        return await asyncio.to_thread(self._off_loop, read, _on)

    async def alist_chunks(self, *, _on: StoreView | None = None, **filters: Any) -> list[MemoryChunk]:
        """``list_chunks`` in a worker thread."""

        def read(view: StoreView | None) -> list[MemoryChunk]:
            return self.list_chunks(**filters, _on=view)

        return await asyncio.to_thread(self._off_loop, read, _on)

    async def aadd_chunk(self, content: str, *args: Any, **attrs: Any) -> str:
        """``add_chunk`` without blocking the loop: an embedder with its own ``aembed`` (a remote
        service) embeds the row on the loop and only the SQL runs in a worker thread (where
        writes wait for the write lock); any other write runs whole in a worker thread."""
        embedder = self._embedder
        if embedder is None or not hasattr(embedder, "aembed"):
            return await asyncio.to_thread(self.add_chunk, content, *args, **attrs)
        bound = inspect.signature(self.add_chunk).bind(content, *args, **attrs)
        bound.apply_defaults()
        now_text, prepared = self._prepared([bound.arguments])  # validated before embedding
        text = prepared[0][0]
        embedded = await self._aembed(embedder, [text], writing=True)
        vectors = self._packed([text], embedded, embedder.dimensions)
        outcomes = await asyncio.to_thread(self._write_prepared, prepared, vectors, now_text, single=True)
        return outcomes[0]

    async def asupersede(self, old_id: str, content: str, **attrs: Any) -> str:
        """``supersede`` without blocking the loop: as ``aadd_chunk``, an embedder with its own
        ``aembed`` embeds the newer row on the loop, between reading the old row and the write
        (each in a worker thread); any other supersession runs whole in a worker thread."""
        embedder = self._embedder
        if embedder is None or not hasattr(embedder, "aembed"):
            return await asyncio.to_thread(self.supersede, old_id, content, **attrs)
        old, prepared, actor = await asyncio.to_thread(self._superseding, old_id, content, attrs)
        text = prepared[0][0]
        embedded = await self._aembed(embedder, [text], writing=True)
        vectors = self._packed([text], embedded, embedder.dimensions)
        return await asyncio.to_thread(self._write_superseding, old, prepared, vectors, actor)

    async def aset_review_state(self, chunk_id: str, state: str) -> MemoryChunk:
        """``set_review_state`` in a worker thread."""
        return await asyncio.to_thread(self.set_review_state, chunk_id, state)

    def trace_search(
        self,
        query: str,
        chunk_id: str,
        k: int = 10,
        *,
        namespaces: Sequence[str] | None = None,
        now: datetime | None = None,
        _on: StoreView | None = None,
    ) -> SearchTrace:
        """Where ``chunk_id`` ranked in ``search(query, k, namespaces=..., now=...)``: in the
        final list and in each leg (``store.ranks``). For ``explain``; callers want ``search``."""
        validate_text(query, "query", storable=False)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError(f"k: expected a whole number >= 1, got {k!r}")
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


class StoreView:
    """One composition's point-in-time view of a ``SQLiteKnowledgeStore`` (``consistent_read``).

    Reads (``get``, ``list_chunks``, ``search``) see the state committed when the view opened;
    anything else (writes, ``path``) goes to the store itself, whose commits the view does not
    see until the next composition."""

    def __init__(
        self,
        store: SQLiteKnowledgeStore,
        conn: apsw.Connection,
        lock: threading.Lock | None,
        *,
        now: datetime | None = None,
        position: HistoryPosition | None = None,
        overlay: store_history.AsOfOverlay | None = None,
    ) -> None:
        self.store = store
        self.conn = conn
        self.lock = lock
        #: Set when the composition ends: a late read (an abandoned provider's) is refused, never
        #: run on a connection another composition may hold by then.
        self.closed = False
        #: The time the deliverable filter is evaluated at when a read names none.
        self.now = now
        self._position = position
        #: For an as-of view: what it changed to show the past (None for a present view).
        self.overlay = overlay

    def close(self) -> None:
        """Refuse further reads, waiting for one in flight (another thread's) to finish."""
        if self.lock is None:
            self.closed = True
            return
        with self.lock:
            self.closed = True

    def get(self, chunk_id: str) -> MemoryChunk | None:
        return self.store.get(chunk_id, _on=self)

    def list_chunks(self, **filters: Any) -> list[MemoryChunk]:
        if filters.get("now") is None and self.now is not None:
            filters["now"] = self.now
        return self.store.list_chunks(**filters, _on=self)

    def search(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        if options.get("now") is None and self.now is not None:
            options["now"] = self.now
        return self.store.search(query, k, **options, _on=self)

    async def asearch(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        if options.get("now") is None and self.now is not None:
            options["now"] = self.now
        return await self.store.asearch(query, k, **options, _on=self)

    async def alist_chunks(self, **filters: Any) -> list[MemoryChunk]:
        if filters.get("now") is None and self.now is not None:
            filters["now"] = self.now
        return await self.store.alist_chunks(**filters, _on=self)

    def trace_search(self, query: str, chunk_id: str, k: int = 10, **options: Any) -> SearchTrace:
        if options.get("now") is None and self.now is not None:
            options["now"] = self.now
        return self.store.trace_search(query, chunk_id, k, **options, _on=self)

    def history_position(self) -> HistoryPosition:
        """The position this view reads at: for a present view, its newest visible event at
        the time it opened (what a composition records to be replayed)."""
        if self._position is None:
            with self.lock if self.lock is not None else contextlib.nullcontext():
                seq = store_history.latest_seq(self.conn)
            self._position = HistoryPosition(seq, self.now or utc_now())
        return self._position

    def history(self, chunk_id: str) -> list[HistoryEvent]:
        """The row's events up to this view's position."""
        key = as_id(chunk_id)
        if key is None:
            return []
        upto = self.history_position().seq
        with self.lock if self.lock is not None else contextlib.nullcontext():
            return store_history.events(self.conn, key, upto)

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[StoreView]:
        yield self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def __repr__(self) -> str:
        return f"<StoreView of {self.store.path}>"


@contextlib.contextmanager
def _translated(path: str, doing: str) -> Iterator[None]:
    """A SQLite failure inside as a ``StoreError`` naming the file and what to do."""
    try:
        yield
    except apsw.Error as exc:
        raise store_error(path, exc, doing) from None


def _end_read(conn: apsw.Connection) -> None:
    with contextlib.suppress(apsw.Error):
        conn.execute("COMMIT")
