"""Prompt snapshots (ADR D5): what each model call saw, by reference, in a telemetry database.

A ``prompt_snapshot`` row is keyed by ``(session_id, turn_index, call_index)`` and holds:

- the stable prefix by hash; the prefix text and its section manifest (label, chars, sha256)
  are stored once per hash in ``prefix_texts``, never per call;
- the projected sections: label, chars, content hash and delivered ids (one JSON manifest,
  built once per turn and shared by every call of the turn);
- the context frames stripped from the checkpoint (message id, chars, sha256);
- references to trajectory entries, which hold the authoritative content;
- full text only when ``context.capture_full_text`` is on: redacted and bounded.

Incognito calls record references and sizes only: no prefix text, no projection text, no
full text, no content hashes.

Capture is a plain synchronous call made at the model-call boundary with everything it needs
as arguments. Nothing is handed over through a context variable, because a context variable
set inside a child asyncio task is invisible to its parent (the origin project lost every
snapshot that way).
"""

from __future__ import annotations

import builtins
import datetime as dt
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw
import attrs

from contextplane.authority import PrefixSection, StablePrefix
from contextplane.observability.redaction import Redactor, capture_text
from contextplane.observability.trajectory import TrajectoryWriter

if TYPE_CHECKING:
    from contextplane.config import Config
    from contextplane.projection import ProjectedContext

TELEMETRY_DB_ENV = "CONTEXTPLANE_TELEMETRY_DB"

SCHEMA = """
CREATE TABLE IF NOT EXISTS prefix_texts (
    sha256 TEXT PRIMARY KEY,
    text TEXT,
    sections TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS prompt_snapshots (
    session_id TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    call_index INTEGER NOT NULL,
    created_at REAL NOT NULL,
    mode TEXT NOT NULL,
    incognito INTEGER NOT NULL,
    prefix_sha256 TEXT,
    prefix_sections TEXT,
    projection_sha256 TEXT,
    projection TEXT NOT NULL,
    budget_chars INTEGER,
    used_chars INTEGER NOT NULL,
    history_messages INTEGER NOT NULL,
    history_chars INTEGER NOT NULL,
    stripped TEXT NOT NULL,
    trajectory_refs TEXT NOT NULL,
    full_text TEXT,
    PRIMARY KEY (session_id, turn_index, call_index)
);
CREATE INDEX IF NOT EXISTS prompt_snapshots_created ON prompt_snapshots(created_at);
"""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_telemetry_path(config: Config | None = None) -> Path:
    """``observability.telemetry_db``, else ``$CONTEXTPLANE_TELEMETRY_DB``, else the user data dir."""
    if config is not None and config.observability.telemetry_db:
        return config.resolve_path(config.observability.telemetry_db)
    override = os.environ.get(TELEMETRY_DB_ENV)
    if override:
        return Path(override).expanduser()
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / "contextplane" / "telemetry.sqlite3"


# --- values ------------------------------------------------------------------------------


@attrs.frozen
class SectionRef:
    """One projected section by reference."""

    label: str
    chars: int
    sha256: str | None
    ids: tuple[str, ...] = ()
    truncated: bool = False


@attrs.frozen
class StrippedFrame:
    """A context frame found in the checkpoint and kept out of the model's view (D2 migration)."""

    message_id: str | None
    chars: int
    sha256: str | None


@attrs.frozen
class PromptSnapshot:
    """One stored row, decoded."""

    session_id: str
    turn_index: int
    call_index: int
    created_at: float
    mode: str
    incognito: bool
    prefix_sha256: str | None
    prefix_sections: tuple[PrefixSection, ...]
    projection_sha256: str | None
    sections: tuple[SectionRef, ...]
    budget_chars: int | None
    used_chars: int
    history_messages: int
    history_chars: int
    stripped: tuple[StrippedFrame, ...]
    trajectory_refs: tuple[str, ...]
    full_text: str | None = None

    @property
    def key(self) -> tuple[str, int, int]:
        return (self.session_id, self.turn_index, self.call_index)

    @property
    def delivered_ids(self) -> dict[str, tuple[str, ...]]:
        return {s.label: s.ids for s in self.sections if s.ids}


