"""``contextplane snapshots``: the prompt inspector (ADR D5).

``list`` shows one line per model call; ``show`` renders what one call's model saw, section
by section: the stable prefix's sections with sizes and hashes (and text, stored once per
hash), the projected sections with sizes, hashes and delivered ids, the context frames
stripped from the checkpoint, the cacheable prefix (its size, and what it shares with the
session's previous call or which section broke it), and the projection text from the
trajectory entry it references. Incognito calls show sizes only: there is no text to show.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from contextplane.authority import SECTION_SEPARATOR
from contextplane.backends import store_path
from contextplane.backends.sqlite import SQLiteSnapshotStore
from contextplane.backends.sqlite.connection import records_source
from contextplane.cli_common import CommandGroup, command_backend, load
from contextplane.cli_params import Whole
from contextplane.errors import StoreError
from contextplane.observability.snapshots import as_dict, snapshot_time
from contextplane.observability.trajectory import read_trajectory, session_filename
from contextplane.records.snapshots import PromptSnapshot
from contextplane.textui import table


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "-"


@contextlib.contextmanager
def _opened(db: str | None, trajectories: str | None, config_path: str | None) -> Iterator[tuple[Any, Path]]:
    """The snapshot store a runtime with this configuration records into, opened read-only
    (inspecting never creates a table nor prunes), and the trajectory directory beside it.

    Snapshots live in ``--db`` when given, else in the plugin backend's store, else in
    ``observability.telemetry_db``, else in the memory store's records file (``store_path``)."""
    config, host = load(config_path)
    obs = config.observability
    home = Path(db) if db else store_path(config)
    if trajectories:
        tdir = Path(trajectories)
    elif obs.trajectory_dir:
        tdir = config.resolve_path(obs.trajectory_dir)
    else:
        tdir = home.parent / "trajectories"
    if db is None and host.backend() is not None:
        with command_backend(config_path, None, write=False, host=host) as (_c, _h, backend):
            yield backend.snapshots, tdir
        return
    if db or not obs.telemetry_db:
        # a memory store's snapshots are in its records file (an older store's: in the store)
        path = Path(records_source(home, read_only=True)[0])
    else:
        path = config.resolve_path(obs.telemetry_db)
    store = SQLiteSnapshotStore(path, retention_days=0, retention_count=0, read_only=True)
    try:
        yield store, tdir
    finally:
        store.close()


@click.group("snapshots", cls=CommandGroup)
def snapshots() -> None:
    """Inspect prompt snapshots: what each model call saw."""


_db_option = click.option(
    "--db",
    type=click.Path(dir_okay=False),
    help="The file holding the snapshots: a store, or the telemetry database (default: "
    "observability.telemetry_db, else the store: store.path, $CONTEXTPLANE_DB, the user data dir).",
)
_traj_option = click.option("--trajectories", type=click.Path(file_okay=False), help="Trajectory directory.")
_config_option = click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file.")


@snapshots.command("list")
@click.option("--session", "session_id", help="Only this session.")
@click.option("--limit", type=Whole(1), default=None, help="Only the newest N snapshots.")
@click.option("--json", "as_json", is_flag=True, help="JSON lines instead of a table.")
@_db_option
@_config_option
def list_snapshots(
    session_id: str | None, limit: int | None, as_json: bool, db: str | None, config_path: str | None
) -> None:
    """One line per model call: key, time, mode, sizes, section count."""
    with _opened(db, None, config_path) as (store, _tdir):
        snaps = store.list(session_id, limit=limit)
    if as_json:
        for s in snaps:
            click.echo(json.dumps(as_dict(s), default=str))
        return
    if not snaps:
        click.echo("no snapshots" + (f" for session {session_id!r}" if session_id else ""))
        return
    rows = [
        [
            s.session_id,
            str(s.turn_index),
            str(s.call_index),
            snapshot_time(s.created_at),
            s.mode + (" (incognito)" if s.incognito else ""),
            _short(s.prefix_sha256),
            str(len(s.sections)),
            str(s.used_chars),
            str(s.history_messages),
            str(len(s.stripped)),
            _cache_cell(s),
        ]
        for s in snaps
    ]
    headers = [
        "session",
        "turn",
        "call",
        "at",
        "mode",
        "prefix",
        "sections",
        "projected",
        "history",
        "stripped",
        "cacheable prefix",
    ]
    click.echo(table(headers, rows))


