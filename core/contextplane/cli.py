"""The ``contextplane`` command line.

Each command is thin: it loads the configuration and the plugin host and calls the same public
functions a runtime calls, so what ``preview`` shows is what a model would see.

Commands from other distributions (``contextplane demo`` from ``contextplane_demo``, say)
plug in through the ``contextplane.commands`` entry-point group: each entry point names a
``click.Command``. Why an entry point rather than a lazy import here: the core must not name
the packages that plug into it (tests/core/test_layout.py holds it to that, lazy imports
included), and a third party adds a command the same way our own demo does.

No subcommand is imported to be listed: ``--help`` reads each one's short help from its source
(contextplane.cli_lazy), and a command's module, with the MCP server, Starlette, psycopg or the
store it needs, is imported only when that command runs. The core's own commands that live
beside the code they drive are named in ``BUILTIN`` for the same reason; the ones defined
below import what they run inside their bodies.

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

import click

from contextplane import __version__
from contextplane.cli_common import (
    USAGE_EXIT,
    command_backend,
    config_option,
    db_option,
    load,
    query_text,
    report_errors,
    usage_line,
)
from contextplane.cli_lazy import (
    entry_point_listing,
    entry_points,
    listed,
    load_entry_point,
    load_target,
    read_listing,
)
from contextplane.cli_params import Whole
from contextplane.textui import one_line

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


#: The core's own commands that live beside the code they drive: name -> ``module:attr``,
#: imported when the command runs.
BUILTIN: Mapping[str, str] = {
    "explain": "contextplane.explain.cli:explain_command",
    "memory": "contextplane.store.cli:memory",
    "migrate": "contextplane.store.cli:migrate_command",
    "replay": "contextplane.explain.cli:replay_command",
    "snapshots": "contextplane.observability.cli:snapshots",
    "store": "contextplane.store.commands:store",
}


@functools.cache
def _plugged_entry_points() -> Mapping[str, md.EntryPoint]:
    return entry_points(COMMANDS_GROUP)


@functools.cache
def _plugged_command(name: str) -> click.Command | None:
    """The command of the ``contextplane.commands`` entry point ``name``, loaded once (a
    stand-in that says why, if it cannot run); None when there is no such entry point."""
    ep = _plugged_entry_points().get(name)
    return None if ep is None else load_entry_point(name, ep)


def _plugged_commands() -> Mapping[str, click.Command]:
    """Every command of the ``contextplane.commands`` entry points, loaded (tests walk them)."""
    found = {name: _plugged_command(name) for name in _plugged_entry_points()}
    return {name: command for name, command in found.items() if command is not None}


@functools.cache
def _builtin(name: str) -> click.Command:
    command = load_target(BUILTIN[name])
    assert isinstance(command, click.Command), f"{BUILTIN[name]} is not a click.Command"
    return command


class _Group(click.Group):
    """Turns our deliberate errors into one clean line and exit code 2, never a traceback; adds
    the commands other distributions plug in."""

    def main(self, args: Sequence[str] | None = None, *pos: Any, **kwargs: Any) -> Any:
        with _one_line_notices():
            return super().main(args, *pos, **kwargs)

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        # The root's own options are parsed before ``invoke``: a usage error there
        # (``contextplane --verbose``) gets the same one line as any other.
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            click.echo(usage_line(exc), err=True)
            raise click.exceptions.Exit(USAGE_EXIT) from None

    def invoke(self, ctx: click.Context) -> Any:
        # Deliberate and usage errors: one ``error: ...`` line and exit 2 (cli_common).
        return report_errors(ctx, lambda: super(_Group, self).invoke(ctx))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *BUILTIN, *_plugged_entry_points()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        own = super().get_command(ctx, cmd_name)
        if own is not None:
            return own
        return _builtin(cmd_name) if cmd_name in BUILTIN else _plugged_command(cmd_name)

    def listed_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """What ``--help`` lists for ``cmd_name``: the command if it is defined here, else a
        stand-in with the help read from its source (nothing imported)."""
        own = super().get_command(ctx, cmd_name)
        if own is not None:
            return own
        if cmd_name in BUILTIN:
            listing = read_listing(BUILTIN[cmd_name])
            return listed(cmd_name, listing) if listing is not None else _builtin(cmd_name)
        ep = _plugged_entry_points().get(cmd_name)
        return None if ep is None else listed(cmd_name, entry_point_listing(cmd_name, ep))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Click's own, with ``listed_command`` where Click calls ``get_command``.
        commands = [
            (name, cmd)
            for name in self.list_commands(ctx)
            if (cmd := self.listed_command(ctx, name)) is not None and not cmd.hidden
        ]
        if not commands:
            return
        limit = formatter.width - 6 - max(len(name) for name, _cmd in commands)
        with formatter.section("Commands"):
            formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in commands])


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="contextplane")
def main() -> None:
    """Compose and inspect what an agent's model sees: stable prefix and projected context."""


@main.command("plugins")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file to use.")
@click.option("--strict", is_flag=True, default=None, help="Fail on the first plugin error.")
def plugins_cmd(config_path: str | None, strict: bool | None) -> None:
    """List loaded plugins as JSON: name, distribution, version, hooks, sections and errors."""
    import attrs

    _config, host = load(config_path, strict)
    out = [attrs.asdict(info) for info in host.plugin_infos()]
    click.echo(json.dumps(out, indent=2))


