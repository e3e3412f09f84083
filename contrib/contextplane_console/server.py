"""Serving the console: uvicorn on a socket the console binds itself.

Why bind first: with ``--port 0`` the port is chosen by the system, and the URL (with the
access token when there is one) must be printed before the first request can come in; tests
and the benchmark start a server the same way, in a thread, on a free loopback port.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from contextplane.errors import ContextPlaneError


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or an error saying what to pass instead."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ContextPlaneError(
            f"--host {host} --port {port}: cannot listen there ({exc.strerror or exc}); "
            "pass another --port (0 picks a free one) or another --host"
        ) from None
    if family in (socket.AF_INET, socket.AF_INET6):
        # Linux hands this to every accepted connection: without it a response whose headers
        # and body are two writes waits ~40 ms on the client's delayed ACK (Nagle).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.listen(128)
    sock.setblocking(False)
    return sock


class ConsoleServer:
    """One console server: ``serve()`` blocks (the command); ``start()``/``stop()`` run it on a
    thread (tests, the benchmark)."""

    def __init__(
        self, app: Any, host: str = "127.0.0.1", port: int = 0, *, sock: socket.socket | None = None
    ) -> None:
        self.host = host
        self.socket = bind(host, port) if sock is None else sock
        self.port = int(self.socket.getsockname()[1])
        # No access log: uvicorn's would print query strings (the token link); the console
        # logs method, path and status itself on ``contextplane.console``.
        config = uvicorn.Config(app, log_config=None, access_log=False, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def serve(self) -> None:
        self.server.run(sockets=[self.socket])

    def start(self, timeout: float = 10.0) -> ConsoleServer:
        self._thread = threading.Thread(target=self.serve, name="contextplane-console", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the console server did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self.socket.close()

    def __enter__(self) -> ConsoleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
