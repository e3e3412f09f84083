"""The embedded backend: memories, summaries, injection log and snapshots in one SQLite file.

The memory store is ``contextplane.store.SQLiteKnowledgeStore``; the record tables open their
own connections, so a record write never waits on the memory store's lock. Summaries live in
the memory file; the per-turn records (injection log, snapshots, turn inputs) in its records file
(``connection.records_path``), because a write to the memory file would empty the page cache
of the next composition's reads. Snapshots go to ``observability.telemetry_db`` when the
operator names one (telemetry kept apart, with its own retention). The trajectory (ADR 0102) is a
directory of JSONL files: ``observability.trajectory_dir``, else ``trajectories`` beside the
file; ``observability.trajectory = false`` keeps none.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from contextplane.backends.sqlite.connection import records_path, records_source
from contextplane.backends.sqlite.injections import SQLiteInjectionLog
from contextplane.backends.sqlite.snapshots import SQLiteSnapshotStore
from contextplane.backends.sqlite.summaries import SQLiteSessionSummaries
from contextplane.config import Config
from contextplane.memory.consolidation import Consolidation
from contextplane.observability.trajectory import TrajectoryWriter
from contextplane.records.backend import register_backend
from contextplane.store.protocol import KnowledgeStore
from contextplane.store.sqlite import SQLiteKnowledgeStore

__all__ = [
    "SQLiteBackend",
    "SQLiteInjectionLog",
    "SQLiteSessionSummaries",
    "SQLiteSnapshotStore",
    "records_path",
]


class SQLiteBackend:
    """All four records of a deployment in one local SQLite file (the embedded default).

    The record tables are opened lazily, on first use: a process that only reads memory never
    creates them.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        config: Config | None = None,
        memories: KnowledgeStore | None = None,
        embedder: Any = None,
        snapshot_batch_size: int = 1,
        read_only: bool = False,
    ) -> None:
        self.path = str(path)
        self.config = config if config is not None else Config()
        #: Inspecting (``contextplane memory list``, ``injections``, ``snapshots``, ``preview``):
        #: the file must exist, and nothing in it changes, not a table, not a migration.
        self.read_only = read_only
        if memories is None:
            memories = SQLiteKnowledgeStore(
                self.path,
                embedder=embedder,
                vector_probes=self.config.store.vector_probes,
                vector_memory_mb=self.config.store.vector_memory_mb,
                create=not read_only,
                read_only=read_only,
                consolidation=Consolidation.from_config(self.config),
            )
        self._memories = memories
        self._snapshot_batch_size = snapshot_batch_size
        self._summaries: SQLiteSessionSummaries | None = None
        self._injections: SQLiteInjectionLog | None = None
        self._snapshots: SQLiteSnapshotStore | None = None
        self._trajectory: TrajectoryWriter | None = None
        self._trajectory_made = False
        self._lock = threading.Lock()
        #: ``observability.records_durability``: how each record part commits (see ``connection``).
        self._durability = self.config.observability.records_durability
        register_backend(self)

    @classmethod
    def around(cls, store: SQLiteKnowledgeStore, config: Config | None = None) -> SQLiteBackend:
        """The backend of an already-open store, its records in the same file."""
        return cls(store.path, config=config, memories=store)

    def __repr__(self) -> str:
        return f"<SQLiteBackend {self.path}>"

    @property
    def name(self) -> str:
        return f"sqlite:{self.path}"

    @property
    def memories(self) -> KnowledgeStore:
        return self._memories

    @property
    def summaries(self) -> SQLiteSessionSummaries:
        with self._lock:
            if self._summaries is None:
                self._summaries = SQLiteSessionSummaries(
                    self.path, read_only=self.read_only, durability=self._durability
                )
            return self._summaries

    @property
    def injections(self) -> SQLiteInjectionLog:
        with self._lock:
            if self._injections is None:
                path, legacy = records_source(self.path, read_only=self.read_only)
                self._injections = SQLiteInjectionLog(
                    path, read_only=self.read_only, adopt_from=legacy, durability=self._durability
                )
            return self._injections

    @property
    def snapshots(self) -> SQLiteSnapshotStore:
        with self._lock:
            if self._snapshots is None:
                obs = self.config.observability
                target = self.config.resolve_path(obs.telemetry_db) if obs.telemetry_db else None
                path, legacy = records_source(self.path, read_only=self.read_only)
                self._snapshots = SQLiteSnapshotStore(
                    target if target is not None else path,
                    retention_days=obs.retention_days,
                    retention_count=obs.retention_count,
                    batch_size=self._snapshot_batch_size,
                    read_only=self.read_only,
                    adopt_from=None if target is not None else legacy,
                    durability=self._durability,
                )
            return self._snapshots

    @property
    def trajectory(self) -> TrajectoryWriter | None:
        with self._lock:
            if not self._trajectory_made:
                self._trajectory_made = True
                obs = self.config.observability
                if obs.trajectory:
                    directory = (
                        self.config.resolve_path(obs.trajectory_dir)
                        if obs.trajectory_dir
                        else Path(self.path).parent / "trajectories"
                    )
                    self._trajectory = TrajectoryWriter(directory, fsync=self._durability == "fsync")
            return self._trajectory

    def flush(self) -> None:
        """Write buffered snapshots now."""
        with self._lock:
            snapshots = self._snapshots
        if snapshots is not None:
            snapshots.flush()

    def close(self) -> None:
        """Close every record table and the memory store."""
        with self._lock:
            parts = (self._snapshots, self._summaries, self._injections)
            self._snapshots = self._summaries = self._injections = None
            trajectory, self._trajectory = self._trajectory, None
        for part in parts:
            if part is not None:
                part.close()
        if trajectory is not None:
            trajectory.close()
        self._memories.close()
