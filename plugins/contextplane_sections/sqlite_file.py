"""The SQLite file the digest and the injection log keep their tables in.

Both live beside the memory store, in the same file, so one local database holds what a
deployment remembers and what it delivered. This module owns the two things they share: how a
connection is opened (WAL, busy timeout, schema) and which file a turn's request points at.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

import apsw

from contextplane import ProjectionRequest
from contextplane.errors import StoreError

T = TypeVar("T")


def connect(path: str | os.PathLike[str], schema: str, what: str) -> apsw.Connection:
    """Open ``path`` in WAL mode with a busy timeout and apply ``schema`` (idempotent DDL)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = apsw.Connection(str(path))
        conn.set_busy_timeout(5_000)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(schema)
    except apsw.Error as exc:
        raise StoreError(f"{path}: cannot open {what} ({exc})") from None
    return conn


class SharedByPath(Generic[T]):
    """One instance per resolved file path per process, created on first use."""

    def __init__(self, factory: Callable[[str], T]) -> None:
        self._factory = factory
        self._open: dict[str, T] = {}
        self._lock = threading.Lock()

    def get(self, path: str | os.PathLike[str]) -> T:
        key = str(Path(path).resolve())
        with self._lock:
            found = self._open.get(key)
            if found is None:
                found = self._open[key] = self._factory(key)
            return found


def store_file(request: ProjectionRequest) -> Path | None:
    """The SQLite file of the turn: the store's own file, else ``store.path``, else none."""
    store_path = getattr(request.knowledge_store, "path", None)
    if isinstance(store_path, str) and store_path != ":memory:":
        return Path(store_path)
    if request.config.store.path:
        return request.config.resolve_path(request.config.store.path)
    return None
