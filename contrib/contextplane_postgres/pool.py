"""The connection pool, kept usable across a server restart: fail fast while the server is
gone, start afresh the moment it is back.

Why not ``psycopg_pool`` alone: after ``pg_ctl stop -m immediate`` and a restart, its pooled
connections are all broken, and it replaces them in the background with an exponential
backoff (1, 2, 4, 8... s) while every client waits up to the acquisition timeout. Measured
before issue 26: turns took 22-31 s while the server was down (then raised), the same backend
composed cleanly only 54-57 s after the server was back, writes failed on broken pooled
connections, and each outage logged ~20 multi-line warnings.

So this module owns recovery:

- every connection is checked as it is handed out (``SELECT ''``, one round trip); a broken one
  makes the pool ask the server directly (one ``connect`` bounded by ``connect_timeout_s``);
- server unreachable: the pool is closed (its background reconnects and their warnings stop),
  one line is logged, and every borrow fails at once with ``ServerUnreachable`` ("cannot
  connect to ..."), asking the server again at most every ``RETRY_S``;
- server reachable (it restarted meanwhile, or the probe after an outage succeeds): a new pool
  replaces the old one, so the next borrow gets a fresh connection, with no backoff to sit out;
- all connections busy for ``acquire_timeout_s`` (``[plugin.postgres] pool_timeout_s``): a
  ``StoreError`` naming the setting, unless the server turns out to be gone.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

import psycopg
import psycopg_pool

from contextplane.errors import StoreError
from contextplane_postgres.url import redact

log = logging.getLogger("contextplane.postgres")

#: While the server is unreachable, ask it again at most this often (seconds); in between a
#: borrow fails at once with the last answer.
RETRY_S: Final[float] = 0.5
#: Pool names start with this; ``_QuietPoolWarnings`` drops psycopg_pool's warnings about them
#: (this module logs one line per outage instead).
POOL_NAME: Final[str] = "contextplane"


class ServerUnreachable(StoreError):
    """The PostgreSQL server cannot be reached right now (down, restarting, unreachable)."""


#: psycopg_pool warnings that name a connection rather than its pool.
_CONNECTION_WARNINGS: Final[tuple[str, ...]] = (
    "discarding closed connection",
    "discarding broken connection",
)


class _QuietPoolWarnings(logging.Filter):
    """psycopg_pool logs each failed background reconnect of our pools as a multi-line warning
    (~20 per outage); ``ServerPool`` logs the outage once, so those are dropped. Other pools'
    records pass untouched."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        text = record.msg if isinstance(record.msg, str) else ""
        named = any(isinstance(a, str) and a.startswith(POOL_NAME) for a in args)
        return not (named or text.startswith(_CONNECTION_WARNINGS))


_quiet = _QuietPoolWarnings()


def quiet_pool_warnings() -> None:
    """Install the filter once on psycopg_pool's logger."""
    pool_log = logging.getLogger("psycopg.pool")
    if _quiet not in pool_log.filters:
        pool_log.addFilter(_quiet)


