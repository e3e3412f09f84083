"""What every command that reads the store shares: ``--config`` and ``--db``, one rule for
finding the store, and one way of opening it.

Why one module: ``memory``, ``migrate``, ``injections``, ``snapshots`` and ``preview`` each
used to find the store their own way, so an operator could curate memories into one file
while the agent read another. Now every command opens what a runtime with the same
configuration opens (``contextplane.backends.open_backend``): the backend a plugin offers, or
the embedded SQLite store with the plugin's knowledge store and embedder if any, at
``contextplane.backends.store_path`` (``--db``, else ``store.path`` relative to the config
file, else ``$CONTEXTPLANE_DB``, else the user data directory). ``--db`` always names an
embedded store file.

Commands that only read open the store read-only: the file must exist, and nothing in it
changes (not a table, not a migration, not its journal mode). Every deliberate error is a
``ContextPlaneError``; the root group prints it as one ``error: ...`` line and exits 2, as it
does for a usage error.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from contextplane.errors import ContextPlaneError
from contextplane.textui import one_line

if TYPE_CHECKING:
    from contextplane.config import Config
    from contextplane.plugins import PluginHost

# What a command runs (the configuration, the plugin host, the store) is imported when it runs:
# every command module imports this one, and ``contextplane --help`` must stay light
# (contextplane.cli_lazy).

F = TypeVar("F", bound=Callable[..., Any])

#: ``command_backend``'s default: the embedder the configuration names
#: (``contextplane.embedding.CONFIGURED``, looked up when a store is opened).
_AS_CONFIGURED: Any = object()

#: Exit status of every usage error and every deliberate error (``error: ...``).
USAGE_EXIT = 2

DB_HELP = (
    "Store file (default: store.path from the configuration, else $CONTEXTPLANE_DB, else "
    "<user data dir>/contextplane/memory.sqlite3)."
)


def report_errors(ctx: click.Context, call: Callable[[], Any]) -> Any:
    """Run ``call``; a deliberate error (``ContextPlaneError``) or a usage error becomes one
    ``error: ...`` line on stderr and exit status 2, never a traceback."""
    try:
        return call()
    except ContextPlaneError as exc:
        click.echo(f"error: {one_line(str(exc))}", err=True)
        ctx.exit(USAGE_EXIT)
    except click.UsageError as exc:
        click.echo(usage_line(exc), err=True)
        ctx.exit(USAGE_EXIT)


def usage_line(exc: click.UsageError) -> str:
    """A usage error as one ``error: ...`` line naming the help to read (Click prints a block)."""
    hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
    return f"error: {one_line(exc.format_message())}{hint}"


class CommandGroup(click.Group):
    """A command group that reports errors as ``report_errors`` does, however it is invoked
    (under ``contextplane`` or on its own, as tests and embedding programs do)."""

    def invoke(self, ctx: click.Context) -> Any:
        return report_errors(ctx, lambda: super(CommandGroup, self).invoke(ctx))


class Command(click.Command):
    """A command that reports errors as ``report_errors`` does."""

    def invoke(self, ctx: click.Context) -> Any:
        return report_errors(ctx, lambda: super(Command, self).invoke(ctx))


def query_text(query: str, field: str = "query") -> str:
    """A query from the command line, held to the rule ``memory add`` holds its text to: bytes
    that are not UTF-8 (a lone surrogate after the shell's decoding) are refused by name
    rather than silently matching nothing."""
    from contextplane.memory.model import validate_text

    return validate_text(query, field)


def config_option(func: F) -> F:
    return click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Config file (default: $CONTEXTPLANE_CONFIG, ./contextplane.toml, then the user config dir).",
    )(func)


def db_option(func: F) -> F:
    return click.option(
        "--db", "db", type=click.Path(dir_okay=False, path_type=Path), default=None, help=DB_HELP
    )(func)


def load(config_path: str | None, strict: bool | None = None) -> tuple[Config, PluginHost]:
    """The configuration and a plugin host built from it, as a runtime builds them."""
    from contextplane.config import load_config
    from contextplane.plugins import PluginHost

    config = load_config(config_path)
    return config, PluginHost.from_entry_points(config, strict=strict)


def command_store_path(config: Config, db: str | os.PathLike[str] | None) -> Path:
    """The embedded store file a command names: the runtime's rule, ``--db`` first."""
    from contextplane.backends import store_path

    return store_path(config, db)


@contextlib.contextmanager
def command_backend(
    config_path: str | None,
    db: str | os.PathLike[str] | None,
    *,
    write: bool,
    create: bool = False,
    host: PluginHost | None = None,
    embedder: Any = _AS_CONFIGURED,
) -> Iterator[tuple[Config, PluginHost, Any]]:
    """``(config, host, backend)`` for one command, closed afterwards: the backend a runtime
    with this configuration opens (``--db`` forces the embedded store at that file). Without
    ``write`` the embedded store is opened read-only; without ``create`` it must exist (only
    the commands documented to create a store pass it: a typo must not make an empty one)."""
    from contextplane.backends import open_backend
    from contextplane.embedding import CONFIGURED

    if embedder is _AS_CONFIGURED:
        embedder = CONFIGURED
    if host is None:
        config, host = load(config_path)
    else:
        config = host.config
    backend = open_backend(host, db, read_only=not write, create=create and write, embedder=embedder)
    try:
        yield config, host, backend
    finally:
        close = getattr(backend, "close", None)
        if callable(close):
            close()
