"""The embedded store: SQLite through apsw, FTS5 for words, sqlite-vec distances for vectors.

Why apsw: the stdlib ``sqlite3`` here cannot load extensions. WAL lets readers run beside one
writer; a busy timeout plus ``BEGIN IMMEDIATE`` makes concurrent writers (threads or
processes) wait instead of failing (``connection``).

Search is hybrid when an embedder is configured: a BM25 top-n from FTS5 over the query's
meaningful terms (``query_terms``) and a vector top-n, fused by relevance in one SQL statement
(``sql.search_sql``). Without an embedder, or when sqlite-vec cannot be loaded (one warning at
open), search is FTS-only. Each leg first takes its best ``8k`` (at least 80) candidates
unfiltered, then joins and filters only those (scope, deliverable); if that leaves fewer than
``k`` results the candidates are widened 4x, then 16x, then every candidate is filtered before
the cut, so filters can slow a search down but never hide a row.

The vector leg is an inverted-file (IVF) index over sqlite-vec distances, in ``vector_index``
(its layout, training, and why IVF rather than sqlite-vec's ``vec0`` KNN). The store is one
class assembled from a module per seam (see ``base``): ``columns`` (the one column table),
``sql`` (filters and search statements), ``vector_upkeep``, ``writes`` (validation and D7
stamping), ``lifecycle`` (review, expiry, invalidation, supersession, purge) and this module:
opening the store, consistent reads and the reads themselves.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self

import apsw

from contextplane.embedding import Embedder
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.model import MemoryChunk, validate_text
from contextplane.store import migrate, query_terms, sql, vector_index
from contextplane.store.columns import chunk_from_row
from contextplane.store.connection import SQLITE_HEADER as SQLITE_HEADER
from contextplane.store.connection import connect as connect
from contextplane.store.lifecycle import StoreLifecycle
from contextplane.store.protocol import SearchHit
from contextplane.store.query_terms import TermStats

# Re-exported: callers import the warning from here (and from ``contextplane.store``).
from contextplane.store.vector_index import VectorSearchUnavailableWarning as VectorSearchUnavailableWarning

#: The widest fast form: 16 times the base candidates (16 x 8k) before filtering every one.
WIDEST = 16


class SQLiteKnowledgeStore(StoreLifecycle):
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
        on_migrate_batch: migrate.BatchCallback | None = None,
        migrate_batch_rows: int = migrate.DEFAULT_BATCH_ROWS,
    ) -> None:
        self.path = str(path)
        #: The backend this store belongs to; set by the backend that wraps it.
        self.backend: Any = None
        self._lock = threading.RLock()
        self._busy_timeout_ms = busy_timeout_ms
        self._sqlite_vec_path = sqlite_vec_path
        self._readers: list[apsw.Connection] = []
        self._readers_lock = threading.Lock()
        self._conn: apsw.Connection | None = connect(path, create=create, busy_timeout_ms=busy_timeout_ms)
        self._embedder: Embedder | None = None
        self._vector_index_min_rows = max(1, vector_index_min_rows)
        self._vector_probes = vector_probes
        self._term_stats = TermStats()
        #: Per scope set, the candidate widening the last search needed (see ``search``).
        self._widths: dict[tuple[str, ...] | None, int] = {}
        try:
            migrate.ensure_schema(
                self._conn, self.path, on_batch=on_migrate_batch, batch_rows=migrate_batch_rows
            )
            migrate.prepare_read_path(self._conn, self.path)
            # Called directly, not through a helper method: both may warn with stacklevel=4,
            # counted from this frame, so the warning names the code that opened the store.
            if embedder is not None and vector_index.load_sqlite_vec(self.conn, self.path, sqlite_vec_path):
                vector_index.attach(self.conn, self.path, embedder)
                self._embedder = embedder
        except (apsw.NotADBError, apsw.CorruptError) as exc:
            self.close()
            raise StoreError(
                f"{self.path}: the store file is corrupt ({exc}); restore it from a backup"
            ) from None
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
            with self._lock:
                image = self.conn.serialize("main")
            copy = apsw.Connection(":memory:")
            try:
                if image:
                    copy.deserialize("main", image)
                self._load_vectors(copy)
                yield StoreView(self, copy, threading.Lock())
            finally:
                copy.close()
            return
        reader = self._take_reader()
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT 1 FROM chunks LIMIT 1").fetchall()  # the snapshot starts here
            yield StoreView(self, reader, threading.Lock())
        finally:
            healthy = True
            try:
                reader.execute("COMMIT")
            except apsw.Error:
                healthy = False
            self._give_back(reader, healthy)

    def _take_reader(self) -> apsw.Connection:
        with self._readers_lock:
            if self._readers:
                return self._readers.pop()
        self.conn  # noqa: B018 - raises StoreError when the store is closed
        reader = connect(self.path, create=False, busy_timeout_ms=self._busy_timeout_ms)
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
        if view is None:
            with self._lock:
                yield self.conn
        elif view.lock is None:
            with self._lock:
                yield view.conn
        else:
            with view.lock:
                yield view.conn

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
        _on: StoreView | None = None,
    ) -> list[MemoryChunk]:
        """Rows matching every given filter, oldest first. ``delivery_policy="retrieved"`` also
        matches NULL; ``review_state="pending"`` also matches NULL (legacy rows)."""
        statement, params = sql.list_sql(
            deliverable=deliverable,
            memory_kind=memory_kind,
            review_state=review_state,
            delivery_policy=delivery_policy,
            namespace=namespace,
            namespaces=namespaces,
            limit=limit,
            now=now,
        )
        with self._reading(_on) as conn:
            return [chunk_from_row(r) for r in conn.execute(statement, params)]

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        deliverable: bool = True,
        namespaces: Sequence[str] | None = None,
        include_superseded: bool = False,
        now: datetime | None = None,
        _on: StoreView | None = None,
    ) -> list[SearchHit]:
        """Hybrid (BM25 + vector, fused by relevance) or FTS-only search; each hit carries
        its relevance (0 to 1, see ``SearchHit``). Raw user text is never FTS syntax (see
        ``fts_query``); function words and terms too common to inform are not scored.
        ``include_superseded`` admits superseded rows but still never rejected, expired or
        otherwise-invalidated ones."""
        validate_text(query, "query")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError(f"k: expected a whole number >= 1, got {k!r}")
        base = max(k * 8, 80)
        params: dict[str, Any] = {"k": k, "n": max(k * 4, 40)}
        clauses: list[str] = []
        sql.scope_filter(namespaces, params, clauses)
        if deliverable:
            sql.deliverable_filter(include_superseded, now, params, clauses)
        where = " AND ".join(clauses) or "1"
        scope_key = None if namespaces is None else tuple(namespaces)
        # embed before taking the lock: a slow embedder must not stall other threads' reads
        vector = self._embed([query])[0] if self._embedder is not None and query.strip() else None
        with self._reading(_on) as conn:
            plan = self._term_stats.plan(conn, query)
            if plan.expression is None and vector is None:
                return []
            if vector is not None:
                params["v"] = vector
                params["probes"] = self._probes(conn)
            params["q"] = plan.expression
            params["ideal"] = max(plan.ideal, 1e-6)
            statement = sql.search_sql(plan.expression, vector, where, exact=False)
            # Candidates per leg: the fast form takes ``nc`` unfiltered, then filters. When the
            # filters (a small scope, many rejected rows) leave fewer than k, widen 4x, then 16x,
            # then filter every candidate (exact). A leg that saw all its matches cannot gain by
            # widening; the width that worked is remembered per scope set, so the next turn in
            # the same scopes starts there instead of falling off a cliff every time.
            indexed = plan.postings if vector is None else max(plan.postings, self._vector_count(conn))
            width = self._widths.get(scope_key, 1)
            rows: list[Any] = []
            while True:
                if width > WIDEST:
                    exact = sql.search_sql(plan.expression, vector, where, exact=True)
                    rows = conn.execute(exact, params).fetchall()
                    break
                params["nc"] = base * width
                rows = conn.execute(statement, params).fetchall()
                if len(rows) >= k or not clauses or indexed <= base * width:
                    break
                width *= 4
            if len(self._widths) > 256:
                self._widths.clear()
            self._widths[scope_key] = min(width, WIDEST)
        return [
            SearchHit(
                chunk=chunk_from_row(row),
                score=float(row[-2] or 0.0),
                rank=rank,
                relevance=float(row[-1] or 0.0),
            )
            for rank, row in enumerate(rows, start=1)
        ]

    def _vector_count(self, conn: apsw.Connection) -> int:
        """About how many vectors the vector leg could return (the full-text row count: every
        row has a vector when an embedder is set)."""
        return query_terms.indexed_rows(conn)


class StoreView:
    """One composition's point-in-time view of a ``SQLiteKnowledgeStore`` (``consistent_read``).

    Reads (``get``, ``list_chunks``, ``search``) see the state committed when the view opened;
    anything else (writes, ``path``) goes to the store itself, whose commits the view does not
    see until the next composition."""

    def __init__(
        self, store: SQLiteKnowledgeStore, conn: apsw.Connection, lock: threading.Lock | None
    ) -> None:
        self.store = store
        self.conn = conn
        self.lock = lock

    def get(self, chunk_id: str) -> MemoryChunk | None:
        return self.store.get(chunk_id, _on=self)

    def list_chunks(self, **filters: Any) -> list[MemoryChunk]:
        return self.store.list_chunks(**filters, _on=self)

    def search(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        return self.store.search(query, k, **options, _on=self)

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[StoreView]:
        yield self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def __repr__(self) -> str:
        return f"<StoreView of {self.store.path}>"
