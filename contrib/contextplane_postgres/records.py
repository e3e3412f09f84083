"""Session summaries, the injection log, prompt snapshots and the trajectory on PostgreSQL.

All four live in the same database (and schema) as the memories, so a deployment of many
processes on many machines keeps one set of records. The storage forms are the embedded
backend's: manifests stay compact JSON *text* (not ``jsonb``, which refuses ``\\u0000`` and
would reorder keys), so what a reader decodes is byte for byte what was captured.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import time
from collections.abc import Mapping
from typing import Any

import attrs

from contextplane.backends.record_codec import (
    INJECTION_INSERT_COLUMNS,
    INJECTION_SELECT,
    injection_cells,
    injection_row,
)
from contextplane.observability.trajectory import TrajectoryEntry, TrajectoryRead
from contextplane.records.injections import InjectionRow
from contextplane.records.snapshots import PromptSnapshot, SnapshotRow, decode_snapshot
from contextplane.records.summaries import SessionSummary, summary_stamp, validate_summary
from contextplane.records.turn_inputs import TURN_INPUT_FIELDS, TurnInputs
from contextplane.store.fts_query import fts_terms
from contextplane_postgres import sql
from contextplane_postgres.codec import dec, enc, enc_opt
from contextplane_postgres.database import Database
from contextplane_postgres.schema import TS_CONFIG


class PostgresSessionSummaries:
    """``SessionSummaries``; ``relevant`` ranks by ``ts_rank`` over topic and summary."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(
        self, session_id: str, summary: str, *, topic: str = "", kind: str = "session", at: str | None = None
    ) -> str:
        validate_summary(session_id, summary, topic, kind)
        with self.db.connection("write to") as conn:
            row = conn.execute(
                "INSERT INTO session_summaries(session_id, created_at, kind, topic, summary) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                (enc(session_id), at or summary_stamp(), enc(kind), enc(topic), enc(summary)),
            ).fetchone()
        assert row is not None
        return str(row[0])

    def _rows(self, statement: str, args: Mapping[str, Any]) -> builtins.list[SessionSummary]:
        with self.db.connection("read from") as conn:
            rows = conn.execute(statement, args).fetchall()
        return [SessionSummary(str(r[0]), dec(r[1]), r[2], dec(r[3]), dec(r[4]), dec(r[5])) for r in rows]

    def newest(self, limit: int, *, exclude_session: str | None = None) -> builtins.list[SessionSummary]:
        return self._rows(
            "SELECT id, session_id, created_at, kind, topic, summary FROM session_summaries "
            "WHERE session_id <> %(ex)s ORDER BY created_at DESC, id DESC LIMIT %(n)s",
            {"ex": enc(exclude_session or ""), "n": limit},
        )

    def relevant(
        self, query: str, limit: int, *, exclude_session: str | None = None
    ) -> builtins.list[SessionSummary]:
        terms = fts_terms(query)
        if not terms:
            return []
        return self._rows(
            "SELECT s.id, s.session_id, s.created_at, s.kind, s.topic, s.summary "
            "FROM session_summaries AS s, "
            f"to_tsquery('{TS_CONFIG}', %(q)s) AS q WHERE s.tsv @@ q AND s.session_id <> %(ex)s "
            "ORDER BY ts_rank(s.tsv, q, 1) DESC, s.created_at DESC, s.id DESC LIMIT %(n)s",
            {"q": sql.tsquery_text(terms), "ex": enc(exclude_session or ""), "n": limit},
        )

    def count(self) -> int:
        with self.db.connection("read from") as conn:
            row = conn.execute("SELECT count(*) FROM session_summaries").fetchone()
        return int(row[0]) if row else 0