def _project_id(project: str | None) -> str | None:
    """``--project`` takes the id (``website``) or the scope (``project:website``)."""
    if project is None:
        return None
    return project.removeprefix("project:") or None


@main.command("preview")
@click.argument("query")
@config_option
@db_option
@click.option("--session", "session_id", default="preview", show_default=True, help="Session id of the turn.")
@click.option("--project", default=None, help="Project of the turn: its id, or the scope project:<id>.")
@click.option("--incognito", is_flag=True, help="Compose as an incognito turn (no memory sections).")
@click.option("--goal-turn", is_flag=True, help="Compose as an autonomous goal turn (no digest).")
@click.option(
    "--budget-tokens", type=Whole(0), default=None, help="Override the budget (0 = unbounded)."
)
@click.option(
    "--context-window", type=Whole(1), default=None, help="Model context window, tokens."
)
@click.option("--tool", "tools", multiple=True, help="A tool bound at build time (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--record",
    is_flag=True,
    help="Record the turn as a runtime would (injection log, turn inputs, prompt snapshot), as the "
    "session's next turn, so explain, replay and snapshots can be tried on it. Creates the store if none.",
)
def preview_cmd(
    query: str,
    config_path: str | None,
    db: Path | None,
    session_id: str,
    project: str | None,
    incognito: bool,
    goal_turn: bool,
    budget_tokens: int | None,
    context_window: int | None,
    tools: tuple[str, ...],
    as_json: bool,
    record: bool,
) -> None:
    """Show the stable prefix (its sections and their text) and the projected context for QUERY,
    with a budget table. Reads the store a runtime would, read-only: nothing is written (the
    store must exist), unless --record records the turn."""
    import attrs

    from contextplane.authority import build_stable_prefix, section_texts
    from contextplane.delivery import PLAIN
    from contextplane.embedding import FULL_TEXT_ONLY
    from contextplane.request import BuildContext
    from contextplane.runtime import open_runtime
    from contextplane.textui import budget_table, table

    query = query_text(query)
    config, host = load(config_path)
    notes: list[str] = []
    # The store first: a path with no store is one error line, before any prefix warning.
    with command_backend(config_path, db, write=record, create=record, host=host) as (_c, _h, backend):
        prefix = build_stable_prefix(host, BuildContext(config=config, tools=tools), notify=False)
        turn_index = _next_turn(backend, session_id) if record else 0
        if not getattr(backend.memories, "vectors_enabled", False):
            notes.append(FULL_TEXT_ONLY)
        with open_runtime(config, backend=backend, host=host, prefix=prefix) as runtime:
            turn = runtime.compose(
                runtime.request(
                    query,
                    incognito=incognito,
                    goal_turn=goal_turn,
                    budget_tokens=budget_tokens,
                    context_window=context_window,
                    session_id=session_id,
                    turn_index=turn_index,
                    project=_project_id(project),
                    record=record,
                )
            )
            if record:
                # The model call a runtime would make next: its prompt snapshot is recorded here.
                runtime.deliver(turn, [{"role": "user", "content": query}], PLAIN, call_index=0)
        projection = turn.projection
        if record:
            notes.append(
                f"recorded as session {session_id!r} turn {turn_index}: try `contextplane replay "
                f"--session {session_id} --turn {turn_index}` or `contextplane explain ID --session "
                f"{session_id} --turn {turn_index}`"
            )
    if as_json:
        click.echo(
            json.dumps(
                {
                    "stable_prefix": attrs.asdict(prefix),
                    "projected_context": projection.as_dict(),
                    "notes": notes,
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
        for name, text in section_texts(prefix).items():
            click.echo(f"\n-- {name}\n{text}")
    else:
        click.echo("(no prompt sections registered)")
    for err in prefix.errors:
        click.echo(f"! {err}")
    click.echo("\n== projected context ==")
    click.echo(projection.text or "(empty)")
    click.echo("\n== budget ==")
    click.echo(budget_table(projection))
    for w in (*projection.warnings, *notes):
        click.echo(f"! {w}")
    for f in host.failures:
        if f.describe() not in prefix.errors:  # a plugin left out of the prefix is shown above
            click.echo(f"! {f.describe()}")


def _next_turn(backend: Any, session_id: str) -> int:
    """The turn after the session's last recorded one (1 for a new session)."""
    rows = backend.injections.rows(session_id)
    return max((r.turn_index for r in rows), default=0) + 1


@main.command("injections")
@config_option
@db_option
@click.option("--session", "session_id", default=None, help="Only this session.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def injections_cmd(config_path: str | None, db: Path | None, session_id: str | None, as_json: bool) -> None:
    """Show the injection log: per projection, the ids delivered after shedding."""
    import attrs

    from contextplane.textui import table

    with command_backend(config_path, db, write=False) as (_config, _host, backend):
        rows = backend.injections.rows(session_id)
    if as_json:
        click.echo(json.dumps([attrs.asdict(r) for r in rows], indent=2))
        return
    if not rows:
        click.echo("no injections" + (f" for session {session_id!r}" if session_id else ""))
        return
    click.echo(
        table(
            ["session", "turn", "at", "mode", "~tokens", "ids"],
            [[r.session_id, r.turn_index, r.at, r.mode, r.approx_tokens, " ".join(r.ids)] for r in rows],
        )
    )
