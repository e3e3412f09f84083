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
(exact restore of exported rows), ``search`` (the reads), ``threaded`` (the async forms),
``view`` (a consistent view) and this module: opening the store, its reader pool and the
consistent and as-of reads.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Hashable, Iterator
from datetime import datetime
from typing import Any

import apsw

from contextplane.embedding import Embedder
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.consolidation import Consolidation
from contextplane.memory.history import HistoryEvent, HistoryPosition
from contextplane.memory.model import to_utc, utc_now
from contextplane.store import history as store_history
from contextplane.store import legs, migrate, vector_index, vector_lists, vector_matrix, vector_space
from contextplane.store.columns import as_id
from contextplane.store.connection import SQLITE_HEADER as SQLITE_HEADER
from contextplane.store.connection import connect as connect
from contextplane.store.connection import is_read_only, store_error
from contextplane.store.query_terms import TermStats
from contextplane.store.threaded import StoreAsync

# Re-exported: callers import the warning from here (and from ``contextplane.store``).
from contextplane.store.vector_index import VectorSearchUnavailableWarning as VectorSearchUnavailableWarning
from contextplane.store.view import StoreView as StoreView
from contextplane.store.view import _end_read, _translated

#: The widest fast form: 16 times the base candidates (16 x 8k) before filtering every one.
WIDEST = legs.WIDEST


class SQLiteKnowledgeStore(StoreAsync):
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
