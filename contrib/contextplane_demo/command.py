"""``contextplane demo``, plugged into the command line through ``contextplane.commands``.

The command line loads this entry point only to list or run the command; importing the demo
costs little beyond the core, which the command line has loaded already.
"""

from __future__ import annotations

import click

from contextplane.cli_common import Command
from contextplane_demo.session import run_demo


@click.command("demo", cls=Command)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to create the demo store, kept afterwards (default: a new temporary directory, "
    "removed at the end).",
)
def demo(directory: str | None) -> None:
    """Seed a local SQLite store, run a scripted session and check the ADR's promises."""
    result = run_demo(directory, echo=click.echo)
    if not result.ok:
        raise SystemExit(1)
