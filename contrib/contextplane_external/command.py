"""``contextplane mcp serve``: the memory tools over MCP, for an MCP client's configuration.

Plugged into the command line through the ``contextplane.commands`` entry-point group (as
``contextplane demo`` is), so the core never names this package. A client runs, say::

    {"command": "contextplane", "args": ["mcp", "serve", "--db", "/srv/agent/memory.sqlite3"]}

and talks to the server on stdin/stdout. The store is the one a runtime with the same
configuration opens (``contextplane.cli_common``: ``--config``, ``--db``, the plugins' backend,
knowledge store and embedder); ``--incognito`` refuses every write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from contextplane.cli_common import CommandGroup, command_backend, config_option, db_option
from contextplane_external.mcp_server import build_mcp_server
from contextplane_external.tools import ToolLimits, check_scopes


@click.group("mcp", cls=CommandGroup)
def mcp() -> None:
    """Serve the memory tools (memory_recall, memory_ingest) over MCP."""


@mcp.command("serve")
@config_option
@db_option
@click.option("--incognito", is_flag=True, help="Refuse every write (memory_ingest answers with why).")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "sse", "streamable-http"]),
    default="stdio",
    show_default=True,
    help="How the client talks to the server.",
)
@click.option("--namespace", "namespaces", multiple=True, help="Scopes recall may read (repeatable).")
@click.option(
    "--create",
    is_flag=True,
    help="Create the store if there is none (else a path with no store is refused: a typo in a "
    "client's configuration must not serve a fresh, empty memory).",
)
def serve(
    config_path: str | None,
    db: Path | None,
    incognito: bool,
    transport: str,
    namespaces: tuple[str, ...],
    create: bool,
) -> None:
    """Run the MCP server until the client disconnects (stdio by default). The store must
    exist unless --create. Every --namespace must be a scope ('', 'project:<id>',
    'session:<id>'): one that is not is refused here, not served as a scope no row is in."""
    scopes = check_scopes(list(namespaces) or None)
    with command_backend(config_path, db, write=not incognito, create=create) as (config, _host, backend):
        server: Any = build_mcp_server(
            backend.memories, incognito=incognito, namespaces=scopes, limits=ToolLimits.from_config(config)
        )
        server.run(transport)
