"""Connection settings, and turning what the server says into errors an operator can act on.

Why a direct connection before the pool (``Database`` opens one to set up the schema, and
``pool.ServerPool`` one whenever a pooled connection breaks): ``psycopg_pool`` retries a failing
connection in the background and finally reports only a timeout, so the reason (server down, no
such database, no such role) would be lost. A direct ``psycopg.connect`` gives the real reason;
its message is rewritten by ``explain`` to name the URL (without its password) and what to do.

Every connection runs in autocommit mode with the statement timeout, UTC and the backend's
schema on its search path, set once at connect time (``options``), so no statement pays for
them. Transactions are opened explicitly where a write or a consistent read needs one.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Final

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors

from contextplane.errors import StoreError
from contextplane_postgres.url import redact

SCHEMA_NAME: Final[re.Pattern[str]] = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_schema_name(name: object) -> str:
    """A schema name we can put on the search path without quoting (lowercase identifier)."""
    if not isinstance(name, str) or not SCHEMA_NAME.match(name):
        raise StoreError(
            f"schema: {name!r} is not a plain lowercase identifier (letters, digits, _; at most 63 "
            "characters, not starting with a digit); choose another [plugin.postgres] schema"
        )
    return name


def connect_options(
    schema: str, statement_timeout_ms: int, lock_timeout_ms: int, ef_search: int = 200
) -> str:
    """The libpq ``options`` every connection starts with (server settings, no round trip)."""
    return (
        f"-c search_path={schema},public -c TimeZone=UTC -c statement_timeout={int(statement_timeout_ms)} "
        f"-c lock_timeout={int(lock_timeout_ms)} -c hnsw.ef_search={int(ef_search)}"
    )


def explain(exc: BaseException, url: str, *, doing: str = "connect to") -> StoreError:
    """A ``StoreError`` saying what went wrong with ``url`` (redacted) and what to do about it."""
    shown = redact(url)
    text = " ".join(str(exc).split())
    text = text.replace(url, shown)
    if isinstance(exc, pg_errors.QueryCanceled):
        return StoreError(
            f"{shown}: a statement ran past the statement timeout and was cancelled ({text}); "
            "raise [plugin.postgres] statement_timeout_ms or look for a lock held by another session"
        )
    if isinstance(exc, pg_errors.LockNotAvailable):
        return StoreError(
            f"{shown}: a row or table lock was not granted within the lock timeout ({text}); "
            "another session holds it; retry, or raise [plugin.postgres] lock_timeout_ms"
        )
    if isinstance(exc, pg_errors.UniqueViolation):
        return StoreError(
            f"{shown}: a row with the same key is already stored ({text}); if this is `store copy`, "
            "something wrote to the destination while the copy was unfinished: copy into an empty schema"
        )
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return StoreError(
            f"{shown}: the database role lacks a right the backend needs ({text}); grant it (see "
            "contrib/contextplane_postgres/README.md, 'Least privileges') or connect as the schema's owner"
        )
    if isinstance(exc, pg_errors.UndefinedFile | pg_errors.FeatureNotSupported) and "vector" in text:
        return missing_vector(url, text)
    if isinstance(exc, psycopg.ProgrammingError) and doing == "connect to":  # libpq could not parse it
        return StoreError(
            f"{shown} is not a usable PostgreSQL connection URL ({text}); write it as "
            "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?host=SOCKET_DIR]"
        )
    if isinstance(exc, psycopg.OperationalError):
        if "does not exist" in text and "database" in text:
            hint = "create the database (createdb) or fix the URL's database name"
        elif "role" in text and "does not exist" in text:
            hint = "create the role or fix the URL's user name"
        elif "password authentication failed" in text or "no password supplied" in text:
            hint = "check the password (in the URL, PGPASSWORD or ~/.pgpass)"
        elif "timeout" in text or "Connection refused" in text or "No such file" in text:
            # libpq often asks this itself ("Is the server running on that host ..."): once is enough
            hint = "" if "server running" in text.lower() else "is the server running and listening there?"
        else:
            hint = "check that the server is running and the URL is right"
        said = f"cannot {doing} the PostgreSQL server at {shown}: {text}"
        return StoreError(f"{said}; {hint}" if hint else said)
    return StoreError(f"{shown}: {type(exc).__name__}: {text}")


def missing_vector(url: str, detail: str = "") -> StoreError:
    return StoreError(
        f"{redact(url)}: the pgvector extension ('vector') is not installed in this database"
        + (f" ({detail})" if detail else "")
        + "; install pgvector on the server and run CREATE EXTENSION vector as a superuser or the "
        "database owner, or open the backend without an embedder (full-text search only)"
    )


@contextlib.contextmanager
def translated(url: str, doing: str = "use") -> Iterator[None]:
    """Run a block that talks to the server; psycopg errors leave it as ``StoreError``."""
    try:
        yield
    except StoreError:
        raise
    except psycopg.Error as exc:
        raise explain(exc, url, doing=doing) from None
    except psycopg_pool.PoolTimeout as exc:
        raise StoreError(
            f"{redact(url)}: no pooled connection became free in time ({exc}); raise "
            "[plugin.postgres] pool_max_size or pool_timeout_s, or look for a session that holds "
            "its connection"
        ) from None
