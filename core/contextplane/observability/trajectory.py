"""The trajectory (ADR 0102, D5): one append-only JSONL file per session.

It holds the authoritative content that prompt snapshots only reference. Rules:

- An entry is one JSON object on one line, written with a single ``write`` of the whole line
  in append mode, and never rewritten.
- Each entry has a session-scoped reference id ``ref`` (``"<seq>"``, counting from 1), which
  snapshots store. Sequence numbers are assigned under a lock per writer, so one process may
  write a session from many threads; two processes writing one session file is not supported.
- After a crash, the final line may be torn (no newline, or not valid JSON). Readers detect it
  and skip it; the next writer first terminates it with a newline so a new entry never merges
  into the fragment. The fragment itself is left in place for forensics.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import attrs

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def session_filename(session_id: str) -> str:
    """A filesystem-safe file name for a session id (unsafe characters become ``_`` + hex)."""
    if not session_id:
        return "_default.jsonl"
    safe = _SAFE.sub(lambda m: f"_{ord(m.group(0)):x}", session_id)
    return f"{safe}.jsonl"


@attrs.frozen
class TrajectoryEntry:
    """One parsed line: its reference id, kind, and the JSON object as written."""

    ref: str
    kind: str
    data: Mapping[str, Any]


@attrs.frozen
class TrajectoryRead:
    """Every intact entry of a session file, plus how many damaged lines were skipped."""

    entries: tuple[TrajectoryEntry, ...]
    skipped: int = 0
    torn_tail: bool = False

    def get(self, ref: str) -> TrajectoryEntry | None:
        return next((e for e in self.entries if e.ref == ref), None)


def read_trajectory(path: str | os.PathLike[str]) -> TrajectoryRead:
    """Parse a session file; a damaged line (a torn final write) is skipped, never fatal."""
    p = Path(path)
    if not p.exists():
        return TrajectoryRead(())
    raw = p.read_bytes()
    entries: list[TrajectoryEntry] = []
    skipped = 0
    torn_tail = bool(raw) and not raw.endswith(b"\n")
    lines = raw.split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict) or "ref" not in obj:
                raise ValueError("not an entry")
        except ValueError:
            skipped += 1
            if i == len(lines) - 1:
                torn_tail = True
            continue
        entries.append(TrajectoryEntry(str(obj["ref"]), str(obj.get("kind", "")), obj))
    return TrajectoryRead(tuple(entries), skipped, torn_tail)


class _SessionFile:
    __slots__ = ("handle", "lock", "path", "seq")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.seq = 0
        self.handle: BinaryIO | None = None
        if path.exists():
            data = path.read_bytes()
            if data and not data.endswith(b"\n"):
                # Terminate a torn final line so the next entry starts on a line of its own.
                with path.open("ab") as fh:
                    fh.write(b"\n")
            self.seq = max((int(e.ref) for e in read_trajectory(path).entries if e.ref.isdigit()), default=0)


class TrajectoryWriter:
    """Appends entries to ``<directory>/<session>.jsonl``; thread-safe within one process."""

    MAX_OPEN = 64

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.directory = Path(directory)
        self.fsync = fsync
        self._files: dict[str, _SessionFile] = {}
        self._open_order: list[_SessionFile] = []
        self._lock = threading.Lock()

    def path_for(self, session_id: str) -> Path:
        return self.directory / session_filename(session_id)

    def _file(self, session_id: str) -> _SessionFile:
        with self._lock:
            f = self._files.get(session_id)
            if f is None:
                self.directory.mkdir(parents=True, exist_ok=True)
                f = self._files[session_id] = _SessionFile(self.path_for(session_id))
            return f

    def append(self, session_id: str, kind: str, data: Mapping[str, Any]) -> str:
        """Write one entry and return its reference id; ``data`` must be JSON-serialisable."""
        f = self._file(session_id)
        with f.lock:
            seq = f.seq + 1
            entry = {
                "ref": str(seq),
                "kind": kind,
                "at": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
                **data,
            }
            line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
            fh = f.handle
            if fh is None:
                fh = f.handle = self._open(f)
            # One write of the whole line, flushed at once: a crash leaves at most this line torn.
            fh.write(line.encode("utf-8"))
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
            f.seq = seq
            return str(seq)

    def _open(self, f: _SessionFile) -> BinaryIO:
        # Handles stay open between entries (an open per entry costs more than the write);
        # at most MAX_OPEN sessions keep one, the least recently opened is closed first.
        with self._lock:
            keep: list[_SessionFile] = []
            excess = len(self._open_order) + 1 - self.MAX_OPEN
            for old in self._open_order:
                # Never wait for another session's lock here (it may be waiting for ours):
                # a session busy writing keeps its handle until a later eviction.
                if excess > 0 and old is not f and old.lock.acquire(blocking=False):
                    try:
                        if old.handle is not None:
                            old.handle.close()
                            old.handle = None
                    finally:
                        old.lock.release()
                    excess -= 1
                else:
                    keep.append(old)
            keep.append(f)
            self._open_order = keep
        return f.path.open("ab")

    def close(self) -> None:
        """Close every open session file (entries are already on disk)."""
        with self._lock:
            for f in self._open_order:
                if f.handle is not None:
                    f.handle.close()
                    f.handle = None
            self._open_order.clear()

    def read(self, session_id: str) -> TrajectoryRead:
        return read_trajectory(self.path_for(session_id))

    def entries(self, session_id: str) -> Iterator[TrajectoryEntry]:
        yield from self.read(session_id).entries
