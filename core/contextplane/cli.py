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
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import click

from contextplane import __version__
from contextplane.authority import build_stable_prefix, section_texts
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
from contextplane.cli_params import Whole
from contextplane.delivery import deliver, plain_projection_message
from contextplane.embedding import FULL_TEXT_ONLY
from contextplane.errors import ContextPlaneError
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
        except ModuleNotFoundError as exc:
            # A command whose extra is not installed (``console`` without jinja2, say): listed
            # with how to install it, and an error only when it is run.
            found.setdefault(ep.name, _not_installed(ep.name, ep.dist, exc))
            continue
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


def _extra_for(dist: md.Distribution | None, module: str) -> str | None:
    """The extra of ``dist`` that requires the distribution named like ``module`` (jinja2,
    mcp, starlette...), if any."""
    want = module.split(".")[0].lower().replace("_", "-")
    for requirement in (dist.requires or []) if dist is not None else []:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement)
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
        if name and extra and extra[1] != "test" and name[0].lower().replace("_", "-") == want:
            return extra[1]
    return None


def _not_installed(name: str, dist: md.Distribution | None, exc: ModuleNotFoundError) -> click.Command:
    """A stand-in for a command whose dependencies are missing: ``--help`` lists it with the
    install hint, and running it is that hint as one error line."""
    missing = exc.name or str(exc)
    extra = _extra_for(dist, missing)
    project = dist.name if dist is not None else "contextplane"
    hint = (
        f"pip install '{project}[{extra}]'"
        if extra
        else f"install the module {missing!r} it needs (pip install {missing})"
    )

    def run() -> None:
        raise ContextPlaneError(
            f"`contextplane {name}` is not installed: {hint} (no module named {missing!r})"
        )

    return click.Command(
        name,
        callback=run,
        help=f"Not installed: {hint}.",
        short_help=f"(not installed: {hint})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )


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
        return sorted({*super().list_commands(ctx), *_plugged_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        own = super().get_command(ctx, cmd_name)
        return own if own is not None else _plugged_commands().get(cmd_name)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="contextplane")
def main() -> None:
    """Compose and inspect what an agent's model sees: stable prefix and projected context."""


@main.command("plugins")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file to use.")
@click.option("--strict", is_flag=True, default=None, help="Fail on the first plugin error.")
def plugins_cmd(config_path: str | None, strict: bool | None) -> None:
    """List loaded plugins as JSON: name, distribution, version, hooks, sections and errors."""
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
    query = query_text(query)
    config, host = load(config_path)
    notes: list[str] = []
    # The store first: a path with no store is one error line, before any prefix warning.
    with command_backend(config_path, db, write=record, create=record, host=host) as (_c, _h, backend):
        prefix = build_stable_prefix(host, BuildContext(config=config, tools=tools), notify=False)
        turn_index = _next_turn(backend, session_id) if record else 0
        if not getattr(backend.memories, "vectors_enabled", False):
            notes.append(FULL_TEXT_ONLY)
        projection = compose_projected_context(
            query,
            backend,
            None,
            {},
            incognito=incognito,
            goal_turn=goal_turn,
            budget_tokens=budget_tokens,
            context_window=context_window,
            session_id=session_id,
            turn_index=turn_index,
            project=_project_id(project),
            record=record,
            backend=backend,
            host=host,
        )
        if record:
            # The model call a runtime would make next: its prompt snapshot is recorded here.
            history = [{"role": "user", "content": query}]
            wrap = plain_projection_message
            deliver(projection, history, prefix=prefix, call_index=0, wrap=wrap, host=host)
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


def _add_commands() -> None:
    # The store and observability command groups live beside the code they drive.
    from contextplane.explain.cli import explain_command, replay_command
    from contextplane.observability.cli import snapshots
    from contextplane.store.cli import memory, migrate_command
    from contextplane.store.commands import store

    main.add_command(memory)
    main.add_command(migrate_command)
    main.add_command(snapshots)
    main.add_command(explain_command)
    main.add_command(replay_command)
    main.add_command(store)


_add_commands()