class PostgresInjectionLog:
    """``InjectionLog``: one append-only table."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, row: InjectionRow) -> int:
        with self.db.record_transaction() as conn:
            found = conn.execute(
                f"INSERT INTO injection_log({INJECTION_INSERT_COLUMNS}) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                injection_cells(row, enc),
            ).fetchone()
        assert found is not None
        return int(found[0])

    def rows(self, session_id: str | None = None, limit: int | None = None) -> builtins.list[InjectionRow]:
        statement = INJECTION_SELECT
        args: dict[str, Any] = {}
        if session_id is not None:
            statement += " WHERE session_id = %(s)s"
            args["s"] = enc(session_id)
        statement += " ORDER BY id"
        if limit is not None:
            statement += " LIMIT %(n)s"
            args["n"] = limit
        with self.db.connection("read from") as conn:
            found = conn.execute(statement, args).fetchall()
        return [injection_row(r, dec) for r in found]


_SNAPSHOT_COLUMNS = (
    "session_id, turn_index, call_index, created_at, mode, incognito, prefix_sha256, prefix_sections, "
    "projection_sha256, projection, budget_chars, used_chars, history_messages, history_chars, "
    "stripped, trajectory_refs, full_text, "
    "cache_prefix_sha256, cache_prefix_chars, cache_shared_chars, cache_break"
)
_SNAPSHOT_INSERT = (
    f"INSERT INTO prompt_snapshots({_SNAPSHOT_COLUMNS}) VALUES ({', '.join(['%s'] * 21)}) "
    "ON CONFLICT (session_id, turn_index, call_index) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _SNAPSHOT_COLUMNS.split(", ")[3:])
)


def _snapshot_args(row: SnapshotRow) -> tuple[Any, ...]:
    values = list(attrs.astuple(row))
    values[0] = enc(values[0])
    values[16] = enc_opt(values[16])
    return tuple(values)


def _snapshot(r: tuple[Any, ...]) -> PromptSnapshot:
    values = list(r)
    values[0] = dec(values[0])
    values[16] = None if values[16] is None else dec(values[16])
    return decode_snapshot(SnapshotRow(*values))


_INPUT_COLUMNS = ", ".join(TURN_INPUT_FIELDS)
_INPUTS_UPSERT = (
    f"INSERT INTO turn_inputs({_INPUT_COLUMNS}) VALUES ({', '.join(['%s'] * len(TURN_INPUT_FIELDS))}) "
    "ON CONFLICT (session_id, turn_index) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in TURN_INPUT_FIELDS[2:])
)
#: Text fields that may hold anything a caller typed (NUL included): escaped as every text is.
_INPUT_TEXTS = frozenset(
    {
        "session_id",
        "query",
        "state",
        "surface",
        "project",
        "only_sections",
        "skills_index",
        "extra",
        "config",
        "config_base_dir",
        "plugins",
        "sections",
        "trajectory_ref",
    }
)


def inputs_args(inputs: TurnInputs) -> tuple[Any, ...]:
    return tuple(
        enc_opt(v) if name in _INPUT_TEXTS else v
        for name, v in zip(TURN_INPUT_FIELDS, attrs.astuple(inputs), strict=True)
    )


def inputs_from_row(row: tuple[Any, ...]) -> TurnInputs:
    values: dict[str, Any] = {
        name: (None if v is None else dec(v)) if name in _INPUT_TEXTS else v
        for name, v in zip(TURN_INPUT_FIELDS, row, strict=True)
    }
    return TurnInputs(**values)


class PostgresSnapshotStore:
    """``SnapshotStore``: rows keyed by (session, turn, call), prefix texts once per hash,
    retention by age and count (applied on open and every ``prune_every`` rows)."""

    def __init__(
        self,
        db: Database,
        *,
        retention_days: float = 30.0,
        retention_count: int = 100_000,
        prune_every: int = 1_000,
    ) -> None:
        self.db = db
        self.retention_days = retention_days
        self.retention_count = retention_count
        self.prune_every = prune_every
        self._since_prune = 0
        self._known_prefixes: set[str] = set()
        self.prune()

    def register_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        if sha256 in self._known_prefixes and text is None:
            return
        with self.db.record_transaction() as conn:
            if text is None:
                conn.execute(
                    "INSERT INTO prefix_texts(sha256, text, sections, created_at) VALUES (%s, NULL, %s, %s) "
                    "ON CONFLICT (sha256) DO NOTHING",
                    (sha256, sections_json, time.time()),
                )
            else:
                # A text-less row (left by an incognito turn) gains its text on first normal use.
                conn.execute(
                    "INSERT INTO prefix_texts(sha256, text, sections, created_at) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (sha256) DO UPDATE SET text = excluded.text WHERE prefix_texts.text IS NULL",
                    (sha256, enc(text), sections_json, time.time()),
                )
                self._known_prefixes.add(sha256)

    def put(self, row: SnapshotRow) -> None:
        with self.db.record_transaction() as conn:
            conn.execute(_SNAPSHOT_INSERT, _snapshot_args(row))
        self._since_prune += 1
        if self._since_prune >= self.prune_every:
            self.prune()

    def flush(self) -> None:
        """Every ``put`` is written at once; nothing is buffered."""

    def prune(self, now: float | None = None) -> int:
        """Drop rows older than ``retention_days``, then all but the newest ``retention_count``,
        then prefix texts no snapshot references; return the snapshot rows dropped."""
        self._since_prune = 0
        now = time.time() if now is None else now
        dropped = 0
        with self.db.transaction() as conn:
            if self.retention_days > 0:
                cur = conn.execute(
                    "DELETE FROM prompt_snapshots WHERE created_at < %s",
                    (now - self.retention_days * 86_400,),
                )
                dropped += cur.rowcount
            if self.retention_count > 0:
                cur = conn.execute(
                    "DELETE FROM prompt_snapshots WHERE ctid IN (SELECT ctid FROM prompt_snapshots "
                    "ORDER BY created_at DESC, session_id DESC, turn_index DESC, call_index DESC OFFSET %s)",
                    (self.retention_count,),
                )
                dropped += cur.rowcount
            if dropped:
                conn.execute(
                    "DELETE FROM prefix_texts AS p WHERE NOT EXISTS "
                    "(SELECT 1 FROM prompt_snapshots AS s WHERE s.prefix_sha256 = p.sha256)"
                )
                self._known_prefixes.clear()
        return int(dropped)

    def close(self) -> None:
        """The pool belongs to the backend."""

    def prefix_text(self, sha256: str) -> str | None:
        with self.db.connection("read from") as conn:
            row = conn.execute("SELECT text FROM prefix_texts WHERE sha256 = %s", (sha256,)).fetchone()
        return None if row is None or row[0] is None else dec(row[0])

    def count(self, session_id: str | None = None) -> int:
        with self.db.connection("read from") as conn:
            if session_id is None:
                row = conn.execute("SELECT count(*) FROM prompt_snapshots").fetchone()
            else:
                row = conn.execute(
                    "SELECT count(*) FROM prompt_snapshots WHERE session_id = %s", (enc(session_id),)
                ).fetchone()
        return int(row[0]) if row else 0

    def list(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> builtins.list[PromptSnapshot]:
        """Snapshots in key order (session, turn, call); ``limit`` keeps the newest rows."""
        where, args = ("WHERE session_id = %s", (enc(session_id),)) if session_id is not None else ("", ())
        with self.db.connection("read from") as conn:
            found = conn.execute(
                f"SELECT {_SNAPSHOT_COLUMNS} FROM prompt_snapshots {where} "
                'ORDER BY session_id COLLATE "C", turn_index, call_index',
                args,
            ).fetchall()
        rows = [_snapshot(r) for r in found]
        if limit is not None:
            rows = sorted(rows, key=lambda s: s.created_at)[-limit:]
            rows.sort(key=lambda s: s.key)
        return rows

    def get(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None:
        with self.db.connection("read from") as conn:
            row = conn.execute(
                f"SELECT {_SNAPSHOT_COLUMNS} FROM prompt_snapshots "
                "WHERE session_id = %s AND turn_index = %s AND call_index = %s",
                (enc(session_id), turn_index, call_index),
            ).fetchone()
        return None if row is None else _snapshot(row)

    # turn inputs (``contextplane.records.TurnInputStore``)

    def put_inputs(self, inputs: TurnInputs) -> None:
        """Store one turn's inputs (a recomposed turn replaces its earlier composition's)."""
        with self.db.record_transaction() as conn:
            conn.execute(_INPUTS_UPSERT, inputs_args(inputs))

    def get_inputs(self, session_id: str, turn_index: int) -> TurnInputs | None:
        with self.db.connection("read from") as conn:
            row = conn.execute(
                f"SELECT {_INPUT_COLUMNS} FROM turn_inputs WHERE session_id = %s AND turn_index = %s",
                (enc(session_id), turn_index),
            ).fetchone()
        return None if row is None else inputs_from_row(row)

    def list_inputs(self, session_id: str | None = None) -> builtins.list[TurnInputs]:
        where, args = ("WHERE session_id = %s", (enc(session_id),)) if session_id is not None else ("", ())
        with self.db.connection("read from") as conn:
            rows = conn.execute(
                f"SELECT {_INPUT_COLUMNS} FROM turn_inputs {where} "
                'ORDER BY session_id COLLATE "C", turn_index',
                args,
            ).fetchall()
        return [inputs_from_row(r) for r in rows]

    def sessions(self) -> builtins.list[tuple[str, int, float]]:
        """(session id, snapshot count, newest created_at) per session, newest first."""
        with self.db.connection("read from") as conn:
            found = conn.execute(
                "SELECT session_id, count(*), max(created_at) FROM prompt_snapshots "
                "GROUP BY session_id ORDER BY max(created_at) DESC"
            ).fetchall()
        return [(dec(s), int(n), float(t)) for s, n, t in found]


class PostgresTrajectory:
    """The trajectory (ADR 0102) as one append-only table: entry ``ref`` is the session's
    sequence number from 1, assigned under a per-session advisory lock, so any number of
    processes may write one session (the JSONL writer allows one process per session)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def append(self, session_id: str, kind: str, data: Mapping[str, Any]) -> str:
        with self.db.record_transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (session_id,))
            row = conn.execute(
                "SELECT coalesce(max(seq), 0) + 1 FROM trajectory WHERE session_id = %s", (enc(session_id),)
            ).fetchone()
            assert row is not None
            seq = int(row[0])
            entry = {
                "ref": str(seq),
                "kind": kind,
                "at": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
                **data,
            }
            conn.execute(
                "INSERT INTO trajectory(session_id, seq, kind, entry) VALUES (%s, %s, %s, %s)",
                (enc(session_id), seq, kind, json.dumps(entry, ensure_ascii=False, separators=(",", ":"))),
            )
        return str(seq)

    def read(self, session_id: str) -> TrajectoryRead:
        with self.db.connection("read from") as conn:
            found = conn.execute(
                "SELECT seq, kind, entry FROM trajectory WHERE session_id = %s ORDER BY seq",
                (enc(session_id),),
            ).fetchall()
        return TrajectoryRead(tuple(TrajectoryEntry(str(s), k, json.loads(e)) for s, k, e in found))

    def close(self) -> None:
        """The pool belongs to the backend."""