class ServerPool:
    """Pooled autocommit connections to one server that survive its restarts (see the module)."""

    def __init__(
        self,
        url: str,
        options: str,
        *,
        min_size: int,
        max_size: int,
        connect_timeout_s: int,
        acquire_timeout_s: float,
        configure: Callable[[psycopg.Connection[Any]], None] | None = None,
        explain: Callable[[BaseException, str], StoreError],
    ) -> None:
        self.url = url
        self.shown = redact(url)
        self._options = options
        self._min_size, self._max_size = min_size, max_size
        self._connect_timeout_s = connect_timeout_s
        self.acquire_timeout_s = float(acquire_timeout_s)
        self._configure = configure
        self._explain = explain
        self._lock = threading.Lock()
        self._closed = False
        #: When the server was found unreachable (monotonic), and what it answered.
        self._down_since: float | None = None
        self._down_error: ServerUnreachable | None = None
        self._probed_at = 0.0
        quiet_pool_warnings()
        self._pool: psycopg_pool.ConnectionPool[Any] | None = self._new_pool(wait=True)

    # ------------------------------------------------------------------ pools

    def _new_pool(self, *, wait: bool) -> psycopg_pool.ConnectionPool[Any]:
        pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            self.url,
            min_size=self._min_size,
            max_size=self._max_size,
            kwargs={"options": self._options, "autocommit": True, "connect_timeout": self._connect_timeout_s},
            configure=self._configure,
            open=False,
            name=POOL_NAME,
            timeout=self.acquire_timeout_s,
        )
        pool.open(wait=False)
        if wait:
            try:
                pool.wait(timeout=float(self._connect_timeout_s) + 5)
            except psycopg_pool.PoolTimeout as exc:
                pool.close(timeout=0)
                raise StoreError(
                    f"cannot open a connection pool to {self.shown} within {self._connect_timeout_s + 5} s "
                    f"({exc}); is the server overloaded or out of connection slots (max_connections)?"
                ) from None
        return pool

    def _probe(self) -> ServerUnreachable | None:
        """Ask the server directly; the reason it cannot be reached, or None when it can."""
        try:
            conn = psycopg.connect(
                self.url, options=self._options, connect_timeout=self._connect_timeout_s, autocommit=True
            )
        except psycopg.Error as exc:
            reason = self._explain(exc, self.url)
            return ServerUnreachable(str(reason))
        conn.close()
        return None

    def _current(self) -> psycopg_pool.ConnectionPool[Any]:
        """The pool to borrow from: fails at once while the server is known to be gone (asking
        it again at most every ``RETRY_S``), and opens a new pool when it is back."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.shown}: the backend is closed")
            if self._pool is not None:
                return self._pool
            now = time.monotonic()
            if self._down_error is not None and now - self._probed_at < RETRY_S:
                raise ServerUnreachable(str(self._down_error))
            self._probed_at = now
            reason = self._probe()
            if reason is not None:
                self._down_error = reason
                raise reason
            down_for = now - (self._down_since or now)
            self._down_since, self._down_error = None, None
            self._pool = self._new_pool(wait=False)
            log.warning("the PostgreSQL server at %s is reachable again (after %.1f s)", self.shown, down_for)
            return self._pool

    def _lost(
        self, pool: psycopg_pool.ConnectionPool[Any], reason: ServerUnreachable | None = None
    ) -> ServerUnreachable | None:
        """A connection of ``pool`` broke (or, with ``reason``, the server did not answer):
        retire the pool (its connections all predate whatever happened), then find out whether
        the server is gone (the reason) or was restarted (None: the next borrow gets a new pool)."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
                pool.close(timeout=0)
            elif self._pool is None and self._down_error is not None:
                return self._down_error  # another thread found it gone already
            elif self._pool is not None:
                return None  # another thread replaced the pool already
            now = time.monotonic()
            self._probed_at = now
            if reason is None:
                reason = self._probe()
            if reason is None:
                self._pool = self._new_pool(wait=False)
                log.warning(
                    "the PostgreSQL server at %s dropped this process's connections (restarted?); "
                    "reconnected",
                    self.shown,
                )
                return None
            if self._down_error is None:
                self._down_since = now
                log.warning(
                    "%s; memory reads and records fail at once until it is back (asked again at most "
                    "every %.1f s)",
                    reason,
                    RETRY_S,
                )
            self._down_error = reason
            return reason

    # ------------------------------------------------------------------ borrowing

    def _checked(self) -> tuple[psycopg_pool.ConnectionPool[Any], psycopg.Connection[Any]]:
        """A connection that answered a round trip just now, from the current pool: two tries,
        the second on the new pool a restart made (a bounded retry, never a wait)."""
        for _attempt in range(2):
            pool = self._current()
            try:
                conn = pool.getconn()
            except psycopg_pool.PoolClosed:
                continue  # replaced while we waited: try the new one
            except psycopg_pool.PoolTimeout as exc:
                unreachable = self._probe()  # every connection busy, or the server gone?
                if unreachable is not None:
                    raise (self._lost(pool, unreachable) or unreachable) from None
                raise StoreError(
                    f"{self.shown}: no pooled connection became free within {self.acquire_timeout_s:g} s "
                    f"({exc}); raise [plugin.postgres] pool_max_size or pool_timeout_s, or look for a "
                    "session that holds its connection"
                ) from None
            try:
                conn.execute("")
            except psycopg.Error:
                gone = self._lost(pool)
                pool.putconn(conn)  # the pool is closed now: the connection is closed quietly
                if gone is not None:
                    raise gone from None
                continue
            return pool, conn
        raise ServerUnreachable(
            f"cannot connect to the PostgreSQL server at {self.shown}: two fresh connections in a row broke; "
            "is the server restarting?"
        )

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A checked, pooled autocommit connection, returned afterwards. A connection that
        broke inside the block (whatever the block made of the error) retires the pool as a
        failed check does, so it is never handed out again nor reconnected with a backoff."""
        pool, conn = self._checked()
        try:
            yield conn
        finally:
            if conn.broken:
                self._lost(pool)
            elif conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE and not conn.closed:
                with contextlib.suppress(psycopg.Error):
                    conn.rollback()
            pool.putconn(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