@attrs.frozen
class PrefixRef:
    """A stable prefix registered with the store: its hash and its section manifest (JSON)."""

    sha256: str | None
    sections_json: str | None
    trajectory_ref: str | None = None


@attrs.frozen
class TurnRecord:
    """What every call of one turn shares: built once per composition, not once per call."""

    session_id: str
    turn_index: int
    mode: str
    incognito: bool
    projection_sha256: str | None
    sections_json: str
    budget_chars: int | None
    used_chars: int
    text: str
    trajectory_ref: str | None = None


# --- the store ---------------------------------------------------------------------------


class SnapshotStore:
    """The ``prompt_snapshot`` table and the once-per-hash prefix texts, in SQLite (apsw).

    ``batch_size`` > 1 buffers rows and writes them in one transaction per batch (call
    ``flush`` or ``close``); 1 writes each row as it is captured. Retention (days and count)
    runs on open and every ``prune_every`` rows.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        retention_days: float = 30.0,
        retention_count: int = 100_000,
        batch_size: int = 1,
        prune_every: int = 1_000,
    ) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.retention_days = retention_days
        self.retention_count = retention_count
        self.batch_size = max(1, batch_size)
        self.prune_every = prune_every
        self._conn = apsw.Connection(str(path))
        self._conn.setbusytimeout(5_000)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(SCHEMA)
        self._lock = threading.Lock()
        self._known_prefixes: set[str] = set()
        self._pending: list[tuple[Any, ...]] = []
        self._since_prune = 0
        self.prune()

    # writing

    def register_prefix(self, sha256: str, text: str | None, sections_json: str) -> None:
        """Store a prefix's text and manifest once per hash (``text`` None keeps no text)."""
        if sha256 in self._known_prefixes and text is None:
            return
        with self._lock:
            if text is None:
                self._conn.execute(
                    "INSERT OR IGNORE INTO prefix_texts(sha256, text, sections, created_at) VALUES (?,?,?,?)",
                    (sha256, None, sections_json, time.time()),
                )
            else:
                # A text-less row (left by an incognito turn) gains its text on first normal use.
                self._conn.execute(
                    "INSERT INTO prefix_texts(sha256, text, sections, created_at) VALUES (?,?,?,?) "
                    "ON CONFLICT(sha256) DO UPDATE SET text=excluded.text WHERE text IS NULL",
                    (sha256, text, sections_json, time.time()),
                )
                self._known_prefixes.add(sha256)

    def insert(self, row: tuple[Any, ...]) -> None:
        """Queue or write one snapshot row (the column order of ``_INSERT``)."""
        with self._lock:
            self._pending.append(row)
            if len(self._pending) >= self.batch_size:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        with self._conn:
            if len(rows) == 1:
                self._conn.execute(_INSERT, rows[0])
            else:
                self._conn.executemany(_INSERT, rows)
        self._since_prune += len(rows)
        if self._since_prune >= self.prune_every:
            self._prune_locked(None)

    def prune(self, now: float | None = None) -> int:
        """Apply retention: drop rows older than ``retention_days``, then all but the newest
        ``retention_count``, then prefix texts no snapshot references. Returns rows dropped."""
        with self._lock:
            return self._prune_locked(now)

    def _prune_locked(self, now: float | None) -> int:
        self._since_prune = 0
        now = time.time() if now is None else now
        dropped = 0
        with self._conn:
            if self.retention_days > 0:
                cutoff = now - self.retention_days * 86_400
                self._conn.execute("DELETE FROM prompt_snapshots WHERE created_at < ?", (cutoff,))
                dropped += self._conn.changes()
            if self.retention_count > 0:
                self._conn.execute(
                    "DELETE FROM prompt_snapshots WHERE rowid NOT IN "
                    "(SELECT rowid FROM prompt_snapshots ORDER BY created_at DESC, rowid DESC LIMIT ?)",
                    (self.retention_count,),
                )
                dropped += self._conn.changes()
            if dropped:
                self._conn.execute(
                    "DELETE FROM prefix_texts WHERE sha256 NOT IN "
                    "(SELECT DISTINCT prefix_sha256 FROM prompt_snapshots WHERE prefix_sha256 IS NOT NULL)"
                )
                self._known_prefixes.clear()
        return dropped

    def close(self) -> None:
        with self._lock:
            self._flush_locked()
            self._conn.close()

    # reading

    def prefix_text(self, sha256: str) -> str | None:
        self.flush()
        for (text,) in self._conn.execute("SELECT text FROM prefix_texts WHERE sha256=?", (sha256,)):
            return str(text) if text is not None else None
        return None

    def count(self, session_id: str | None = None) -> int:
        self.flush()
        args: tuple[Any, ...] = ()
        if session_id is None:
            sql = "SELECT count(*) FROM prompt_snapshots"
        else:
            sql, args = "SELECT count(*) FROM prompt_snapshots WHERE session_id=?", (session_id,)
        return int(next(iter(self._conn.execute(sql, args)))[0])

    def list(
        self, session_id: str | None = None, *, limit: int | None = None
    ) -> builtins.list[PromptSnapshot]:
        """Snapshots in key order (session, turn, call); ``limit`` keeps the newest rows."""
        self.flush()
        where, args = ("WHERE session_id=?", [session_id]) if session_id is not None else ("", [])
        sql = f"SELECT {_COLUMNS} FROM prompt_snapshots {where} ORDER BY session_id, turn_index, call_index"
        rows = [_decode(r) for r in self._conn.execute(sql, args)]
        if limit is not None:
            rows = sorted(rows, key=lambda s: s.created_at)[-limit:]
            rows.sort(key=lambda s: s.key)
        return rows

    def get(self, session_id: str, turn_index: int, call_index: int = 0) -> PromptSnapshot | None:
        self.flush()
        sql = f"SELECT {_COLUMNS} FROM prompt_snapshots WHERE session_id=? AND turn_index=? AND call_index=?"
        for row in self._conn.execute(sql, (session_id, turn_index, call_index)):
            return _decode(row)
        return None

    def sessions(self) -> builtins.list[tuple[str, int, float]]:
        """(session id, snapshot count, newest created_at) per session."""
        self.flush()
        sql = (
            "SELECT session_id, count(*), max(created_at) FROM prompt_snapshots "
            "GROUP BY session_id ORDER BY max(created_at) DESC"
        )
        return [(str(s), int(n), float(t)) for s, n, t in self._conn.execute(sql)]


