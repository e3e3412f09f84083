"""The ``contextplane`` command line.

Each command is thin: it loads the configuration and the plugin host and calls the same public
functions a runtime calls, so what ``preview`` shows is what a model would see.

Commands from other distributions (``contextplane demo`` from ``contextplane_demo``, say)
plug in through the ``contextplane.commands`` entry-point group: each entry point names a
``click.Command``. Why an entry point rather than a lazy import here: the core must not name
the packages that plug into it (tests/core/test_layout.py holds it to that, lazy imports
included), a command module is loaded only when its command is asked for (or listed by
``--help``), and a third party adds a command the same way our own demo does.

While a command runs, Python warnings and ``contextplane.*`` log records at WARNING and above
reach stderr as one line each (``warning: ...``), never with the warning's source line or a
traceback: an operator wants to know what was skipped, not where in our code it was noticed.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata as md
import json
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import click

from contextplane import __version__
from contextplane.authority import build_stable_prefix
from contextplane.config import Config, load_config
from contextplane.errors import ContextPlaneError
from contextplane.plugins import PluginHost
from contextplane.projection import compose_projected_context
from contextplane.request import BuildContext
from contextplane.textui import budget_table, one_line, table

#: Entry-point group of commands other distributions add to ``contextplane``.
COMMANDS_GROUP = "contextplane.commands"

log = logging.getLogger("contextplane.cli")


class _OneLineHandler(logging.Handler):
    """A ``contextplane`` log record as ``warning: <message>`` on stderr; no traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(f"warning: {one_line(record.getMessage())}", err=True)
        except Exception:
            self.handleError(record)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    click.echo(f"warning: {one_line(str(message))}", err=True)


@contextlib.contextmanager
def _one_line_notices() -> Iterator[None]:
    """Warnings and ``contextplane`` log records as one line each on stderr, for one invocation
    (put back afterwards, so a program that calls ``main`` keeps its own)."""
    logger = logging.getLogger("contextplane")
    handler = _OneLineHandler(logging.WARNING)
    previous = warnings.showwarning
    warnings.showwarning = _show_warning
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        warnings.showwarning = previous


