"""``contextplane store``: keeping a store sound. ``check`` is the core's; a backend's own
commands (the PostgreSQL backend's ``copy``, ``init`` and ``status``) plug in through the
``contextplane.store_commands`` entry-point group, so the core names no backend.

Why ``check`` works on both kinds: the embedded store is checked as a file (it may be too
damaged for the store to open it); any other backend is opened as the configuration says and
asked to check itself (``contextplane.store.StoreCheck``).
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import logging
from collections.abc import Mapping
from pathlib import Path

import click

from contextplane.backends import open_backend, store_path
from contextplane.cli_common import CommandGroup, config_option, db_option, load
from contextplane.errors import StoreError
from contextplane.store.check import check_file
from contextplane.store.protocol import StoreCheck
from contextplane.textui import one_line

#: Entry-point group of the subcommands a backend adds to ``contextplane store``.
STORE_COMMANDS_GROUP = "contextplane.store_commands"

#: ``store check``'s exit status when it found a problem (2 stays a usage or deliberate error).
PROBLEMS_EXIT = 1

log = logging.getLogger("contextplane.cli")


@functools.cache
def _plugged() -> Mapping[str, click.Command]:
    found: dict[str, click.Command] = {}
    for ep in sorted(md.entry_points(group=STORE_COMMANDS_GROUP), key=lambda e: e.name):
        try:
            command = ep.load()
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
            log.warning("store command %r (%s) could not be loaded: %s", ep.name, ep.value, why)
            continue
        if isinstance(command, click.Command):
            found.setdefault(ep.name, command)
    return found


class _StoreGroup(CommandGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_plugged()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or _plugged().get(cmd_name)


@click.group("store", cls=_StoreGroup)
def store() -> None:
    """Keep a store sound: check it; a backend's own commands (PostgreSQL: copy, init, status)."""


@store.command("check")
@db_option
@config_option
@click.option("--quick", is_flag=True, help="PRAGMA quick_check instead of integrity_check (embedded store).")
@click.pass_context
def check_command(ctx: click.Context, db: Path | None, config_path: str | None, quick: bool) -> None:
    """Check the store: its pages and indexes, every row's history, its vector index.

    One line per problem and exit status 1; a sound store prints one ok line and exits 0.
    Run it after a crash, a full disk or a copy, and before a backup is trusted."""
    config, host = load(config_path)
    checked: tuple[str, ...] = ()
    if db is None and config.store.backend != "sqlite":
        backend = open_backend(host, read_only=True)
        try:
            memories = backend.memories
            if not isinstance(memories, StoreCheck):
                raise StoreError(f"backend {backend.name} offers no check (its store has no check())")
            target, problems = backend.name, list(memories.check())
        finally:
            backend.close()
    else:
        path = store_path(config, db)
        if not path.exists():
            raise StoreError(f"{path}: no store here (no such file); pass --db to name one")
        report = check_file(path, quick=quick)
        target, problems, checked = report.target, list(report.problems), report.checked
    for problem in problems:
        click.echo(f"problem: {one_line(problem)}")
    if problems:
        click.echo(f"{target}: {len(problems)} problem{'s' if len(problems) != 1 else ''}", err=True)
        ctx.exit(PROBLEMS_EXIT)
    done = f" ({', '.join(checked)})" if checked else ""
    click.echo(f"{target}: ok{done}")

