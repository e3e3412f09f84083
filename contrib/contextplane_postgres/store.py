"""The memory store on PostgreSQL: every D4 attribute, the D7 lifecycle, hybrid search in SQL.

Writes take their ids from the table's identity sequence first (one round trip for a whole
batch) and insert every row in one ``INSERT ... SELECT FROM unnest(...)`` statement, so a bulk
add is one statement and its ids come back in input order. Lifecycle steps are single
conditional ``UPDATE`` statements (``... WHERE invalidated_at IS NULL``): two processes that
supersede the same row at once cannot both succeed, because the second one's update finds the
row already invalidated once the first commits, and its transaction (with its new row) rolls
back. Supersession chains therefore stay linear under any concurrency.

Reads outside a composition run on any pooled connection; ``consistent_read()`` holds one
connection in a ``REPEATABLE READ READ ONLY`` transaction for the whole composition, so every
section of one projection sees one committed state (ADR D2).

Every write also consolidates (``consolidate``: duplicates, same-subject supersession, near
duplicates, as on the embedded store) and appends its lifecycle events (``history``) in its
own transaction; ``history``, ``history_position`` and ``as_of`` are ``MemoryHistory``.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, NoReturn

import numpy as np
import psycopg

from contextplane.backends.spec import (
    ChunkLifecycle,
    ChunkWrites,
    SearchOptions,
    SQLReads,
    search_k,
    validate_write,
)
from contextplane.embedding import Embedder, embedder_failed, refused_write
from contextplane.errors import EmbedderError, StoreError, ValidationError
from contextplane.memory.consolidation import Consolidation, WriteOutcome
from contextplane.memory.history import HistoryEvent, HistoryPosition
from contextplane.memory.model import (
    SUPERSEDED_PREFIX,
    MemoryChunk,
    parse_timestamp,
    to_utc,
    utc_now,
    validate_review_state,
    validate_text,
)
from contextplane.store import vector_space
from contextplane.store.closing import ClosingStore
from contextplane.store.columns import COLUMN_NAMES, INHERITED_ON_SUPERSEDE, superseding_row
from contextplane.store.history_spec import AsOfOverlay
from contextplane.store.protocol import SearchHit
from contextplane.store.query_terms import meaningful_words
from contextplane.store.restore import created_details, id_taken, restored_chunks
from contextplane.store.row_codec import chunk_cells
from contextplane.store.view_spec import PointInTimeView
from contextplane_postgres import check as pg_check
from contextplane_postgres import history as pg_history
from contextplane_postgres import schema as pg_schema
from contextplane_postgres import sql
from contextplane_postgres.chance import PgChance
from contextplane_postgres.codec import SELECT_COLUMNS, as_id, chunk_from_row, dec, enc
from contextplane_postgres.connection import explain, translated
from contextplane_postgres.consolidate import consolidate, lock_scopes
from contextplane_postgres.database import Database
from contextplane_postgres.pool import ServerUnreachable
from contextplane_postgres.terms import PgTermStats

#: ``add_chunk`` keywords and what a superseding row inherits: the memory model's, one
#: definition for every store (``contextplane.store.columns``).
INHERITED = INHERITED_ON_SUPERSEDE
#: Columns an insert writes, in the order of a prepared row: the shared row codec's table order.
INSERT_COLUMNS: Final[tuple[str, ...]] = COLUMN_NAMES
_TYPES = {
    "id": "bigint",
    "expires_at": "timestamptz",
    "invalidated_at": "timestamptz",
    "created_at": "timestamptz",
    "updated_at": "timestamptz",
    "occurred_at": "timestamptz",
}
_UNNEST = ", ".join(f"%s::{_TYPES.get(c, 'text')}[]" for c in INSERT_COLUMNS)
INSERT_SQL = f"INSERT INTO chunks ({', '.join(INSERT_COLUMNS)}) SELECT * FROM unnest({_UNNEST})"
INSERT_VECTORS_SQL = (
    f"INSERT INTO chunks ({', '.join(INSERT_COLUMNS)}, embedding) "
    f"SELECT * FROM unnest({_UNNEST}, %s::vector[])"
)
EMBED_BATCH = 256
#: From this many rows a batch goes in by binary ``COPY``: every value, vectors included, is
#: sent in its binary form, which is what bulk loads (and ``store copy``) spend their time on.
COPY_MIN_ROWS = 64
_COPY_TYPES = [_TYPES.get(c, "text") for c in INSERT_COLUMNS]


def copy_rows(
    conn: psycopg.Connection[Any], rows: Sequence[Sequence[Any]], vectors: Sequence[Any] | None
) -> None:
    """Insert rows laid out as ``INSERT_COLUMNS`` (ids given) by one binary ``COPY``;
    ``vectors`` (one per row, None for a row without one) fill ``embedding``."""
    names = ", ".join(INSERT_COLUMNS) + (", embedding" if vectors is not None else "")
    types = [*_COPY_TYPES, "vector"] if vectors is not None else _COPY_TYPES
    with conn.cursor() as cur, cur.copy(f"COPY chunks ({names}) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(types)
        if vectors is None:
            for row in rows:
                copy.write_row(row)
        else:
            for row, vector in zip(rows, vectors, strict=True):
                copy.write_row([*row, vector])


def _same(value: Any) -> Any:
    return value


def prepare_row(row: Mapping[str, Any], now: datetime, index: int) -> list[Any]:
    """Validate and stamp one row (ADR D7) into ``INSERT_COLUMNS`` order, id left empty, by the
    write spec every store shares (``contextplane.backends.spec``)."""
    w = validate_write(row, index, now)
    return [
        None,
        enc(w.content),
        enc(w.domain),
        enc(w.source_type),
        w.stamp.memory_kind,
        w.stamp.delivery_policy,
        w.stamp.review_state,
        w.stamp.expires_at,
        enc(w.heading),
        enc(w.source),
        enc(w.subject),
        enc(w.namespace),
        enc(w.epoch),
        None,
        None,
        now,
        now,
        w.occurred_at,
    ]


#: What ``purge`` deletes (on ``chunks AS c``): expired rows and rows invalidated for a reason
#: other than supersession, never a superseded row nor one that superseded another.
_PURGEABLE: Final[str] = f"""((c.expires_at IS NOT NULL AND c.expires_at <= %(now)s)
     OR (c.invalidated_at IS NOT NULL
         AND left(coalesce(c.invalidation_reason, ''), 14) <> '{SUPERSEDED_PREFIX}'))
    AND NOT (c.invalidated_at IS NOT NULL
             AND left(coalesce(c.invalidation_reason, ''), 14) = '{SUPERSEDED_PREFIX}')
    AND NOT EXISTS (SELECT 1 FROM chunks AS s
        WHERE s.invalidation_reason = '{SUPERSEDED_PREFIX}' || c.id::text)"""


@contextlib.contextmanager
def _snapshot(conn: psycopg.Connection[Any], own: bool) -> Iterator[None]:
    """A read-only REPEATABLE READ transaction on a pooled connection (``own``); a view's
    connection is already inside its snapshot."""
    if not own:
        yield
        return
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def _corpus_of(view: PostgresStoreView) -> tuple[Any, ...]:
    """The corpus version a view reads (the term plan's cache key): its history position; an
    as-of view that lost rows to a purge since shows a smaller corpus, so it is keyed apart."""
    seq = view.history_position().seq
    purged = () if view.overlay is None else view.overlay.purged_after
    return ("present", seq) if not purged else ("as of", seq, purged)


class PostgresKnowledgeStore(ChunkWrites, ChunkLifecycle, SQLReads, ClosingStore):
    """``KnowledgeStore`` on PostgreSQL (``contextplane_postgres.PostgresBackend`` opens it);
    ``list_chunks``, ``count_chunks`` and ``search`` are the shared read spec's (``SQLReads``)."""

    dialect = sql.POSTGRES
    select = SELECT_COLUMNS
    chunk_from_row = chunk_from_row

    def __init__(
        self,
        db: Database,
        *,
        embedder: Embedder | None = None,
        fts_cap: int = sql.FTS_CAP,
        consolidation: Consolidation | None = None,
    ) -> None:
        self.db = db
        self._consolidation = consolidation if consolidation is not None else Consolidation()
        #: The backend this store belongs to; set by the backend that wraps it.
        self.backend: Any = None
        self._embedder: Embedder | None = None
        self.fts_cap = fts_cap
        self._term_stats = PgTermStats()
        self._chance = PgChance()
        if embedder is not None:
            dims = int(embedder.dimensions)
            if dims < 1:
                raise StoreError(f"embedder {embedder.name!r}: dimensions must be positive, got {dims}")
            if not db.vectors:
                raise StoreError(f"{db.shown}: opened without vectors; open the backend with the embedder")
            with db.connection("set up") as conn:
                pg_schema.attach_vectors(conn, db.shown, dims, embedder.name)
            self._embedder = embedder

    @property
    def name(self) -> str:
        return self.db.shown

    def __repr__(self) -> str:
        return f"<PostgresKnowledgeStore {self.db.shown}>"

    @property
    def vectors_enabled(self) -> bool:
        return self._embedder is not None

    # ------------------------------------------------------------------ plumbing

    def close(self) -> None:
        """The pool belongs to the backend; closing the store alone closes nothing."""

    def _embed(self, texts: Sequence[str]) -> list[np.ndarray[Any, Any]]:
        embedder = self._embedder
        assert embedder is not None
        out: list[np.ndarray[Any, Any]] = []
        for start in range(0, len(texts), EMBED_BATCH):
            batch = list(texts[start : start + EMBED_BATCH])
            try:
                vectors = embedder.embed(batch)
            except Exception as exc:
                raise embedder_failed(embedder, exc) from exc
            if len(vectors) != len(batch):
                raise EmbedderError(
                    f"embedder {embedder.name!r}: returned {len(vectors)} vectors for {len(batch)} texts"
                )
            for vector in vectors:
                if len(vector) != embedder.dimensions:
                    raise EmbedderError(
                        f"embedder {embedder.name!r}: returned a {len(vector)}-dimension vector, "
                        f"declared {embedder.dimensions}"
                    )
                out.append(np.asarray(vector, dtype=np.float32))
        return out

    @contextlib.contextmanager
    def _reading(self, view: PostgresStoreView | None) -> Iterator[psycopg.Connection[Any]]:
        if view is None:
            with self.db.connection("read from") as conn:
                yield conn
        else:
            with view.lock, translated(self.db.url, "read from"):
                if view.closed:
                    raise StoreError(
                        f"{self.db.shown}: read through a consistent view after its composition ended (a "
                        "provider abandoned at context.provider_timeout_ms reads on); read inside draft"
                    )
                yield view.conn

    # ------------------------------------------------------------------ consistent reads

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[PostgresStoreView | UnreachableView]:
        """A point-in-time view for one composition: one pooled connection in a ``REPEATABLE
        READ READ ONLY`` transaction whose snapshot is taken as the view opens, so a write
        committed meanwhile (from any process) is wholly invisible to it. While the server
        cannot be reached, an ``UnreachableView`` whose every read raises why."""
        with contextlib.ExitStack() as stack:
            try:
                conn = stack.enter_context(self.db.connection("read from"))
            except ServerUnreachable as exc:
                # The turn goes on: each memory section fails alone, at once, with this reason
                # (isolated and logged by the composition), and its other sections compose.
                yield UnreachableView(self, exc)
                return
            try:
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchall()  # the snapshot starts here
                    # The view's time: every commit it sees happened before it, so the position
                    # it reports names exactly its state, and every read through it evaluates
                    # the deliverable filter then (one composition, one state, one time).
                    view = PostgresStoreView(self, conn, now=utc_now())
                    try:
                        yield view
                    finally:
                        view.closed = True
            except psycopg.Error as exc:
                raise explain(exc, self.db.url, doing="read from") from None

    # ------------------------------------------------------------------ history and as-of reads

    def history(self, chunk_id: str) -> list[HistoryEvent]:
        """Every lifecycle event of one row, oldest first (also for a purged row)."""
        key = as_id(chunk_id)
        if key is None:
            return []
        with self.db.connection("read from") as conn:
            return pg_history.events(conn, key)

    def history_position(self) -> HistoryPosition:
        """The position of the latest committed event, at the current time."""
        with self.db.connection("read from") as conn:
            return HistoryPosition(pg_history.latest_seq(conn), utc_now())

    def check(self) -> list[str]:
        """``contextplane store check``: one line per problem (``contextplane_postgres.check``)."""
        with self.db.connection("read from") as conn:
            return pg_check.check(conn, self.db.schema)

    @contextlib.contextmanager
    def as_of(
        self, when: HistoryPosition | datetime, *, exact_ranking: bool = True
    ) -> Iterator[PostgresStoreView]:
        """A read view of the store as it was at ``when``: a ``HistoryPosition`` (what a
        composition recorded) or an aware time (the position of the last event by then).

        Rows written later are invisible, every row has the lifecycle state it had then, and the
        deliverable filter is evaluated at that time, for ``get``, ``list_chunks`` and ``search``
        alike (see ``history``). ``exact_ranking`` is accepted for the protocol's callers:
        term weights are always counted on the view's own corpus, which is the past one except
        for rows purged since (the overlay's ``exact_ranking`` says so)."""
        if isinstance(when, datetime):
            when = to_utc(when, "as_of")
        elif not isinstance(when, HistoryPosition):
            raise ValidationError(
                f"as_of: expected a HistoryPosition or an aware datetime, got {type(when).__name__}"
            )
        with self.db.connection("read from") as conn:
            # The shadowing view is found by name: a statement psycopg prepared on this
            # connection before would still read the table, so none is prepared meanwhile.
            threshold = conn.prepare_threshold
            conn.prepare_threshold = None
            try:
                with conn.transaction(force_rollback=True):
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    position = (
                        pg_history.position_at(conn, self.db.shown, when)
                        if isinstance(when, datetime)
                        else when
                    )
                    latest = pg_history.latest_seq(conn)
                    if position.seq > latest:
                        raise StoreError(
                            f"{self.db.shown}: history position {position.seq} is after the latest event "
                            f"({latest}); it was recorded by another store"
                        )
                    overlay = pg_history.overlay(conn, self.db.schema, position)
                    view = PostgresStoreView(self, conn, now=position.at, position=position, overlay=overlay)
                    try:
                        yield view
                    finally:
                        view.closed = True
            except psycopg.Error as exc:
                raise explain(exc, self.db.url, doing="read the past of") from None
            finally:
                conn.prepare_threshold = threshold

    # ------------------------------------------------------------------ writes

    def _write(self, rows: Iterable[Mapping[str, Any]], *, single: bool) -> list[WriteOutcome]:
        """``add_chunk``/``add_chunks`` (``ChunkWrites``): rows validated and embedded first, then
        written in one transaction, consolidated as on the embedded store."""
        now = utc_now()
        prepared = [prepare_row(row, now, index) for index, row in enumerate(rows)]
        if not prepared:
            return []
        with refused_write():
            vectors = self._embed([dec(p[1]) for p in prepared]) if self._embedder is not None else None
        with self.db.transaction() as conn:
            return consolidate(
                conn, INSERT_COLUMNS, prepared, vectors, now, self._consolidation, self._insert, single=single
            )

    def _insert(
        self,
        conn: psycopg.Connection[Any],
        prepared: list[list[Any]],
        vectors: list[np.ndarray[Any, Any]] | None,
    ) -> list[int]:
        ids = [
            int(r[0])
            for r in conn.execute(
                "SELECT nextval(pg_get_serial_sequence('chunks', 'id')) FROM generate_series(1, %s)",
                (len(prepared),),
            )
        ]
        for row, new_id in zip(prepared, ids, strict=True):
            row[0] = new_id
        if vectors is not None:
            assert self._embedder is not None
            self._require_space(conn, self._embedder)  # two lookups; never a mix
        if len(prepared) >= COPY_MIN_ROWS:
            copy_rows(conn, prepared, vectors)
            return ids
        columns = [list(col) for col in zip(*prepared, strict=True)]
        if vectors is None:
            conn.execute(INSERT_SQL, columns)
        else:
            conn.execute(INSERT_VECTORS_SQL, [*columns, vectors])
        return ids

    def restore_chunks(self, rows: Iterable[Mapping[str, Any] | MemoryChunk], *, by: str = "") -> list[str]:
        """``ExactRestore`` (``contextplane.store.restore``): rows back with their ids, times and
        state, embedded through the store's embedder, nothing consolidated, one ``created`` event
        each at the restore's time, in one transaction; the identity sequence then continues
        after the largest id. An id the store holds, or held (a purged row's history keeps it),
        is refused by name and nothing is written."""
        chunks = restored_chunks(rows)
        if not chunks:
            return []
        for chunk in chunks:
            if as_id(chunk.id) is None:  # a migrated version-1 file may hold ids of 0 or below
                raise ValidationError(
                    f"{self.db.shown}: memory {chunk.id}: this store's ids are whole numbers from 1, so it "
                    "cannot keep this one; import with new ids (`contextplane memory import --new-ids`); "
                    "nothing was restored"
                )
        actor = validate_text(by, "by")
        with refused_write():
            vectors = self._embed([c.content for c in chunks]) if self._embedder is not None else None
        now = utc_now()
        details = created_details(chunks, now, actor)
        ids = [int(c.id) for c in chunks]
        prepared = [chunk_cells(c, INSERT_COLUMNS, enc, _same) for c in chunks]
        with self.db.transaction() as conn:
            for statement, purged in (
                ("SELECT min(id) FROM chunks WHERE id = ANY(%s)", False),
                ("SELECT min(chunk_id) FROM chunk_history WHERE chunk_id = ANY(%s)", True),
            ):
                row = conn.execute(statement, (ids,)).fetchone()
                if row is not None and row[0] is not None:
                    raise id_taken(self.db.shown, str(row[0]), purged=purged)
            if vectors is not None:
                assert self._embedder is not None
                self._require_space(conn, self._embedder)
            if len(prepared) >= COPY_MIN_ROWS:
                copy_rows(conn, prepared, vectors)
            else:
                columns = [list(col) for col in zip(*prepared, strict=True)]
                conn.execute(
                    INSERT_SQL if vectors is None else INSERT_VECTORS_SQL,
                    columns if vectors is None else [*columns, vectors],
                )
            conn.execute(  # new rows continue after the largest id, never before one handed out
                "SELECT setval(s::regclass, %(high)s) FROM pg_get_serial_sequence('chunks', 'id') AS s "
                "WHERE %(high)s > coalesce(pg_sequence_last_value(s::regclass), 0)",
                {"high": max(ids)},
            )
            pg_history.record_restored(
                conn, sorted(ids), {int(k): json.dumps(v) for k, v in details.items()}, now
            )
        return [c.id for c in chunks]

    def _require(self, conn: psycopg.Connection[Any], chunk_id: str) -> MemoryChunk:
        chunk = self._get(conn, chunk_id)
        if chunk is None:
            raise StoreError(f"{self.db.shown}: no memory with id {chunk_id!r}")
        return chunk

    def _update(
        self, chunk_id: str, assignments: str, params: dict[str, Any], event: str, actor: str
    ) -> MemoryChunk:
        key = as_id(chunk_id)
        with self.db.transaction() as conn:
            row = (
                None
                if key is None
                else conn.execute(
                    f"UPDATE chunks AS c SET {assignments}, updated_at = %(now)s WHERE c.id = %(id)s "
                    f"RETURNING {SELECT_COLUMNS}",
                    {**params, "id": key, "now": utc_now()},
                ).fetchone()
            )
            if row is None:
                raise StoreError(f"{self.db.shown}: no memory with id {chunk_id!r}")
            assert key is not None
            pg_history.record_change(conn, key, event, actor)
        return chunk_from_row(row)

    def set_review_state(self, chunk_id: str, state: str, *, by: str = "") -> MemoryChunk:
        """Confirm, reject or reset a row to pending (D7 step 2); ``by`` says who did (kept in
        the history)."""
        checked = validate_review_state(state)
        actor = validate_text(by, "by")
        return self._update(chunk_id, "review_state = %(state)s", {"state": checked}, "review", actor)

    def set_expires_at(
        self, chunk_id: str, expires_at: datetime | str | None, *, by: str = ""
    ) -> MemoryChunk:
        """Set (or clear, with ``None``) a row's expiry; ``by`` as for ``set_review_state``."""
        value = None if expires_at is None else parse_timestamp(expires_at, "expires_at")
        actor = validate_text(by, "by")
        return self._update(chunk_id, "expires_at = %(at)s", {"at": value}, "expiry", actor)

    def _invalidate_chunk(
        self, chunk_id: str, superseded_by: str | None, reason: str | None, by: str
    ) -> MemoryChunk:
        """``invalidate_chunk`` (``ChunkLifecycle``), in one transaction."""
        actor = validate_text(by, "by")
        with self.db.transaction() as conn:
            return self._invalidate(conn, chunk_id, superseded_by=superseded_by, reason=reason, actor=actor)

    def _invalidate(
        self,
        conn: psycopg.Connection[Any],
        chunk_id: str,
        *,
        superseded_by: str | None,
        reason: str | None,
        actor: str = "",
    ) -> MemoryChunk:
        if superseded_by is not None and reason is not None:
            raise ValidationError("reason: give either superseded_by or reason, not both")
        if superseded_by is not None:
            successor = self._require(conn, superseded_by)
            current = self._require(conn, chunk_id)
            if successor.id == current.id:
                raise ValidationError("superseded_by: a memory cannot supersede itself")
            text = f"{SUPERSEDED_PREFIX}{successor.id}"
        else:
            text = validate_text(reason if reason is not None else "invalidated", "reason", allow_empty=False)
            if text.startswith(SUPERSEDED_PREFIX):
                raise ValidationError("reason: use superseded_by=<id> to record a supersession")
        now = utc_now()
        key = as_id(chunk_id)
        row = (
            None
            if key is None
            else conn.execute(
                "UPDATE chunks AS c SET invalidated_at = %(now)s, invalidation_reason = %(why)s, "
                "updated_at = %(now)s WHERE c.id = %(id)s AND c.invalidated_at IS NULL "
                f"RETURNING {SELECT_COLUMNS}",
                {"now": now, "why": enc(text), "id": key},
            ).fetchone()
        )
        if row is not None:
            assert key is not None
            event = "superseded" if superseded_by is not None else "invalidated"
            detail = {"by": text[len(SUPERSEDED_PREFIX) :]} if superseded_by is not None else None
            pg_history.record_change(conn, key, event, actor, detail=detail)
            return chunk_from_row(row)
        current = self._require(conn, chunk_id)  # raises when there is no such row
        raise StoreError(
            f"{self.db.shown}: memory {chunk_id} is already invalidated ({current.invalidation_reason}); "
            + (f"supersede {current.superseded_by} instead" if current.superseded_by else "nothing to do")
        )

    def supersede(self, old_id: str, content: str, **attrs: Any) -> str:
        """Write the newer row, then invalidate the old one with ``superseded_by:<new id>``, in
        one transaction: if the insert fails the old row is untouched; if another process
        superseded the old row meanwhile, this one fails and its new row is rolled back. It
        holds its scopes' consolidation lock, so a same-subject write racing it leaves one head."""
        with self.db.connection("read from") as conn:
            old = self._require(conn, old_id)
        if old.invalidated_at is not None:
            hint = f"supersede {old.superseded_by} instead" if old.superseded_by else "it is not valid"
            raise StoreError(f"{self.db.shown}: memory {old_id} is already invalidated; {hint}")
        row = superseding_row(old, attrs, content)
        prepared = [prepare_row(row, utc_now(), 0)]
        with refused_write():
            vectors = self._embed([content]) if self._embedder is not None else None
        actor = str(row.get("source_type", ""))
        with self.db.transaction() as conn:
            # The scope lock a same-subject write takes (``consolidate``), before the new id is
            # drawn: a write that decides after this one sees its row and supersedes it, and one
            # that decided before has invalidated the old row, so this one fails below.
            lock_scopes(conn, (enc(old.namespace), prepared[0][INSERT_COLUMNS.index("namespace")]))
            ids = self._insert(conn, prepared, vectors)
            new_id = str(ids[0])
            # raises (rolling the insert back) if someone invalidated the old row meanwhile;
            # the events go last, so the history lock is never held while waiting on a row
            self._invalidate_quietly(conn, old.id, new_id)
            pg_history.record_created(conn, ids, {ids[0]: json.dumps({"supersedes": old.id})})
            pg_history.record_change(conn, int(old.id), "superseded", actor, detail={"by": new_id})
        return new_id

    def _invalidate_quietly(self, conn: psycopg.Connection[Any], old_id: str, new_id: str) -> None:
        """``_invalidate`` for ``supersede``, whose events are appended by the caller."""
        updated = conn.execute(
            "UPDATE chunks AS c SET invalidated_at = %(now)s, invalidation_reason = %(why)s, "
            "updated_at = %(now)s WHERE c.id = %(id)s AND c.invalidated_at IS NULL RETURNING c.id",
            {"now": utc_now(), "why": f"{SUPERSEDED_PREFIX}{new_id}", "id": as_id(old_id)},
        ).fetchone()
        if updated is None:
            current = self._require(conn, old_id)
            raise StoreError(
                f"{self.db.shown}: memory {old_id} is already invalidated ({current.invalidation_reason}); "
                + (f"supersede {current.superseded_by} instead" if current.superseded_by else "nothing to do")
            )

    def purge(self, now: datetime | None = None, *, ids: Sequence[str] | None = None) -> int:
        """Delete expired rows and rows invalidated for a reason other than supersession; never
        a superseded row nor one that superseded another (the chain stays readable). ``ids``:
        only those of them."""
        params: dict[str, Any] = {"now": now or utc_now()}
        where = _PURGEABLE
        if ids is not None:
            params["ids"] = [key for key in (as_id(i) for i in ids) if key is not None]
            where = f"({_PURGEABLE}) AND c.id = ANY(%(ids)s)"
        with self.db.transaction() as conn:
            # Lock the rows first: a row another writer changes meanwhile must not be deleted
            # with a 'purged' event that copies its state from before that change.
            conn.execute(f"SELECT c.id FROM chunks AS c WHERE {where} FOR UPDATE", params).fetchall()
            pg_history.record_purged(conn, where, params, utc_now())
            cur = conn.execute(f"DELETE FROM chunks AS c WHERE {where}", params)
            return int(cur.rowcount)

    # ------------------------------------------------------------------ reads

    def _get(self, conn: psycopg.Connection[Any], chunk_id: str) -> MemoryChunk | None:
        key = as_id(chunk_id)
        if key is None:
            return None
        row = conn.execute(f"SELECT {SELECT_COLUMNS} FROM chunks AS c WHERE c.id = %s", (key,)).fetchone()
        return None if row is None else chunk_from_row(row)

    def get(self, chunk_id: str, _on: PostgresStoreView | None = None) -> MemoryChunk | None:
        with self._reading(_on) as conn:
            return self._get(conn, chunk_id)

    def _search(
        self, query: str, k: int, options: SearchOptions, _on: PostgresStoreView | None, vector: Any
    ) -> list[SearchHit]:
        """Hybrid (full text + HNSW vectors, fused by relevance) or full-text search in one
        statement; each hit carries its relevance (0 to 1, the embedded store's meaning: see
        ``SearchHit`` and ``terms``). Raw user text is never query syntax (see
        ``terms.tsquery_term``); function words and terms too common to inform are not scored.
        Search text is not stored: a lone surrogate in it matches nothing (as on the embedded
        store). ``full_text`` skips the vector leg (a turn's fallback when the embedder fails)."""
        k = search_k(query, k)
        params: dict[str, Any] = {"k": k, "n": max(k * 4, 40), "fts_cap": max(self.fts_cap, k * 4)}
        clauses: list[str] = []
        sql.scope_filter(options.namespaces, params, clauses)
        sql.event_time_filter(options.occurred_after, options.occurred_before, params, clauses)
        if options.deliverable:
            sql.deliverable_filter(options.include_superseded, options.now, params, clauses)
        where = " AND ".join(clauses) or "true"
        if vector is None and self._embedder is not None and query.strip() and not options.full_text:
            vector = self._embed([query])[0]
        if not meaningful_words(query) and vector is None:
            return []
        if vector is not None:
            params["v"] = vector
        # The plan's counts and the search read one snapshot: the view's, or a read-only
        # transaction of their own, so the version they are cached under names what they saw.
        version = None if _on is None else _corpus_of(_on)
        with self._reading(_on) as conn, _snapshot(conn, _on is None):
            if version is None:
                version = ("present", pg_history.latest_seq(conn))
            plan = self._term_stats.plan(conn, query, version)
            if plan.query is None and vector is None:
                return []
            sql.term_params(plan, params)
            if vector is not None:
                corpus = version
                params["chance"] = self._chance.of(
                    conn, vector, corpus, lambda: self._term_stats.rows(conn, corpus)
                )
            statement = sql.search_sql(len(plan.terms), vector is not None, where)
            # Never prepared: a custom plan sees the scored terms and their frequencies (a
            # frequent term is best read newest-first by id, a rare one through the GIN index);
            # psycopg's prepared generic plan took 18 ms where this takes 1.7 (20k rows, a term
            # in 99% of them).
            rows = conn.execute(statement, params, prepare=False).fetchall()
        return [
            SearchHit(
                chunk=chunk_from_row(row),
                score=float(row[-2] or 0.0),
                rank=rank,
                relevance=min(1.0, max(0.0, float(row[-1] or 0.0))),
            )
            for rank, row in enumerate(rows, start=1)
        ]

    # ------------------------------------------------------------------ the vector space

    def vector_space(self) -> tuple[str | None, int | None]:
        """(embedder name, dimensions) the stored vectors were made with, or (None, None)."""
        with self.db.connection("read from") as conn:
            dims, name = pg_schema.vector_state(conn)
        return name, dims

    def vectorless_count(self) -> int:
        """Rows without a vector: written before an embedder was configured, or left by an
        interrupted rebuild; ``reindex_vectors`` embeds them."""
        with self.db.connection("read from") as conn:
            has = pg_schema.vector_state(conn)[0] is not None
            missing = " WHERE embedding IS NULL" if has else ""
            row = conn.execute("SELECT count(*) FROM chunks" + missing).fetchone()
        return int(row[0]) if row else 0

    def reindex_vectors(self, *, rebuild: bool = False) -> int:
        """Embed the rows without a vector, or every row with ``rebuild=True``; returns rows
        embedded."""
        if self._embedder is None:
            raise StoreError(f"{self.db.shown}: no embedder configured, so there are no vectors to build")
        if rebuild:
            return self.rebuild_vectors(self._embedder)
        return self._fill_missing(self._embedder)

    def rebuild_vectors(self, embedder: Embedder) -> int:
        """Embed every row again with ``embedder`` and make its space the store's: the way out
        of a ``VectorSpaceError`` (open the backend without an embedder, then call this). One
        row is embedded first, so an embedder that fails outright leaves the old vectors in
        place; then the old column goes and the new space is recorded in one transaction, and
        rows are embedded in batches: interrupted, the store holds vectors of the new space
        only, and ``reindex_vectors`` (``memory reindex``) finishes the job."""
        dims = int(embedder.dimensions)
        if dims < 1:
            raise StoreError(f"embedder {embedder.name!r}: dimensions must be positive, got {dims}")
        previous, self._embedder = self._embedder, embedder
        try:
            with self.db.connection("read from") as conn:
                first = conn.execute("SELECT content FROM chunks ORDER BY id LIMIT 1").fetchone()
            if first is not None:
                self._embed([dec(first[0])])
            with self.db.connection("set up") as conn:
                self.db.ensure_vector(conn)
                pg_schema.start_rebuild(conn, dims, embedder.name)
        except BaseException:
            self._embedder = previous
            raise
        self._chance = PgChance()
        return self._fill_missing(embedder)

    def _require_space(self, conn: psycopg.Connection[Any], embedder: Embedder) -> None:
        """Inside a transaction adding vectors: refuse them when the recorded space is no longer
        ``embedder``'s (another process rebuilt the store since this one opened it)."""
        dims, name = pg_schema.vector_state(conn)
        vector_space.check(self.db.shown, name, dims, embedder.name, int(embedder.dimensions))

    def _fill_missing(self, embedder: Embedder) -> int:
        # Vectors go as pgvector's text form cast in SQL: the pool of a backend opened without
        # an embedder (a rebuild) has no vector type adapter.
        done, after = 0, 0
        while True:
            with self.db.connection("read from") as conn:
                rows = conn.execute(
                    "SELECT id, content FROM chunks WHERE embedding IS NULL AND id > %s ORDER BY id LIMIT %s",
                    (after, EMBED_BATCH),
                ).fetchall()
            if not rows:
                return done
            vectors = self._embed([dec(r[1]) for r in rows])
            with self.db.transaction() as conn, conn.cursor() as cur:
                self._require_space(conn, embedder)
                cur.executemany(
                    "UPDATE chunks SET embedding = %s::vector WHERE id = %s AND embedding IS NULL",
                    [
                        ("[" + ",".join(repr(float(x)) for x in v) + "]", r[0])
                        for r, v in zip(rows, vectors, strict=True)
                    ],
                )
            done += len(rows)
            after = int(rows[-1][0])

    def vector_neighbours(self, query: str, n: int = 10, *, exact: bool = False) -> list[str]:
        """The vector leg alone, unfiltered, as the HNSW index finds it (``exact``: by a full
        scan). For diagnostics, tests and the benchmark's recall; callers want ``search``."""
        if self._embedder is None:
            raise StoreError(f"{self.db.shown}: no embedder, so there are no vectors to search")
        vector = self._embed([query])[0]
        order = "(c.embedding <=> %(v)s) + 0" if exact else "c.embedding <=> %(v)s"
        with self.db.connection("read from") as conn:
            rows = conn.execute(
                f"SELECT c.id FROM chunks AS c WHERE c.embedding IS NOT NULL ORDER BY {order} LIMIT %(n)s",
                {"v": vector, "n": n},
            ).fetchall()
        return [str(r[0]) for r in rows]


class PostgresStoreView(PointInTimeView):
    """One composition's point-in-time view (``consistent_read``), or the store as of a past
    position (``as_of``): reads see that state, with the deliverable filter evaluated at the
    view's time; writes and anything else go to the store itself."""

    store: PostgresKnowledgeStore

    def __init__(
        self,
        store: PostgresKnowledgeStore,
        conn: psycopg.Connection[Any],
        *,
        now: datetime | None = None,
        position: HistoryPosition | None = None,
        overlay: AsOfOverlay | None = None,
    ) -> None:
        self.store = store
        self.conn = conn
        self.lock = threading.Lock()
        #: The time the deliverable filter is evaluated at when a read names none.
        self.now = now
        self._position = position
        #: For an as-of view: what it changed to show the past (None for a present view).
        self.overlay = overlay
        #: Set when the view's transaction ends: a late read is refused, never run on a
        #: connection that went back to the pool.
        self.closed = False

    def _latest_seq(self) -> int:
        with self.store._reading(self) as conn:
            return pg_history.latest_seq(conn)

    def _row_key(self, chunk_id: str) -> int | None:
        return as_id(chunk_id)

    def _events(self, key: int, upto: int) -> list[HistoryEvent]:
        with self.store._reading(self) as conn:
            return pg_history.events(conn, key, upto)

    def __repr__(self) -> str:
        return f"<PostgresStoreView of {self.store.db.shown}>"


class UnreachableView:
    """What ``consistent_read`` yields while the server cannot be reached: every read raises the
    reason at once (``ServerUnreachable``, "cannot connect to ..."), so a composition loses its
    memory sections, each isolated and logged with that reason, instead of the whole turn (or a
    30 s wait for a pooled connection, as before issue 26)."""

    def __init__(self, store: PostgresKnowledgeStore, reason: ServerUnreachable) -> None:
        self.store = store
        self.reason = reason

    def _fail(self) -> NoReturn:
        raise ServerUnreachable(str(self.reason))

    def get(self, chunk_id: str) -> MemoryChunk | None:
        self._fail()

    def list_chunks(self, **filters: Any) -> list[MemoryChunk]:
        self._fail()

    def search(self, query: str, k: int = 10, **options: Any) -> list[SearchHit]:
        self._fail()

    def following(self, chunk_ids: Sequence[str], **options: Any) -> dict[str, MemoryChunk]:
        self._fail()  # not the store's (``__getattr__``): a read outside the view, or a 30 s wait

    def history_position(self) -> HistoryPosition:
        self._fail()

    def history(self, chunk_id: str) -> list[HistoryEvent]:
        self._fail()

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[UnreachableView]:
        yield self

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def __repr__(self) -> str:
        return f"<UnreachableView of {self.store.db.shown}>"
