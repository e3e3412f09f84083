"""The PostgreSQL backend: memories, summaries, injection log, snapshots and trajectory in one
database, for deployments whose agent processes run on several machines.

One connection pool serves every record; the memory store and the record tables borrow from
it. The trajectory is a table too, unless ``observability.trajectory_dir`` names a directory
for JSONL files (the embedded backend's format).
``PostgresBackend.from_config`` is what the ``backend`` hook calls when the configuration
says ``[store] backend = "postgres"``; code may construct one directly with a URL.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from typing import Any

from contextplane.config import Config
from contextplane.embedding import Embedder
from contextplane.errors import ConfigError
from contextplane.memory.consolidation import Consolidation
from contextplane.observability.trajectory import TrajectoryWriter
from contextplane.records.backend import register_backend
from contextplane_postgres.database import Database
from contextplane_postgres.records import (
    PostgresInjectionLog,
    PostgresSessionSummaries,
    PostgresSnapshotStore,
    PostgresTrajectory,
)
from contextplane_postgres.sql import FTS_CAP
from contextplane_postgres.store import PostgresKnowledgeStore
from contextplane_postgres.url import database_url

#: ``[plugin.postgres]`` keys and their defaults.
SETTINGS: Mapping[str, Any] = {
    "schema": "contextplane",
    "statement_timeout_ms": 30_000,
    "lock_timeout_ms": 10_000,
    "hnsw_ef_search": 200,
    "connect_timeout_s": 5,
    "pool_min_size": 1,
    "pool_max_size": 10,
    "pool_timeout_s": 5,
    "fts_candidates": FTS_CAP,
    "embedder": None,
}


def settings(config: Config) -> dict[str, Any]:
    """``[plugin.postgres]`` checked against ``SETTINGS`` (unknown keys and wrong types refused)."""
    given = dict(config.plugin_settings("postgres"))
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        raise ConfigError(
            f"unknown key plugin.postgres.{unknown[0]}: remove it or check its spelling; known keys: "
            f"{', '.join(SETTINGS)} (in {config.source})"
        )
    out = dict(SETTINGS)
    for key, value in given.items():
        kind = str if key in ("schema", "embedder") else int
        if isinstance(value, bool) or not isinstance(value, kind) or (isinstance(value, int) and value < 1):
            want = "text" if kind is str else "a whole number >= 1"
            raise ConfigError(
                f"invalid value for plugin.postgres.{key}: expected {want}, got {value!r} "
                f"(in {config.source})"
            )
        out[key] = value
    return out


def load_embedder(spec: str, config: Config) -> Embedder:
    """``module:callable``, called with the configuration, returns the embedder to use."""
    module_name, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(
            f"invalid value for plugin.postgres.embedder: {spec!r} does not name a callable as "
            f"'module:function' ({type(exc).__name__}: {exc}) (in {config.source})"
        ) from None
    embedder: Embedder = factory(config)
    return embedder


class PostgresBackend:
    """Every record of a deployment in one PostgreSQL schema."""

    def __init__(
        self,
        url: str,
        *,
        config: Config | None = None,
        embedder: Embedder | None = None,
        schema: str = "contextplane",
        statement_timeout_ms: int = 30_000,
        lock_timeout_ms: int = 10_000,
        hnsw_ef_search: int = 200,
        connect_timeout_s: int = 5,
        pool_min_size: int = 1,
        pool_max_size: int = 10,
        pool_timeout_s: float = 5,
        fts_candidates: int = FTS_CAP,
        create: bool = True,
        target_version: int | None = None,
    ) -> None:
        self.config = config if config is not None else Config()
        extra = {} if target_version is None else {"target_version": target_version}
        self.db = Database(
            url,
            schema=schema,
            vectors=embedder is not None,
            statement_timeout_ms=statement_timeout_ms,
            lock_timeout_ms=lock_timeout_ms,
            hnsw_ef_search=hnsw_ef_search,
            connect_timeout_s=connect_timeout_s,
            pool_min_size=pool_min_size,
            pool_max_size=pool_max_size,
            pool_timeout_s=pool_timeout_s,
            create=create,
            **extra,
        )
        self.db.records_durability = self.config.observability.records_durability
        try:
            self._memories = PostgresKnowledgeStore(
                self.db,
                embedder=embedder,
                fts_cap=fts_candidates,
                consolidation=Consolidation.from_config(self.config),
            )
        except BaseException:
            self.db.close()
            raise
        self._summaries = PostgresSessionSummaries(self.db)
        self._injections = PostgresInjectionLog(self.db)
        self._snapshots: PostgresSnapshotStore | None = None
        self._trajectory = self._open_trajectory()
        self._lock = threading.Lock()
        register_backend(self)

    def _open_trajectory(self) -> PostgresTrajectory | TrajectoryWriter | None:
        """The trajectory table, or JSONL files when the operator names a directory for them."""
        obs = self.config.observability
        if not obs.trajectory:
            return None
        if obs.trajectory_dir:
            return TrajectoryWriter(
                self.config.resolve_path(obs.trajectory_dir), fsync=obs.records_durability == "fsync"
            )
        return PostgresTrajectory(self.db)

    @classmethod
    def from_config(
        cls, config: Config, *, environ: Mapping[str, str] | None = None, embedder: Embedder | None = None
    ) -> PostgresBackend:
        """The backend ``[store]`` and ``[plugin.postgres]`` describe, embedding with ``embedder``
        (the ``[embedder]`` one the host made); ``plugin.postgres.embedder`` (``module:callable``,
        the older way) overrides it."""
        opts = settings(config)
        spec = opts.pop("embedder")
        fts = opts.pop("fts_candidates")
        if spec:
            embedder = load_embedder(spec, config)
        return cls(
            database_url(config, environ), config=config, embedder=embedder, fts_candidates=fts, **opts
        )

    def __repr__(self) -> str:
        return f"<PostgresBackend {self.db.shown}>"

    @property
    def name(self) -> str:
        return f"postgres:{self.db.shown}"

    @property
    def memories(self) -> PostgresKnowledgeStore:
        return self._memories

    @property
    def summaries(self) -> PostgresSessionSummaries:
        return self._summaries

    @property
    def injections(self) -> PostgresInjectionLog:
        return self._injections

    @property
    def snapshots(self) -> PostgresSnapshotStore:
        with self._lock:
            if self._snapshots is None:
                obs = self.config.observability
                self._snapshots = PostgresSnapshotStore(
                    self.db, retention_days=obs.retention_days, retention_count=obs.retention_count
                )
            return self._snapshots

    @property
    def trajectory(self) -> PostgresTrajectory | TrajectoryWriter | None:
        return self._trajectory

    def flush(self) -> None:
        """Snapshots are written as they are captured; nothing is buffered."""

    def close(self) -> None:
        if self._trajectory is not None:
            self._trajectory.close()
        self.db.close()
