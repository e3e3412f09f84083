"""One PostgreSQL database as the backend uses it: the pool, the schema, the name it is shown by.

Opening does, in order: a probe connection (the real reason when the server cannot be
reached), the PostgreSQL schema and the versioned tables (``schema``), the pgvector extension
when vectors are wanted, then the pool (``pool.ServerPool``: it survives a server restart).
Everything later borrows a pooled connection through ``connection()``, which turns psycopg's
errors into ``StoreError`` naming the URL without its password.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import psycopg

from contextplane.errors import StoreError
from contextplane_postgres import schema as pg_schema
from contextplane_postgres.connection import (
    check_schema_name,
    connect_options,
    explain,
    missing_vector,
    translated,
)
from contextplane_postgres.pool import ServerPool
from contextplane_postgres.url import redact

log = logging.getLogger("contextplane.postgres")


def _register_vector(conn: psycopg.Connection[Any]) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)


class Database:
    """A pool of connections to one schema of one PostgreSQL database."""

    def __init__(
        self,
        url: str,
        *,
        schema: str = "contextplane",
        vectors: bool = False,
        statement_timeout_ms: int = 30_000,
        lock_timeout_ms: int = 10_000,
        hnsw_ef_search: int = 200,
        connect_timeout_s: int = 5,
        pool_min_size: int = 1,
        pool_max_size: int = 10,
        pool_timeout_s: float = 5,
        create: bool = True,
        target_version: int = pg_schema.SCHEMA_VERSION,
    ) -> None:
        self.url = url
        self.schema = check_schema_name(schema)
        self.shown = f"{redact(url)} (schema {self.schema})"
        self.vectors = vectors
        #: ``observability.records_durability``: how ``record_transaction`` commits.
        self.records_durability = "full"
        self.options = connect_options(self.schema, statement_timeout_ms, lock_timeout_ms, hnsw_ef_search)
        self._setup(create, connect_timeout_s, target_version)
        self.pool = ServerPool(
            url,
            self.options,
            min_size=pool_min_size,
            max_size=pool_max_size,
            connect_timeout_s=connect_timeout_s,
            acquire_timeout_s=pool_timeout_s,
            configure=_register_vector if vectors else None,
            explain=lambda exc, url: explain(exc, url),
        )
        self.closed = False

    def _setup(self, create: bool, connect_timeout_s: int, target_version: int) -> None:
        try:
            conn = psycopg.connect(
                self.url, options=self.options, connect_timeout=connect_timeout_s, autocommit=True
            )
        except psycopg.Error as exc:
            raise explain(exc, self.url) from None
        try:
            with translated(self.url, "set up"):
                exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
                if exists.fetchone() is None and not create:
                    raise StoreError(
                        f"{self.shown}: there is no contextplane schema here; open it once with "
                        "create=True (or `contextplane store init`) as a role that may create it"
                    )
                pg_schema.ensure_namespace(conn, self.schema)
                usable = conn.execute("SELECT has_schema_privilege(%s, 'USAGE')", (self.schema,)).fetchone()
                if not usable or not usable[0]:
                    raise StoreError(
                        f"{self.shown}: the database role lacks a right the backend needs (no USAGE on "
                        f"schema {self.schema}); grant it (see contrib/contextplane_postgres/README.md, "
                        "'Least privileges') or connect as the schema's owner"
                    )
                start, end = pg_schema.ensure_schema(conn, self.schema, self.shown, target=target_version)
                if start != end:
                    log.info("%s: schema version %d -> %d", self.shown, start, end)
                if self.vectors:
                    self.ensure_vector(conn)
        finally:
            conn.close()

    def ensure_vector(self, conn: psycopg.Connection[Any]) -> None:
        """Create the pgvector extension unless it is there (a rebuild may be its first use)."""
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is not None:
            return
        available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        if available is None:
            raise missing_vector(self.url, "the server has no pgvector files")
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege as exc:
            raise missing_vector(self.url, " ".join(str(exc).split())) from None

    @contextlib.contextmanager
    def connection(self, doing: str = "use") -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection, checked as it is handed out; psycopg errors leave as
        ``StoreError``, and ``pool.ServerUnreachable`` at once while the server is gone."""
        if self.closed:
            raise StoreError(f"{self.shown}: the backend is closed")
        with translated(self.url, doing), self.pool.connection() as conn:
            yield conn

    @contextlib.contextmanager
    def transaction(self, doing: str = "write to") -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside one transaction (committed on success)."""
        with self.connection(doing) as conn, conn.transaction():
            yield conn

    @contextlib.contextmanager
    def record_transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A transaction for a turn's records (injection log, snapshots, turn inputs,
        trajectory). ``records_durability`` (``observability.records_durability``): "full", the
        default, and "fsync" commit like every write (the commit waits for its WAL flush, the
        server's ``synchronous_commit``); "relaxed" does not wait (``synchronous_commit = off``), so a
        server crash may lose the last fraction of a second of records (an immediate stop lost
        a just-returned turn's rows in 2 runs of 3, issue 26), never corrupting them. Memories
        always wait for the flush."""
        with self.transaction("write to") as conn:
            if self.records_durability == "relaxed":
                conn.execute("SET LOCAL synchronous_commit = off")
            yield conn

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pool.close()

    def __repr__(self) -> str:
        return f"<Database {self.shown}>"