_COLUMNS = (
    "session_id, turn_index, call_index, created_at, mode, incognito, prefix_sha256, prefix_sections, "
    "projection_sha256, projection, budget_chars, used_chars, history_messages, history_chars, "
    "stripped, trajectory_refs, full_text"
)
_INSERT = f"INSERT OR REPLACE INTO prompt_snapshots({_COLUMNS}) VALUES ({','.join('?' * 17)})"


def _decode(row: Sequence[Any]) -> PromptSnapshot:
    (session, turn, call, created, mode, incognito, psha, psections, jsha, projection, budget, used,
     hmsgs, hchars, stripped, refs, full) = row  # fmt: skip
    prefix_sections = tuple(
        PrefixSection(s["name"], s["plugin"], s["chars"], s["sha256"]) for s in json.loads(psections or "[]")
    )
    sections = tuple(
        SectionRef(
            s["label"], s["chars"], s.get("sha256"), tuple(s.get("ids", ())), s.get("truncated", False)
        )
        for s in json.loads(projection)
    )
    frames = tuple(StrippedFrame(f.get("id"), f["chars"], f.get("sha256")) for f in json.loads(stripped))
    return PromptSnapshot(
        session_id=session,
        turn_index=turn,
        call_index=call,
        created_at=created,
        mode=mode,
        incognito=bool(incognito),
        prefix_sha256=psha,
        prefix_sections=prefix_sections,
        projection_sha256=jsha,
        sections=sections,
        budget_chars=budget,
        used_chars=used,
        history_messages=hmsgs,
        history_chars=hchars,
        stripped=frames,
        trajectory_refs=tuple(json.loads(refs)),
        full_text=full,
    )


