"""The ``contextplane`` command line.

Each command is thin: it loads the configuration and the plugin host and calls the same public
functions a runtime calls, so what ``preview`` shows is what a model would see.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import click

from contextplane import __version__
from contextplane.authority import build_stable_prefix
from contextplane.config import Config, load_config
from contextplane.errors import ContextPlaneError
from contextplane.plugins import PluginHost
from contextplane.projection import ProjectedContext, compose_projected_context
from contextplane.request import BuildContext
from contextplane.textui import table


class _Group(click.Group):
    """Turns our deliberate errors into one clean line and exit code 2, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ContextPlaneError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(2)


def _load(config_path: str | None, strict: bool | None = None) -> tuple[Config, PluginHost]:
    config = load_config(config_path)
    host = PluginHost.from_entry_points(config, strict=strict)
    return config, host


def budget_table(projection: ProjectedContext) -> str:
    """Per-section budget table: what each section offered, delivered and why."""
    rows = []
    for s in projection.sections:
        if s.suppressed:
            status = f"suppressed ({s.suppressed})"
        elif s.error:
            status = f"error: {s.error[:60]}"
        elif s.truncated:
            status = "shed"
        else:
            status = "ok"
        rows.append([s.name, s.plugin, s.priority, s.offered, len(s.item_ids), s.chars, s.chars // 4, status])
    budget = "unbounded" if projection.budget_chars is None else str(projection.budget_chars)
    rows.append(
        ["total", "", "", "", "", projection.used_chars, projection.approx_tokens, f"budget {budget}"]
    )
    return table(["section", "plugin", "prio", "offered", "kept", "chars", "~tokens", "status"], rows)


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
                    "projected_context": attrs.asdict(projection, value_serializer=_json_value),
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


def _json_value(_inst: Any, _field: Any, value: Any) -> Any:
    if hasattr(value, "value") and not isinstance(value, int | str | float):
        return value.value
    return value


@main.command("demo")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to create the demo store (default: a new temporary directory).",
)
def demo_cmd(directory: str | None) -> None:
    """Seed a local SQLite store, run a scripted session and check the ADR's promises."""
    from contextplane.demo import run_demo

    result = run_demo(directory, echo=click.echo)
    if not result.ok:
        raise SystemExit(1)


@main.command("injections")
@click.option(
    "--db", "db", type=click.Path(dir_okay=False), default=None, help="Store file (default: store.path)."
)
@click.option("--session", "session_id", default=None, help="Only this session.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file to use.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def injections_cmd(db: str | None, session_id: str | None, config_path: str | None, as_json: bool) -> None:
    """Show the injection log: per projection, the ids delivered after shedding."""
    from contextplane_sections.injection_log import InjectionLog

    if db is None:
        config = load_config(config_path)
        from contextplane.store import default_db_path

        db = str(config.resolve_path(config.store.path)) if config.store.path else str(default_db_path())
    from pathlib import Path

    if not Path(db).exists():
        raise ContextPlaneError(f"no store at {db}: pass --db, or run `contextplane demo` first")
    rows = InjectionLog(db).rows(session_id)
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
