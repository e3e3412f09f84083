"""``contextplane console``, plugged into the command line through ``contextplane.commands``."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

import click

from contextplane import ContextPlaneError, PluginHost, load_config, open_backend
from contextplane_console.app import create_app
from contextplane_console.security import is_loopback
from contextplane_console.server import ConsoleServer, bind

#: Where an operator configures the access token (an option would show it in ``ps``).
TOKEN_ENV = "CONTEXTPLANE_CONSOLE_TOKEN"
MIN_TOKEN_CHARS = 16


def access_token(host: str) -> str | None:
    """None on loopback; else the configured token, or a new one (printed at start)."""
    if is_loopback(host):
        return None
    configured = os.environ.get(TOKEN_ENV)
    if configured is None:
        return secrets.token_urlsafe(32)
    if len(configured.strip()) < MIN_TOKEN_CHARS:
        raise ContextPlaneError(
            f"{TOKEN_ENV}: at least {MIN_TOKEN_CHARS} characters, got {len(configured.strip())}; "
            "unset it to have one generated"
        )
    return configured.strip()


@click.command("console")
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="Store file to open (default: the configured backend, else store.path).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port (0: any free one)."
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file to use.")
@click.option(
    "--reviewer",
    default="console",
    show_default=True,
    help="Who the memory history records as making the console's reviews and expiry changes.",
)
def console(db: str | None, host: str, port: int, config_path: str | None, reviewer: str) -> None:
    """Serve the console: memory review, prompt inspector and preview, with its JSON API.

    It listens on loopback unless --host says otherwise; anywhere else every request needs
    the access token ($CONTEXTPLANE_CONSOLE_TOKEN, else a new one, printed below)."""
    if db is not None and not Path(db).is_file():
        raise ContextPlaneError(
            f"--db {db}: no store there; pass an existing store, or run `contextplane demo` first"
        )
    if not reviewer.strip():
        raise ContextPlaneError(
            "--reviewer: must not be empty (who the history records for the console's changes)"
        )
    token = access_token(host)
    config = load_config(config_path)
    plugin_host = PluginHost.from_entry_points(config)
    backend = open_backend(plugin_host, db, create=False)  # a typo must not review an empty store
    sock = None
    try:
        # Bound first: the cookie is named after the port really listened on, so two consoles
        # started with --port 0 do not overwrite each other's token cookie.
        sock = bind(host, port)
        bound = int(sock.getsockname()[1])
        app = create_app(
            backend,
            plugin_host,
            token=token,
            loopback_only=token is None,
            cookie_name=f"contextplane_console_{bound}",
            reviewer=reviewer,
        )
        server = ConsoleServer(app, host, bound, sock=sock)
        click.echo(f"contextplane console over {backend.name}")
        click.echo(f"open {server.url}/" + (f"?token={token}" if token else ""))
        if token is not None:
            click.echo(
                f"listening on {host}, beyond loopback: every request needs the token "
                f"(the link sets it; API clients send 'Authorization: Bearer <token>')"
            )
        click.echo("press Ctrl+C to stop")
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn stops on Ctrl+C, then re-raises it
            server.serve()
        click.echo("console stopped")
    finally:
        if sock is not None:
            sock.close()
        backend.close()
