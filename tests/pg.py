"""One PostgreSQL server for the whole test session (pgserver: PostgreSQL 16 + pgvector), and a
fresh schema per test.

Why one server: starting one costs 1-4 s, a schema costs milliseconds. pgserver ships wheels
for CPython on manylinux x86_64 only; elsewhere the PostgreSQL tests skip, saying so. Where it
has wheels it is a test dependency (the ``test`` extra), so a missing install fails the run.
As root, pgserver runs the server as a ``pgserver`` system user it creates and chowns the data
directory, making its parents readable: the data directory is under a fresh temporary
directory of its own.
"""

from __future__ import annotations

import platform
import shutil
import sys
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

#: Where pgserver publishes wheels (linux x86_64, CPython 3.11/3.12).
PGSERVER_PLATFORM = (
    sys.platform == "linux" and platform.machine() == "x86_64" and sys.version_info[:2] in ((3, 11), (3, 12))
)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    if not PGSERVER_PLATFORM:
        pytest.skip(
            "the PostgreSQL tests need pgserver, which has wheels for CPython 3.11/3.12 on manylinux "
            f"x86_64 only (this is {sys.platform} {platform.machine()}, Python {platform.python_version()})"
        )
    with warnings.catch_warnings():  # platformdirs warns about an unset XDG_RUNTIME_DIR as root
        warnings.simplefilter("ignore")
        import pgserver  # a missing install on a supported platform is a failure, not a skip

    base = Path(tempfile.mkdtemp(prefix="contextplane-pg-"))
    server = pgserver.get_server(base / "data", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url(pg_server: Any) -> str:
    """The server's URL (Unix socket, role ``postgres``)."""
    return str(pg_server.get_uri())


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    """A schema name no other test uses; dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schema(pg_url, name)


@pytest.fixture
def pg_backend_factory(pg_url: str) -> Iterator[Callable[..., Any]]:
    """``make(**kw)``: a ``PostgresBackend`` in a schema of its own (closed and dropped after)."""
    from contextplane_postgres import PostgresBackend

    made: list[tuple[Any, str]] = []

    def make(**kw: Any) -> Any:
        schema = kw.pop("schema", None) or f"t_{uuid.uuid4().hex[:12]}"
        kw.setdefault("pool_max_size", 4)
        backend = PostgresBackend(pg_url, schema=schema, **kw)
        made.append((backend, schema))
        return backend

    yield make
    for backend, schema in made:
        backend.close()
        drop_schema(pg_url, schema)


class RestartableServer:
    """A PostgreSQL server of one test's own, to stop (``pg_ctl stop -m immediate``, a crash
    as far as clients can tell) and start again on the same socket and data: the session-wide
    server is shared, so it is never the one stopped."""

    def __init__(self, server: Any) -> None:
        from urllib.parse import parse_qs, urlsplit

        self.server = server
        self.url = str(server.get_uri())
        self.socket_dir = parse_qs(urlsplit(self.url).query)["host"][0]

    def _pg_ctl(self, args: list[str]) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(args, pgdata=self.server.pgdata, user=self.server.system_user, timeout=30)

    def stop_immediately(self) -> None:
        self._pg_ctl(["-m", "immediate", "-w", "stop"])

    def start(self) -> None:
        """Start it as pgserver does (same socket directory and log), then tell pgserver about
        the new process, so its cleanup stops this one."""
        from pgserver.utils import PostmasterInfo

        self._pg_ctl(
            ["-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", str(self.server.log), "start"]
        )
        self.server._postmaster_info = PostmasterInfo.read_from_pgdata(self.server.pgdata)


@pytest.fixture(scope="module")
def restartable_pg_server() -> Iterator[RestartableServer]:
    """A server of the module's own (a 1-4 s start), stopped and deleted afterwards."""
    if not PGSERVER_PLATFORM:
        pytest.skip("the PostgreSQL tests need pgserver (CPython 3.11/3.12 on manylinux x86_64)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    base = Path(tempfile.mkdtemp(prefix="contextplane-pg-restart-"))
    server = pgserver.get_server(base / "data", cleanup_mode="delete")
    own = RestartableServer(server)
    try:
        yield own
    finally:
        from pgserver.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(server.pgdata)
        if info is None or not info.is_running():
            own.start()  # a test that failed while it was down: cleanup stops a running server
        server.cleanup()
        shutil.rmtree(base, ignore_errors=True)
