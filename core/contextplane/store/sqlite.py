"""The embedded store: SQLite through apsw, FTS5 for words, sqlite-vec distances for vectors.

Why apsw: the stdlib ``sqlite3`` here cannot load extensions. Why these settings: WAL lets
readers run beside one writer; a busy timeout plus ``BEGIN IMMEDIATE`` makes concurrent
writers (threads or processes) wait instead of failing.

Search is hybrid when an embedder is configured: a BM25 top-n from FTS5 and a vector top-n,
fused by reciprocal rank (RRF, k=60) in one SQL statement. Without an embedder, or when
sqlite-vec cannot be loaded (one warning at open), search is FTS-only. Each leg first takes
its best ``8k`` (at least 80) candidates unfiltered, then joins and filters only those (scope,
deliverable); if that leaves fewer than ``k`` results the statement is re-run with every
candidate filtered before the cut, so filters can slow a search down but never hide a row.

The vector leg is an inverted-file (IVF) index over sqlite-vec distances, in ``vector_index``
(its layout, training, and why IVF rather than sqlite-vec's ``vec0`` KNN). This module owns the
rows, the locking and the embedding; the index owns how vectors are stored and found.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import apsw

from contextplane.embedding import Embedder
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.model import (
    DELIVERY_POLICIES,
    MEMORY_KINDS,
    REVIEW_STATES,
    SUPERSEDED_PREFIX,
    DeliveryPolicy,
    MemoryChunk,
    MemoryKind,
    ReviewState,
    format_timestamp,
    parse_timestamp,
    read_timestamp,
    utc_now,
    validate_delivery_policy,
    validate_memory_kind,
    validate_namespace,
    validate_review_state,
    validate_text,
)
from contextplane.memory.stamps import creation_stamps, legacy_kind_and_policy
from contextplane.store import migrate, vector_index
from contextplane.store.fts_query import to_match_expression
from contextplane.store.migrate import write_transaction
from contextplane.store.protocol import SearchHit

# Re-exported: callers import the warning from here (and from ``contextplane.store``).
from contextplane.store.vector_index import VectorSearchUnavailableWarning as VectorSearchUnavailableWarning

SQLITE_HEADER: Final[bytes] = b"SQLite format 3\x00"
RRF_K: Final[int] = 60
EMBED_BATCH: Final[int] = 256

_COLUMNS: Final[tuple[str, ...]] = (
    "id",
    "content",
    "domain",
    "source_type",
    "memory_kind",
    "delivery_policy",
    "review_state",
    "namespace",
    "heading",
    "source",
    "subject",
    "epoch",
    "invalidated_at",
    "invalidation_reason",
    "expires_at",
    "created_at",
    "updated_at",
)
_SELECT_COLUMNS: Final[str] = ", ".join(f"c.{name}" for name in _COLUMNS)

#: Keywords ``add_chunk`` accepts; bulk rows are checked against the same set.
ADD_FIELDS: Final[frozenset[str]] = frozenset(
    {
        "content",
        "domain",
        "source_type",
        "memory_kind",
        "delivery_policy",
        "review_state",
        "namespace",
        "heading",
        "source",
        "subject",
        "epoch",
        "expires_at",
        "expires_in_days",
    }
)
#: Everything ``_prepare`` stamps besides the content (the memoisation key for bulk rows).
_ATTRIBUTE_FIELDS: Final[tuple[str, ...]] = tuple(sorted(ADD_FIELDS - {"content"}))
#: What a superseding row inherits from the row it replaces unless given. Provenance and review
#: state are *not* inherited: an agent superseding an operator row must not gain operator trust.
INHERITED_ON_SUPERSEDE: Final[tuple[str, ...]] = (
    "domain",
    "memory_kind",
    "delivery_policy",
    "namespace",
    "heading",
    "subject",
    "epoch",
)

_INSERT_SQL: Final[str] = (
    "INSERT INTO chunks(content, heading, source, subject, domain, source_type, namespace, epoch, "
    "created_at, updated_at, memory_kind, delivery_policy, review_state, expires_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_BULK_INSERT_SQL: Final[str] = (
    "INSERT INTO chunks(content, heading, source, subject, domain, source_type, namespace, epoch, "
    "created_at, updated_at, memory_kind, delivery_policy, review_state, expires_at) "
    "SELECT " + ", ".join(f"j.value ->> {i}" for i in range(14)) + " FROM json_each(?) AS j ORDER BY j.key"
)


def _as_id(chunk_id: object) -> int | None:
    """Store ids are decimal text (opaque to callers); anything else names no row."""
    if isinstance(chunk_id, bool):
        return None
    if isinstance(chunk_id, int):
        return chunk_id
    if isinstance(chunk_id, str) and chunk_id.strip().isdigit():
        return int(chunk_id.strip())
    return None


def _chunk_from_row(row: Sequence[Any]) -> MemoryChunk:
    """Build a chunk from stored cells, reading legacy NULLs as the spec says: NULL kind is the
    D4 table applied to ``domain``, NULL review state is pending, NULL policy is retrieved."""
    domain = str(row[2] or "")
    source_type = str(row[3] or "")
    kind: MemoryKind = row[4] if row[4] in MEMORY_KINDS else legacy_kind_and_policy(domain, source_type)[0]
    policy: DeliveryPolicy | None = row[5] if row[5] in DELIVERY_POLICIES else None
    review: ReviewState = row[6] if row[6] in REVIEW_STATES else "pending"
    created = read_timestamp(row[15]) or datetime.fromtimestamp(0, UTC)  # unreadable legacy stamp
    return MemoryChunk(
        id=str(row[0]),
        content=str(row[1]),
        domain=domain,
        source_type=source_type,
        memory_kind=kind,
        delivery_policy=policy,
        review_state=review,
        namespace=str(row[7] or ""),
        heading=str(row[8] or ""),
        source=str(row[9] or ""),
        subject=str(row[10] or ""),
        epoch=str(row[11] or ""),
        invalidated_at=read_timestamp(row[12]),
        invalidation_reason=row[13],
        expires_at=read_timestamp(row[14]),
        created_at=created,
        updated_at=read_timestamp(row[16]) or created,
    )


def _check_header(path: Path) -> None:
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the store file ({exc.strerror}); check the path") from None
    if header and header != SQLITE_HEADER:
        raise StoreError(
            f"{path}: not a SQLite database (the file header is not 'SQLite format 3'); "
            "move it aside or point --db / $CONTEXTPLANE_DB at a memory store"
        )


def connect(
    path: str | os.PathLike[str], *, create: bool = True, busy_timeout_ms: int = 30_000
) -> apsw.Connection:
    """Open a connection with the store's settings, turning "not a database" into ``StoreError``."""
    target = str(path)
    if target != ":memory:":
        file = Path(target)
        if file.exists():
            if file.is_dir():
                raise StoreError(f"{file}: is a directory; the store path must name a file")
            _check_header(file)
        elif not create:
            raise StoreError(f"{file}: no memory store here (create it, or pass create=True)")
        else:
            file.parent.mkdir(parents=True, exist_ok=True)
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
    try:
        conn = apsw.Connection(target, flags=flags)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        conn.execute("PRAGMA journal_mode = WAL").fetchone()
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA mmap_size = 1073741824")
        conn.execute("PRAGMA cache_size = -65536")
        conn.execute("PRAGMA temp_store = MEMORY")
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise StoreError(
            f"{target}: the store file is corrupt or not SQLite ({exc}); restore it from a backup"
        ) from None
    except apsw.CantOpenError:
        raise StoreError(f"{target}: cannot open the store (check the path and permissions)") from None
    return conn