@functools.cache
def _plugged_commands() -> Mapping[str, click.Command]:
    """The commands of the ``contextplane.commands`` entry points, loaded once; one that fails
    to load is skipped with a warning naming it."""
    found: dict[str, click.Command] = {}
    for ep in sorted(md.entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist is not None else "?"
        try:
            command = ep.load()
        except Exception as exc:
            log.warning(
                "command %r (entry point %s of %s) could not be loaded, so it is not available: %s: %s",
                ep.name,
                ep.value,
                dist,
                type(exc).__name__,
                exc,
            )
            continue
        if not isinstance(command, click.Command):
            log.warning(
                "command %r (entry point %s of %s) is a %s, not a click.Command; skipped",
                ep.name,
                ep.value,
                dist,
                type(command).__name__,
            )
            continue
        found.setdefault(ep.name, command)
    return found


class _Group(click.Group):
    """Turns our deliberate errors into one clean line and exit code 2, never a traceback; adds
    the commands other distributions plug in."""

    def main(self, args: Sequence[str] | None = None, *pos: Any, **kwargs: Any) -> Any:
        with _one_line_notices():
            return super().main(args, *pos, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ContextPlaneError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(2)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_plugged_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        own = super().get_command(ctx, cmd_name)
        return own if own is not None else _plugged_commands().get(cmd_name)


def _load(config_path: str | None, strict: bool | None = None) -> tuple[Config, PluginHost]:
    config = load_config(config_path)
    host = PluginHost.from_entry_points(config, strict=strict)
    return config, host


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="contextplane")
def main() -> None:
    """Compose and inspect what an agent's model sees: stable prefix and projected context."""


@main.command("plugins")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file to use.")
@click.option("--strict", is_flag=True, default=None, help="Fail on the first plugin error.")
def plugins_cmd(config_path: str | None, strict: bool | None) -> None:
    """List loaded plugins as JSON: name, distribution, version, hooks, sections and errors."""
    _config, host = _load(config_path, strict)
    out = [attrs.asdict(info) for info in host.plugin_infos()]
    click.echo(json.dumps(out, indent=2))


@main.command("preview")
@click.argument("query")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file to use.")
@click.option("--session", "session_id", default="preview", show_default=True, help="Session id of the turn.")
@click.option("--project", default=None, help="Project scope of the turn (project:<id>).")
@click.option("--incognito", is_flag=True, help="Compose as an incognito turn (no memory sections).")
@click.option("--goal-turn", is_flag=True, help="Compose as an autonomous goal turn (no digest).")
@click.option(
    "--budget-tokens", type=click.IntRange(min=0), default=None, help="Override the budget (0 = unbounded)."
)
@click.option(
    "--context-window", type=click.IntRange(min=1), default=None, help="Model context window, tokens."
)
@click.option("--tool", "tools", multiple=True, help="A tool bound at build time (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def preview_cmd(
    query: str,
    config_path: str | None,
    session_id: str,
    project: str | None,
    incognito: bool,
    goal_turn: bool,
    budget_tokens: int | None,
    context_window: int | None,
    tools: tuple[str, ...],
    as_json: bool,
) -> None:
    """Show the stable prefix's sections and the projected context for QUERY, with a budget table."""
    config, host = _load(config_path)
    prefix = build_stable_prefix(host, BuildContext(config=config, tools=tools), notify=False)
    from contextplane.defaults import open_knowledge_store

    store = open_knowledge_store(host)
    projection = compose_projected_context(
        query,
        store,
        None,
        {},
        incognito=incognito,
        goal_turn=goal_turn,
        budget_tokens=budget_tokens,
        context_window=context_window,
        session_id=session_id,
        project=project,
        record=False,
        host=host,
    )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "stable_prefix": attrs.asdict(prefix),
                    "projected_context": projection.as_dict(),
                },
                indent=2,
            )
        )
        return
    click.echo("== stable prefix ==")
    if prefix.sections:
        click.echo(
            table(
                ["section", "plugin", "chars", "sha256"],
                [[s.name, s.plugin, s.chars, s.sha256[:12]] for s in prefix.sections],
            )
        )
    else:
        click.echo("(no prompt sections registered)")
    for err in prefix.errors:
        click.echo(f"! {err}")
    click.echo("\n== projected context ==")
    click.echo(projection.text or "(empty)")
    click.echo("\n== budget ==")
    click.echo(budget_table(projection))
    for w in projection.warnings:
        click.echo(f"! {w}")
    for f in host.failures:
        click.echo(f"! {f.describe()}")


@main.command("injections")
@click.option(
    "--db", "db", type=click.Path(dir_okay=False), default=None, help="Store file (default: store.path)."
)
@click.option("--session", "session_id", default=None, help="Only this session.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file to use.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def injections_cmd(db: str | None, session_id: str | None, config_path: str | None, as_json: bool) -> None:
    """Show the injection log: per projection, the ids delivered after shedding."""
    from contextplane.backends.sqlite import SQLiteInjectionLog, records_path

    if db is None:
        config = load_config(config_path)
        from contextplane.store import default_db_path

        db = str(config.resolve_path(config.store.path)) if config.store.path else str(default_db_path())
    if not Path(db).exists():
        raise ContextPlaneError(f"no store at {db}: pass --db, or run `contextplane demo` first")
    injections = SQLiteInjectionLog(records_path(db), adopt_from=db)
    try:
        rows = injections.rows(session_id)
    finally:
        injections.close()
    if as_json:
        click.echo(json.dumps([attrs.asdict(r) for r in rows], indent=2))
        return
    click.echo(
        table(
            ["session", "turn", "at", "mode", "~tokens", "ids"],
            [[r.session_id, r.turn_index, r.at, r.mode, r.approx_tokens, " ".join(r.ids)] for r in rows],
        )
    )


def _add_commands() -> None:
    # The store and observability command groups live beside the code they drive.
    from contextplane.observability.cli import snapshots
    from contextplane.store.cli import memory, migrate_command

    main.add_command(memory)
    main.add_command(migrate_command)
    main.add_command(snapshots)


_add_commands()
