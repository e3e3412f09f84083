"""The conformance kits on the PostgreSQL backend, opened the way a deployment opens it:
``[store] backend = "postgres"`` in the configuration, ``contextplane.open_backend(host)``,
the plugin's ``backend`` hook. Every STORE-* and RECORDS-* requirement must pass, the
lifecycle history and as-of ones included (no known gaps)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest

from contextplane import PluginHost, open_backend
from contextplane.config import structure
from contextplane.store.migrate import V1_SCHEMA_SQL
from contextplane.testing import BackendConformance, KnowledgeStoreConformance, LegacyRow
from contextplane_postgres.copy import copy_store
from tests.pg import drop_schema


@pytest.fixture
def configured_backend(pg_url: str) -> Iterator[Callable[[], Any]]:
    """``make()``: a backend chosen by configuration alone, in a schema of its own."""
    opened: list[tuple[Any, str]] = []

    def make() -> Any:
        schema = f"t_{uuid.uuid4().hex[:12]}"
        config = structure(
            {"store": {"backend": "postgres", "url": pg_url}, "plugin": {"postgres": {"schema": schema}}}
        )
        host = PluginHost.from_entry_points(config, strict=True)
        backend = open_backend(host)
        opened.append((backend, schema))
        return backend

    yield make
    for backend, schema in opened:
        backend.close()
        drop_schema(pg_url, schema)


class TestPostgresStore(KnowledgeStoreConformance):
    capabilities = frozenset(
        {"migration", "concurrent_writes", "consistent_read", "vector_space", "exact_restore", "following"}
    )

    @pytest.fixture
    def reopen(self, pg_url: str, pg_schema: str) -> Iterator[Callable[[Any], Any]]:
        from contextplane_postgres import PostgresBackend

        opened: list[Any] = []

        def make(embedder: Any) -> Any:
            opened.append(PostgresBackend(pg_url, schema=pg_schema, embedder=embedder, pool_max_size=2))
            return opened[-1].memories

        yield make
        for backend in opened:
            backend.close()

    @pytest.fixture
    def store(self, configured_backend: Callable[[], Any]) -> Any:
        backend = configured_backend()
        assert type(backend).__name__ == "PostgresBackend"
        return backend.memories

    @pytest.fixture
    def legacy_store(
        self, tmp_path: Path, configured_backend: Callable[[], Any]
    ) -> Callable[[Sequence[LegacyRow]], Any]:
        """Pre-D4 rows live in a version-1 embedded store; they reach PostgreSQL through
        ``contextplane store copy``, which applies the D4/D7 backfill as it copies (the source
        file is not migrated)."""

        def make(rows: Sequence[LegacyRow]) -> Any:
            path = tmp_path / f"legacy-{uuid.uuid4().hex[:6]}.sqlite3"
            conn = apsw.Connection(str(path))
            conn.execute(V1_SCHEMA_SQL)
            conn.executemany(
                "INSERT INTO chunks(content, domain, source_type, created_at, updated_at) "
                "VALUES (?, ?, ?, '2025-01-01T00:00:00.000000Z', '2025-01-01T00:00:00.000000Z')",
                list(rows),
            )
            conn.close()
            backend = configured_backend()
            copy_store(path, backend.db)
            version = apsw.Connection(str(path)).execute("PRAGMA user_version").fetchone()[0]
            assert version == 1, "the copy migrated its source"
            return backend.memories

        return make


class TestPostgresBackend(BackendConformance):
    @pytest.fixture
    def backend(self, configured_backend: Callable[[], Any]) -> Any:
        return configured_backend()