# --- capture -----------------------------------------------------------------------------


def _prefix_sections_json(sections: Iterable[PrefixSection]) -> str:
    return json.dumps(
        [{"name": s.name, "plugin": s.plugin, "chars": s.chars, "sha256": s.sha256} for s in sections],
        separators=(",", ":"),
    )


class PromptRecorder:
    """Captures one snapshot per model call; the runtime adapters' single entry point.

    Per-turn work (the projection manifest, the trajectory entry) happens in ``begin_turn``;
    per-prefix work (hashing, storing the text once) in ``register_prefix``; ``capture`` only
    assembles one row from precomputed parts, so the per-call cost is one small insert.
    """

    def __init__(
        self,
        store: SnapshotStore,
        trajectory: TrajectoryWriter | None = None,
        *,
        capture_full_text: bool = False,
        redactor: Redactor | None = None,
        full_text_max_bytes: int = 65_536,
    ) -> None:
        self.store = store
        self.trajectory = trajectory
        self.capture_full_text = capture_full_text
        self.redactor = redactor if redactor is not None else Redactor.from_patterns()
        self.full_text_max_bytes = full_text_max_bytes
        self._prefixes: dict[str, PrefixRef] = {}
        self._prefix_by_text: dict[str, tuple[str, str]] = {}
        self._session_prefix_refs: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(
        cls, config: Config, *, path: str | os.PathLike[str] | None = None, batch_size: int = 1
    ) -> PromptRecorder:
        """A recorder at the configured telemetry database, with its trajectory directory."""
        obs = config.observability
        db = Path(path) if path is not None else default_telemetry_path(config)
        store = SnapshotStore(
            db,
            retention_days=obs.retention_days,
            retention_count=obs.retention_count,
            batch_size=batch_size,
        )
        tdir = config.resolve_path(obs.trajectory_dir) if obs.trajectory_dir else db.parent / "trajectories"
        return cls(
            store,
            TrajectoryWriter(tdir),
            capture_full_text=config.context.capture_full_text,
            redactor=Redactor.from_patterns(obs.redact_patterns, defaults=obs.redact_defaults),
            full_text_max_bytes=obs.full_text_max_bytes,
        )

    # per prefix

    def register_prefix(
        self, prefix: StablePrefix | str | None, *, session_id: str = "", incognito: bool = False
    ) -> PrefixRef:
        """Hash the prefix once, store its text once per hash (never for incognito), and write
        one trajectory entry per session and hash."""
        if prefix is None:
            return PrefixRef(None, None)
        if isinstance(prefix, StablePrefix):
            text = prefix.text
            cached = self._prefix_by_text.get(text)
            if cached is None:
                cached = (prefix.sha256, _prefix_sections_json(prefix.sections))
                self._prefix_by_text[text] = cached
        else:
            text = prefix
            cached = self._prefix_by_text.get(text)
            if cached is None:
                sha = _sha(text)
                cached = (sha, _prefix_sections_json([PrefixSection("system_prompt", "", len(text), sha)]))
                self._prefix_by_text[text] = cached
        sha, sections_json = cached
        if incognito:
            self.store.register_prefix(sha, None, sections_json)
            return PrefixRef(sha, sections_json)
        key = (session_id, sha)
        ref = self._session_prefix_refs.get(key)
        if ref is None:
            with self._lock:
                ref = self._session_prefix_refs.get(key)
                if ref is None:
                    self.store.register_prefix(sha, text, sections_json)
                    if self.trajectory is not None:
                        ref = self.trajectory.append(
                            session_id, "stable_prefix", {"sha256": sha, "text": text}
                        )
                    else:
                        ref = ""
                    self._session_prefix_refs[key] = ref
        return PrefixRef(sha, sections_json, ref or None)

    # per turn

    def begin_turn(
        self, projection: ProjectedContext, *, query: str = "", reason: str = "turn"
    ) -> TurnRecord:
        """Build the turn's shared manifest and write its trajectory entry (no text if incognito)."""
        incognito = projection.incognito
        sections = []
        for s in projection.sections:
            if s.suppressed is not None or s.error is not None:
                continue
            sections.append(
                {
                    "label": s.name,
                    "chars": s.chars,
                    "sha256": None if incognito else getattr(s, "sha256", None),
                    "ids": list(s.item_ids),
                    "truncated": s.truncated,
                }
            )
        sections_json = json.dumps(sections, separators=(",", ":"))
        psha = None if incognito or not projection.text else _sha(projection.text)
        ref = None
        if self.trajectory is not None:
            data: dict[str, Any] = {
                "turn_index": projection.turn_index,
                "reason": reason,
                "mode": projection.mode.value,
                "incognito": incognito,
                "sections": sections,
                "budget_chars": projection.budget_chars,
                "used_chars": projection.used_chars,
            }
            if not incognito:
                data["query"] = query
                data["sha256"] = psha
                data["text"] = projection.text
            ref = self.trajectory.append(projection.session_id, "projection", data)
        return TurnRecord(
            session_id=projection.session_id,
            turn_index=projection.turn_index,
            mode=projection.mode.value,
            incognito=incognito,
            projection_sha256=psha,
            sections_json=sections_json,
            budget_chars=projection.budget_chars,
            used_chars=projection.used_chars,
            text="" if incognito else projection.text,
            trajectory_ref=ref,
        )

    # per call

    def capture(
        self,
        *,
        session_id: str,
        turn_index: int,
        call_index: int,
        prefix: PrefixRef,
        turn: TurnRecord | None,
        stripped: Sequence[StrippedFrame] = (),
        history_messages: int = 0,
        history_chars: int = 0,
        incognito: bool = False,
        mode: str = "native",
        full_text: Callable[[], str] | None = None,
    ) -> None:
        """Record one model call. ``full_text`` is called only when capture is on and the call
        is not incognito, so the caller never builds the text otherwise."""
        incognito = incognito or (turn is not None and turn.incognito)
        refs = [r for r in (prefix.trajectory_ref, turn.trajectory_ref if turn else None) if r]
        frames = (
            "[]"
            if not stripped
            else json.dumps(
                [
                    {"id": f.message_id, "chars": f.chars, "sha256": None if incognito else f.sha256}
                    for f in stripped
                ],
                separators=(",", ":"),
            )
        )
        text = None
        if self.capture_full_text and not incognito and full_text is not None:
            text = capture_text(full_text(), self.redactor, self.full_text_max_bytes)
        self.store.insert(
            (
                session_id,
                turn_index,
                call_index,
                time.time(),
                turn.mode if turn is not None else mode,
                int(incognito),
                prefix.sha256,
                prefix.sections_json,
                turn.projection_sha256 if turn is not None else None,
                turn.sections_json if turn is not None else "[]",
                turn.budget_chars if turn is not None else None,
                turn.used_chars if turn is not None else 0,
                history_messages,
                history_chars,
                frames,
                json.dumps(refs) if refs else "[]",
                text,
            )
        )

    def flush(self) -> None:
        self.store.flush()

    def close(self) -> None:
        self.store.close()
        if self.trajectory is not None:
            self.trajectory.close()


def snapshot_time(value: float) -> str:
    """A snapshot's ``created_at`` as an ISO-8601 UTC string (for inspectors)."""
    return dt.datetime.fromtimestamp(value, dt.UTC).isoformat(timespec="seconds")


def as_dict(snapshot: PromptSnapshot) -> Mapping[str, Any]:
    """A JSON-ready view of a snapshot (``--json`` output)."""
    return attrs.asdict(snapshot, recurse=True)