class SQLiteKnowledgeStore:
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
        try:
            migrate.ensure_schema(
                self._conn, self.path, on_batch=on_migrate_batch, batch_rows=migrate_batch_rows
            )
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

    @property
    def conn(self) -> apsw.Connection:
        if self._conn is None:
            raise StoreError(f"{self.path}: the store is closed")
        return self._conn

    @property
    def vectors_enabled(self) -> bool:
        """True when searches use the vector leg (an embedder is set and sqlite-vec loaded)."""
        return self._embedder is not None

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

    @contextlib.contextmanager
    def _writing(self) -> Iterator[apsw.Connection]:
        with self._lock:
            conn = self.conn
            with write_transaction(conn):
                yield conn

    # ------------------------------------------------------------------ consistent reads

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[StoreView]:
        """A point-in-time view for one composition: every read through it sees the same
        committed state, whatever commits meanwhile (ADR D2's "one projection, one state").

        On a file it is a read transaction on a pooled reader connection (WAL: it never blocks
        writers, and it starts its snapshot at once, not at the first section's read). An
        in-memory database has one connection, so the view holds the store's lock instead."""
        if self.path == ":memory:":
            with self._lock:
                conn = self.conn
                conn.execute("BEGIN")
                try:
                    yield StoreView(self, conn, None)
                finally:
                    with contextlib.suppress(apsw.Error):
                        conn.execute("COMMIT")
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
        if self._embedder is not None:
            # Loaded once already on the main connection, so this cannot newly fail quietly.
            path = self._sqlite_vec_path
            if path is None:
                import sqlite_vec

                path = str(sqlite_vec.loadable_path())
            reader.enable_load_extension(True)
            reader.load_extension(path)
        return reader

    def _give_back(self, reader: apsw.Connection, healthy: bool) -> None:
        with self._readers_lock:
            if healthy and self._conn is not None and len(self._readers) < 8:
                self._readers.append(reader)
                return
        with contextlib.suppress(apsw.Error):
            reader.close()

    # ------------------------------------------------------------------ writes

    def add_chunk(
        self,
        content: str,
        domain: str = "general",
        source_type: str = "",
        *,
        memory_kind: str | None = None,
        delivery_policy: str | None = None,
        review_state: str | None = None,
        namespace: str = "",
        heading: str = "",
        source: str = "",
        subject: str = "",
        epoch: str = "",
        expires_at: datetime | str | None = None,
        expires_in_days: int | None = None,
    ) -> str:
        """Store one row stamped per D7 (kind, delivery policy, review state, expiry); return its id.
        ``domain`` and ``source_type`` may be positional, as old-style callers pass them."""
        row = {
            "content": content,
            "domain": domain,
            "source_type": source_type,
            "memory_kind": memory_kind,
            "delivery_policy": delivery_policy,
            "review_state": review_state,
            "namespace": namespace,
            "heading": heading,
            "source": source,
            "subject": subject,
            "epoch": epoch,
            "expires_at": expires_at,
            "expires_in_days": expires_in_days,
        }
        return self.add_chunks([row])[0]

    def add_chunks(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """Bulk insert in one transaction (all rows or none). Each mapping holds ``add_chunk``
        keywords. Rows are validated and embedded before the write lock is taken."""
        now = utc_now()
        now_text = format_timestamp(now)
        cache: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        prepared = [self._prepare(row, now, now_text, index, cache) for index, row in enumerate(rows)]
        if not prepared:
            return []
        vectors = self._embed([p[0] for p in prepared]) if self._embedder is not None else None
        with self._writing() as conn:
            ids = self._insert(conn, prepared, vectors)
        self._maybe_train()
        return [str(i) for i in ids]

    def _insert(
        self, conn: apsw.Connection, prepared: list[tuple[Any, ...]], vectors: list[bytes] | None
    ) -> range:
        """Insert prepared rows (caller holds the write transaction) and their vectors."""
        # AUTOINCREMENT under our write lock hands out max(seq, max id) + 1, +2, ... in order.
        first = 1 + int(
            migrate.scalar(
                conn,
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'chunks'), 0), "
                "coalesce((SELECT max(id) FROM chunks), 0))",
            )
        )
        payload = json.dumps(prepared, ensure_ascii=False) if len(prepared) > 1 else ""
        if payload and "\\u0000" not in payload:
            # One statement for the whole batch: FTS5 flushes its pending index at every statement
            # boundary, so per-row statements (executemany) index about 3x slower.
            conn.execute(_BULK_INSERT_SQL, (payload,))
        else:  # one row, or text holding NUL (which JSON text cannot carry through ->> intact)
            conn.executemany(_INSERT_SQL, prepared)
        last = int(conn.last_insert_rowid())
        if last - first + 1 != len(prepared):
            raise StoreError(
                f"{self.path}: inserted ids are not contiguous ({first}..{last}); nothing stored"
            )
        ids = range(first, last + 1)
        if vectors is not None:
            vector_index.add_vectors(conn, zip(ids, vectors, strict=True))
        return ids

    def _prepare(
        self,
        row: Mapping[str, Any],
        now: datetime,
        now_text: str,
        index: int,
        cache: dict[tuple[Any, ...], tuple[Any, ...]] | None = None,
    ) -> tuple[Any, ...]:
        """Validate and stamp one row into insert order. ``cache`` memoises everything but the
        content per distinct attribute tuple: bulk rows usually share their attributes, and the
        stamps depend only on those attributes and ``now`` (fixed for the batch)."""
        if not row.keys() <= ADD_FIELDS:
            unknown = sorted(set(row) - ADD_FIELDS)
            raise ValidationError(
                f"{unknown[0]}: not a memory attribute (row {index}); known: {', '.join(sorted(ADD_FIELDS))}"
            )
        if "content" not in row:
            raise ValidationError(f"content: missing (row {index})")
        content = validate_text(row["content"], "content", allow_empty=False)
        key = tuple(row.get(name) for name in _ATTRIBUTE_FIELDS)
        try:
            tail = cache.get(key) if cache is not None else None
        except TypeError:  # an unhashable value: validation below will name it
            tail, cache = None, None
        if tail is None:
            tail = self._stamp_tail(row, now, now_text)
            if cache is not None:
                cache[key] = tail
        return (content, *tail)

    @staticmethod
    def _stamp_tail(row: Mapping[str, Any], now: datetime, now_text: str) -> tuple[Any, ...]:
        domain = validate_text(row.get("domain", "general"), "domain")
        source_type = validate_text(row.get("source_type", ""), "source_type")
        stamp = creation_stamps(
            domain=domain,
            source_type=source_type,
            memory_kind=row.get("memory_kind"),
            delivery_policy=row.get("delivery_policy"),
            review_state=row.get("review_state"),
            expires_at=row.get("expires_at"),
            expires_in_days=row.get("expires_in_days"),
            now=now,
        )
        return (
            validate_text(row.get("heading", ""), "heading"),
            validate_text(row.get("source", ""), "source"),
            validate_text(row.get("subject", ""), "subject"),
            domain,
            source_type,
            validate_namespace(row.get("namespace", "")),
            validate_text(row.get("epoch", ""), "epoch"),
            now_text,
            now_text,
            stamp.memory_kind,
            stamp.delivery_policy,
            stamp.review_state,
            None if stamp.expires_at is None else format_timestamp(stamp.expires_at),
        )

    def _embed(self, texts: Sequence[str]) -> list[bytes]:
        embedder = self._embedder
        assert embedder is not None
        dims = embedder.dimensions
        out: list[bytes] = []
        for start in range(0, len(texts), EMBED_BATCH):
            batch = texts[start : start + EMBED_BATCH]
            vectors = embedder.embed(batch)
            if len(vectors) != len(batch):
                raise StoreError(
                    f"embedder {embedder.name!r}: returned {len(vectors)} vectors for {len(batch)} texts"
                )
            for vector in vectors:
                if len(vector) != dims:
                    raise StoreError(
                        f"embedder {embedder.name!r}: returned a {len(vector)}-dimension vector, "
                        f"declared {dims}"
                    )
                out.append(vector_index.pack(vector))
        return out

    def _require(self, conn: apsw.Connection, chunk_id: str) -> MemoryChunk:
        chunk = self._get(conn, chunk_id)
        if chunk is None:
            raise StoreError(f"{self.path}: no memory with id {chunk_id!r}")
        return chunk

    def set_review_state(self, chunk_id: str, state: str) -> MemoryChunk:
        """Confirm, reject or reset a row to pending (D7 step 2)."""
        checked = validate_review_state(state)
        with self._writing() as conn:
            self._require(conn, chunk_id)
            conn.execute(
                "UPDATE chunks SET review_state = ?, updated_at = ? WHERE id = ?",
                (checked, format_timestamp(utc_now()), _as_id(chunk_id)),
            )
            return self._require(conn, chunk_id)

    def set_expires_at(self, chunk_id: str, expires_at: datetime | str | None) -> MemoryChunk:
        """Set (or clear, with ``None``) a row's expiry; stored as UTC."""
        value = None if expires_at is None else format_timestamp(parse_timestamp(expires_at, "expires_at"))
        with self._writing() as conn:
            self._require(conn, chunk_id)
            conn.execute(
                "UPDATE chunks SET expires_at = ?, updated_at = ? WHERE id = ?",
                (value, format_timestamp(utc_now()), _as_id(chunk_id)),
            )
            return self._require(conn, chunk_id)

    def invalidate_chunk(
        self, chunk_id: str, *, superseded_by: str | None = None, reason: str | None = None
    ) -> MemoryChunk:
        """Stamp ``invalidated_at`` and a reason; ``superseded_by`` records ``superseded_by:<id>``.
        The row is kept for audit (D7); only ``purge`` ever deletes, and never a superseded row."""
        with self._writing() as conn:
            return self._invalidate(conn, chunk_id, superseded_by=superseded_by, reason=reason)

    def _invalidate(
        self, conn: apsw.Connection, chunk_id: str, *, superseded_by: str | None, reason: str | None
    ) -> MemoryChunk:
        if superseded_by is not None and reason is not None:
            raise ValidationError("reason: give either superseded_by or reason, not both")
        current = self._require(conn, chunk_id)
        if current.invalidated_at is not None:
            raise StoreError(
                f"{self.path}: memory {chunk_id} is already invalidated ({current.invalidation_reason}); "
                + (f"supersede {current.superseded_by} instead" if current.superseded_by else "nothing to do")
            )
        if superseded_by is not None:
            successor = self._require(conn, superseded_by)
            if successor.id == current.id:
                raise ValidationError("superseded_by: a memory cannot supersede itself")
            text = f"{SUPERSEDED_PREFIX}{successor.id}"
        else:
            text = validate_text(reason if reason is not None else "invalidated", "reason", allow_empty=False)
            if text.startswith(SUPERSEDED_PREFIX):
                raise ValidationError("reason: use superseded_by=<id> to record a supersession")
        stamp = format_timestamp(utc_now())
        conn.execute(
            "UPDATE chunks SET invalidated_at = ?, invalidation_reason = ?, updated_at = ? WHERE id = ?",
            (stamp, text, stamp, _as_id(chunk_id)),
        )
        return self._require(conn, chunk_id)

    def supersede(self, old_id: str, content: str, **attrs: Any) -> str:
        """Write the newer row, then invalidate the old one with ``superseded_by:<new id>``, in one
        transaction, insert first: if the insert fails the old row is untouched and still valid.
        Scope, domain, kind, delivery policy, heading, subject and epoch are inherited unless
        given; provenance and review state are not (they describe the new write)."""
        with self._lock:
            old = self._require(self.conn, old_id)
        if old.invalidated_at is not None:
            hint = f"supersede {old.superseded_by} instead" if old.superseded_by else "it is not valid"
            raise StoreError(f"{self.path}: memory {old_id} is already invalidated; {hint}")
        row: dict[str, Any] = {name: getattr(old, name) for name in INHERITED_ON_SUPERSEDE}
        row.update(attrs)
        row["content"] = content
        now = utc_now()
        prepared = [self._prepare(row, now, format_timestamp(now), 0)]  # validate before embedding
        vectors = self._embed([prepared[0][0]]) if self._embedder is not None else None
        with self._writing() as conn:
            new_id = str(self._insert(conn, prepared, vectors)[0])
            # raises (rolling the insert back) if someone invalidated the old row meanwhile
            self._invalidate(conn, old.id, superseded_by=new_id, reason=None)
        self._maybe_train()
        return new_id

    def purge(self, now: datetime | None = None) -> int:
        """Delete expired rows and rows invalidated for a reason other than supersession; return
        how many. Never deletes a superseded row, nor a row that superseded another (the chain
        stays readable)."""
        now_text = format_timestamp(now or utc_now())
        with self._writing() as conn:
            conn.execute(
                f"""DELETE FROM chunks WHERE
                    ((expires_at IS NOT NULL AND expires_at <= :now)
                     OR (invalidated_at IS NOT NULL
                         AND substr(coalesce(invalidation_reason, ''), 1, 14) != '{SUPERSEDED_PREFIX}'))
                    AND NOT (invalidated_at IS NOT NULL
                             AND substr(coalesce(invalidation_reason, ''), 1, 14) = '{SUPERSEDED_PREFIX}')
                    AND CAST(id AS TEXT) NOT IN (
                        SELECT substr(invalidation_reason, 15) FROM chunks
                        WHERE substr(invalidation_reason, 1, 14) = '{SUPERSEDED_PREFIX}')""",
                {"now": now_text},
            )
            return int(conn.changes())

    # ------------------------------------------------------------------ reads

    def _get(self, conn: apsw.Connection, chunk_id: str) -> MemoryChunk | None:
        key = _as_id(chunk_id)
        if key is None:
            return None
        row = conn.execute(f"SELECT {_SELECT_COLUMNS} FROM chunks AS c WHERE c.id = ?", (key,)).fetchone()
        return None if row is None else _chunk_from_row(row)

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

    @staticmethod
    def _scope_filter(namespaces: Sequence[str] | None, params: dict[str, Any], clauses: list[str]) -> None:
        if namespaces is None:
            return
        if isinstance(namespaces, str):
            raise ValidationError("namespaces: expected a list of scopes, got a single string")
        names = [validate_text(n, "namespaces") for n in namespaces]
        if not names:
            clauses.append("0")
            return
        marks = []
        for i, name in enumerate(names):
            params[f"ns{i}"] = name
            marks.append(f":ns{i}")
        clauses.append(f"c.namespace IN ({', '.join(marks)})")

    @staticmethod
    def _deliverable_filter(
        include_superseded: bool, now: datetime | None, params: dict[str, Any], clauses: list[str]
    ) -> None:
        params["now"] = format_timestamp(now or utc_now())
        clauses.append("(c.review_state IS NULL OR c.review_state != 'rejected')")
        clauses.append("(c.expires_at IS NULL OR c.expires_at > :now)")
        if include_superseded:
            clauses.append(
                f"(c.invalidated_at IS NULL OR substr(c.invalidation_reason, 1, 14) = '{SUPERSEDED_PREFIX}')"
            )
        else:
            clauses.append("c.invalidated_at IS NULL")

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
        params: dict[str, Any] = {}
        clauses: list[str] = []
        if memory_kind is not None:
            params["kind"] = validate_memory_kind(memory_kind)
            clauses.append("c.memory_kind = :kind")
        if review_state is not None:
            params["review"] = validate_review_state(review_state)
            clauses.append(
                "(c.review_state = :review OR c.review_state IS NULL)"
                if review_state == "pending"
                else "c.review_state = :review"
            )
        if delivery_policy is not None:
            params["policy"] = validate_delivery_policy(delivery_policy)
            clauses.append(
                "(c.delivery_policy = :policy OR c.delivery_policy IS NULL)"
                if delivery_policy == "retrieved"
                else "c.delivery_policy = :policy"
            )
        if namespace is not None:
            params["namespace"] = validate_text(namespace, "namespace")
            clauses.append("c.namespace = :namespace")
        self._scope_filter(namespaces, params, clauses)
        if deliverable:
            self._deliverable_filter(False, now, params, clauses)
        sql = f"SELECT {_SELECT_COLUMNS} FROM chunks AS c"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY c.id"
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise ValidationError(f"limit: expected a non-negative whole number, got {limit!r}")
            sql += f" LIMIT {limit}"
        with self._reading(_on) as conn:
            return [_chunk_from_row(r) for r in conn.execute(sql, params)]

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
        """Hybrid (BM25 + vector, fused by reciprocal rank) or FTS-only search. Raw user text is
        never FTS syntax (see ``fts_query``). ``include_superseded`` admits superseded rows but
        still never rejected, expired or otherwise-invalidated ones."""
        validate_text(query, "query")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValidationError(f"k: expected a whole number >= 1, got {k!r}")
        params: dict[str, Any] = {"k": k, "n": max(k * 4, 40), "nc": max(k * 8, 80)}
        clauses: list[str] = []
        self._scope_filter(namespaces, params, clauses)
        if deliverable:
            self._deliverable_filter(include_superseded, now, params, clauses)
        where = " AND ".join(clauses) or "1"
        expression = to_match_expression(query)
        # embed before taking the lock: a slow embedder must not stall other threads' reads
        vector = self._embed([query])[0] if self._embedder is not None and query.strip() else None
        with self._reading(_on) as conn:
            if expression is None and vector is None:
                return []
            if vector is not None:
                params["v"] = vector
                params["probes"] = self._probes(conn)
            if expression is not None:
                params["q"] = expression
            rows = conn.execute(self._search_sql(expression, vector, where, exact=False), params).fetchall()
            if len(rows) < k and clauses:
                # The filters may have starved the over-fetched candidates: redo with every
                # candidate filtered before the cut (exact, slower on large stores).
                rows = conn.execute(
                    self._search_sql(expression, vector, where, exact=True), params
                ).fetchall()
        return [
            SearchHit(chunk=_chunk_from_row(row), score=float(row[-1] or 0.0), rank=rank)
            for rank, row in enumerate(rows, start=1)
        ]

    @staticmethod
    def _fts_leg(where: str, *, exact: bool, limit: str) -> str:
        """Ids and BM25 scores (lower is better) of the best ``limit`` deliverable FTS matches.
        Fast form: FTS5 picks the top ``:nc`` matches by itself, then only those are joined and
        filtered. Exact form: every match is joined and filtered before the cut."""
        if exact:
            return (
                "SELECT c.id AS id, bm25(chunks_fts) AS s FROM chunks_fts JOIN chunks AS c "
                f"ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH :q AND {where} "
                f"ORDER BY s, id LIMIT {limit}"
            )
        return (
            "SELECT t.id AS id, t.s AS s FROM (SELECT rowid AS id, bm25(chunks_fts) AS s FROM chunks_fts "
            "WHERE chunks_fts MATCH :q ORDER BY s LIMIT :nc) AS t JOIN chunks AS c ON c.id = t.id "
            f"WHERE {where} ORDER BY t.s, t.id LIMIT {limit}"
        )

    def _search_sql(self, expression: str | None, vector: bytes | None, where: str, *, exact: bool) -> str:
        if vector is None:  # FTS-only: one join, the rows come straight from the filtering join
            if exact:
                return (
                    f"SELECT {_SELECT_COLUMNS}, -bm25(chunks_fts) AS score FROM chunks_fts JOIN chunks AS c "
                    f"ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH :q AND {where} "
                    "ORDER BY bm25(chunks_fts), c.id LIMIT :k"
                )
            return (
                f"SELECT {_SELECT_COLUMNS}, -t.s AS score FROM (SELECT rowid AS id, bm25(chunks_fts) AS s "
                "FROM chunks_fts WHERE chunks_fts MATCH :q ORDER BY s LIMIT :nc) AS t "
                f"JOIN chunks AS c ON c.id = t.id WHERE {where} ORDER BY t.s, t.id LIMIT :k"
            )
        legs = vector_index.vector_leg(where, exact=exact)
        union = "SELECT id, r FROM vec"
        if expression is not None:
            fts = self._fts_leg(where, exact=exact, limit=":n")
            legs.append(f"fts AS (SELECT id, row_number() OVER (ORDER BY s, id) AS r FROM ({fts}))")
            union += " UNION ALL SELECT id, r FROM fts"
        legs.append(f"fused AS (SELECT id, sum(1.0 / ({RRF_K} + r)) AS score FROM ({union}) GROUP BY id)")
        return (
            "WITH " + ", ".join(legs) + f" SELECT {_SELECT_COLUMNS}, fused.score FROM fused "
            "JOIN chunks AS c ON c.id = fused.id ORDER BY fused.score DESC, c.id LIMIT :k"
        )

    def _probes(self, conn: apsw.Connection) -> int:
        return vector_index.probes(conn, self._vector_probes)

    def vector_neighbours(self, query: str, n: int = 10, *, probes: int | None = None) -> list[str]:
        """The vector leg alone, unfiltered: ids of the ``n`` rows nearest to ``query`` as the IVF
        index finds them (``probes`` overrides the list count; a large value makes it exact).
        For diagnostics, tests and the benchmark; callers want ``search``."""
        if self._embedder is None:
            raise StoreError(f"{self.path}: no embedder configured, so there is no vector leg")
        with self._lock:
            conn = self.conn
            return vector_index.neighbours(conn, self._embed([query])[0], n, probes or self._probes(conn))

    # ------------------------------------------------------------------ vector index

    def _maybe_train(self) -> None:
        """Train the IVF centroids when the vector count first reaches the threshold, and again
        each time it doubles, so list sizes stay near sqrt(n)."""
        if self._embedder is None:
            return
        with self._lock:
            if vector_index.training_due(self.conn, self._vector_index_min_rows):
                self.train_vector_index()

    def train_vector_index(
        self, *, iterations: int | None = None, seed: int = 0, use_numpy: bool | None = None
    ) -> int:
        """(Re)train the IVF centroids by k-means on a sample and reassign every vector; return the
        number of lists (about sqrt(n)).

        The slow part (k-means, then the nearest centroid of every vector) runs in a read
        snapshot, so other writers are not blocked; only the swap of centroids and keys takes the
        write lock, and vectors added meanwhile are assigned inside it. Searches never see a
        half-built index.

        Training quality decides recall: on an overlapping 1,024-cluster mixture, 10 iterations
        on 100 points per list reach recall@10 0.99 at 10 probes where 4 iterations on 32 per
        list reach 0.87. With numpy importable (``use_numpy=None`` means "if available") that is
        the default and takes seconds at 100k x 384. Without numpy the same arithmetic runs in
        SQL and Python, about 0.65 us per distance, so the cheaper schedule is used and 100k
        vectors take ~30 s."""
        if self._embedder is None:
            raise StoreError(f"{self.path}: no embedder configured, so there is no vector index to train")
        np = vector_index.training_numpy(use_numpy)
        with self._lock:
            return vector_index.train(self.conn, np, iterations=iterations, seed=seed, step=self._kmeans_step)

    @staticmethod
    def _kmeans_step(conn: apsw.Connection, sample: list[bytes], centroids: list[bytes]) -> list[bytes]:
        """One Lloyd iteration of SQL-path training, looked up on the instance so a test can
        interleave another writer with training."""
        return vector_index.kmeans_step(conn, sample, centroids)

    def reindex_vectors(self, *, rebuild: bool = False) -> int:
        """Embed rows that have no vector (written before an embedder was configured), or every
        row with ``rebuild=True`` (after switching embedders). Returns rows embedded."""
        if self._embedder is None:
            raise StoreError(f"{self.path}: no embedder configured; open the store with embedder=...")
        with self._lock:
            conn = self.conn
            if rebuild:
                with write_transaction(conn):
                    vector_index.clear(conn)
            missing = conn.execute(
                "SELECT id, content FROM chunks WHERE id NOT IN (SELECT chunk_id FROM chunks_vec) ORDER BY id"
            ).fetchall()
            for start in range(0, len(missing), EMBED_BATCH):
                batch = missing[start : start + EMBED_BATCH]
                vectors = self._embed([str(r[1]) for r in batch])
                with write_transaction(conn):
                    vector_index.add_vectors(conn, ((r[0], v) for r, v in zip(batch, vectors, strict=True)))
        self._maybe_train()
        return len(missing)


class StoreView:
    """One composition's point-in-time view of a ``SQLiteKnowledgeStore`` (``consistent_read``).

    Reads (``get``, ``list_chunks``, ``search``) see the state committed when the view opened;
    anything else (writes, ``path``) goes to the store itself, whose commits the view does not
    see until the next composition."""

    def __init__(self, store: SQLiteKnowledgeStore, conn: apsw.Connection, lock: threading.Lock | None) -> None:
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
