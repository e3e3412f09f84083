"""The state every part of the embedded store shares, and the plumbing they all use.

``SQLiteKnowledgeStore`` is assembled from one class per seam, each in its own module and
each building on the one before: ``StoreBase`` (this: the connection, the locks, reading one
row), ``VectorUpkeep`` (embedding, the IVF index's training and reindexing), ``StoreWrites``
(validating, stamping and inserting rows), ``StoreLifecycle`` (review, expiry, invalidation,
supersession, purge) and ``SQLiteKnowledgeStore`` itself (opening, consistent reads, the
reads). The attributes are declared here and set by ``SQLiteKnowledgeStore.__init__``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import apsw

from contextplane.embedding import Embedder
from contextplane.errors import StoreError
from contextplane.memory.consolidation import Consolidation
from contextplane.memory.model import MemoryChunk
from contextplane.store.closing import ClosingStore
from contextplane.store.columns import SELECT_COLUMNS, as_id, chunk_from_row
from contextplane.store.connection import store_error
from contextplane.store.migrate import write_transaction


class StoreBase(ClosingStore):
    """Thread-safe (one connection, one lock); process-safe through SQLite's own locking
    (WAL + busy timeout + ``BEGIN IMMEDIATE``)."""

    path: str
    #: The backend this store belongs to; set by the backend that wraps it.
    backend: Any
    _lock: threading.RLock
    _conn: apsw.Connection | None
    _busy_timeout_ms: int
    _sqlite_vec_path: str | None
    _embedder: Embedder | None
    _vector_index_min_rows: int
    _vector_probes: int | None
    _read_only: bool
    _read_only_reason: str
    _consolidation: Consolidation
    #: The vector leg's chance level (``vector_index.ChanceLevel``), reset by a rebuild.
    _chance: Any

    @property
    def conn(self) -> apsw.Connection:
        if self._conn is None:
            raise StoreError(f"{self.path}: the store is closed")
        return self._conn

    @property
    def read_only(self) -> bool:
        """True when the store reads but refuses every write (see ``SQLiteKnowledgeStore``)."""
        return self._read_only

    @contextlib.contextmanager
    def _writing(self) -> Iterator[apsw.Connection]:
        if self._read_only:
            raise StoreError(
                f"{self.path}: the store is read-only ({self._read_only_reason}), so nothing was "
                "written; make the file and its directory writable, or work on a writable copy"
            )
        with self._lock:
            conn = self.conn
            try:
                with write_transaction(conn):
                    yield conn
            except apsw.Error as exc:  # rolled back: nothing of the write is stored
                raise store_error(self.path, exc, "the write") from None

    def _get(self, conn: apsw.Connection, chunk_id: str) -> MemoryChunk | None:
        key = as_id(chunk_id)
        if key is None:
            return None
        row = conn.execute(f"SELECT {SELECT_COLUMNS} FROM chunks AS c WHERE c.id = ?", (key,)).fetchone()
        return None if row is None else chunk_from_row(row)

    def _require(self, conn: apsw.Connection, chunk_id: str) -> MemoryChunk:
        chunk = self._get(conn, chunk_id)
        if chunk is None:
            raise StoreError(f"{self.path}: no memory with id {chunk_id!r}")
        return chunk