def _cache_cell(s: PromptSnapshot) -> str:
    """The list's cacheable-prefix cell: the call's line without its head ('-' for a row
    recorded before the figure was)."""
    return "-" if s.cache is None else s.cache.line().removeprefix("cacheable prefix: ")


def _render(s: PromptSnapshot, prefix_text: str | None, projection_text: str | None) -> str:
    out = [
        f"snapshot {s.session_id} turn {s.turn_index} call {s.call_index}  ({snapshot_time(s.created_at)}, "
        f"mode {s.mode}{', incognito: no text recorded' if s.incognito else ''})",
        "",
        f"== stable prefix  sha256 {_short(s.prefix_sha256)}",
    ]
    if s.prefix_sections:
        out.append(
            table(
                ["section", "plugin", "chars", "sha256"],
                [[p.name, p.plugin or "-", str(p.chars), _short(p.sha256)] for p in s.prefix_sections],
            )
        )
        if prefix_text is not None:
            pos = 0
            for p in s.prefix_sections:
                out += ["", f"-- {p.name} ({p.chars} chars)", prefix_text[pos : pos + p.chars]]
                pos += p.chars + len(SECTION_SEPARATOR)
    else:
        out.append("(none)")
    out += [
        "",
        f"== session history  {s.history_messages} messages, {s.history_chars} chars "
        "(checkpointed messages the model saw, frames excluded)",
    ]
    if s.cache is not None:  # what a provider's prompt cache can reuse: prefix + history
        out += ["", f"== {s.cache.line()}  sha256 {_short(s.cache.sha256)}"]
    if s.stripped:
        out += ["", "== context frames stripped from the checkpoint view"]
        out.append(
            table(
                ["message id", "chars", "sha256"],
                [[f.message_id or "-", str(f.chars), _short(f.sha256)] for f in s.stripped],
            )
        )
    budget = "unbounded" if s.budget_chars is None else f"{s.budget_chars} chars"
    out += [
        "",
        f"== projected context  {s.used_chars} chars, budget {budget}, sha256 {_short(s.projection_sha256)}",
    ]
    if s.sections:
        out.append(
            table(
                ["section", "chars", "sha256", "ids"],
                [
                    [
                        sec.label + (" (truncated)" if sec.truncated else ""),
                        str(sec.chars),
                        _short(sec.sha256),
                        ", ".join(sec.ids) or "-",
                    ]
                    for sec in s.sections
                ],
            )
        )
    else:
        out.append("(nothing projected)")
    if projection_text:
        out += ["", projection_text]
    out += ["", f"== trajectory refs  {', '.join(s.trajectory_refs) or '-'}"]
    if s.full_text is not None:
        out += ["", "== full text (redacted, bounded)", s.full_text]
    return "\n".join(out)


@snapshots.command("show")
@click.argument("session_id")
@click.argument("turn", type=Whole())
@click.argument("call", type=Whole(), required=False, default=0)
@click.option("--json", "as_json", is_flag=True, help="The decoded row as JSON.")
@_db_option
@_traj_option
@_config_option
def show_snapshot(
    session_id: str,
    turn: int,
    call: int,
    as_json: bool,
    db: str | None,
    trajectories: str | None,
    config_path: str | None,
) -> None:
    """Render what the model saw in SESSION_ID's TURN, model call CALL (default 0)."""
    with _opened(db, trajectories, config_path) as (store, tdir):
        snap = store.get(session_id, turn, call)
        if snap is None:
            calls = [s.call_index for s in store.list(session_id) if s.turn_index == turn]
            hint = f"; calls recorded for that turn: {', '.join(map(str, calls))}" if calls else ""
            raise StoreError(f"no snapshot for session {session_id!r} turn {turn} call {call}{hint}")
        prefix_text = (
            store.prefix_text(snap.prefix_sha256) if snap.prefix_sha256 and not snap.incognito else None
        )
    if as_json:
        click.echo(json.dumps(as_dict(snap), default=str, indent=2))
        return
    projection_text = None
    if not snap.incognito and snap.trajectory_refs:
        read = read_trajectory(tdir / session_filename(session_id))
        for ref in snap.trajectory_refs:
            entry = read.get(ref)
            if entry is not None and entry.kind == "projection":
                projection_text = entry.data.get("text")
    click.echo(_render(snap, prefix_text, projection_text))
