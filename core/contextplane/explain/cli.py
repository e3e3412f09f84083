"""``contextplane explain`` and ``contextplane replay``: the command-line side of ``explain``.

Both open the deployment's backend as every command does (``contextplane.cli_common``: the
store a runtime with the same configuration opens; ``--db`` forces the embedded store at that
file), read-only: they never create, migrate or change the store, and nothing is recorded.
They load the plugins from entry points and call the same functions a program calls.
``replay`` exits 1 when the turn does not replay byte for byte (like ``diff``), so a script
can gate on it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from contextplane.cli_common import Command, command_backend, config_option, db_option, query_text
from contextplane.cli_params import Whole
from contextplane.explain.replay import ReplayReport, replay
from contextplane.explain.verdict import Verdict, explain
from contextplane.textui import table


def _common(func: Any) -> Any:
    func = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(func)
    return config_option(db_option(func))


def _evidence_lines(evidence: Mapping[str, Any], indent: str = "    ") -> list[str]:
    lines = []
    for key, value in evidence.items():
        if isinstance(value, list) and value and isinstance(value[0], Mapping):
            lines.append(f"{indent}{key}:")
            for item in value:
                lines.append(f"{indent}  - " + ", ".join(f"{k}={v}" for k, v in item.items()))
        else:
            lines.append(f"{indent}{key}: {value}")
    return lines


def render_verdict(verdict: Verdict) -> str:
    data = verdict.to_dict()
    head = verdict.verdict + (f" ({verdict.reason})" if verdict.reason else "")
    turn = data["turn"]
    where = (
        f"session {turn.get('session_id')!r} turn {turn.get('turn_index')}"
        if turn.get("basis") == "recorded"
        else f"a turn composed now (session {turn.get('session_id') or '-'!r})"
    )
    position = turn.get("history_position")
    when = f"; as of history #{position['seq']} at {position['at']}" if position else ""
    lines = [
        f"memory {verdict.memory_id}: {head}",
        f"  {verdict.summary}",
        f"  turn: {where}, query {turn.get('query', '')!r}{when}",
        "  evidence:",
        *_evidence_lines(data["evidence"]),
    ]
    return "\n".join(lines)


@click.command("explain", cls=Command)
@click.argument("memory_id")
@click.option("--session", "session_id", default=None, help="The session of a recorded turn (or of --query).")
@click.option("--turn", "turn_index", type=Whole(), default=None, help="The recorded turn to explain.")
@click.option("--query", default=None, help="Explain a turn composed now for this query instead.")
@click.option("--project", default=None, help="With --query: the turn's project scope.")
@click.option("--incognito", is_flag=True, help="With --query: compose as an incognito turn.")
@click.option("--goal-turn", is_flag=True, help="With --query: compose as a goal turn.")
@_common
def explain_command(
    memory_id: str,
    session_id: str | None,
    turn_index: int | None,
    query: str | None,
    project: str | None,
    incognito: bool,
    goal_turn: bool,
    db: Path | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Why MEMORY_ID was, or was not, used in one turn: one verdict with its evidence.

    Give a recorded turn (--session S --turn N: judged from its recorded inputs against the
    store as it was then) or --query Q (a turn composed now)."""
    if (turn_index is None) == (query is None):
        raise click.UsageError("give either --session S --turn N (a recorded turn) or --query Q (a turn now)")
    if query is not None:
        query = query_text(query, "--query")
    if turn_index is not None and session_id is None:
        raise click.UsageError("--turn needs --session")
    with command_backend(config_path, db, write=False) as (_config, host, backend):
        verdict = explain(
            memory_id,
            backend=backend,
            host=host,
            session_id=session_id,
            turn_index=turn_index,
            query=query,
            project=project,
            incognito=incognito,
            goal_turn=goal_turn,
        )
    if as_json:
        click.echo(json.dumps(verdict.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(render_verdict(verdict))


def render_report(report: ReplayReport) -> str:
    position = report.history_position
    basis = (
        "today's store and configuration"
        if report.mode == "now"
        else (f"the store as of history #{position.seq}" if position is not None else "the live store")
    )
    head = (
        f"session {report.session_id!r} turn {report.turn_index}: "
        + ("byte-identical to what was delivered" if report.identical else "DIFFERS from what was delivered")
        + f" (replayed against {basis})"
    )
    rows = []
    for diff in report.sections:
        then = diff.recorded or {}
        now = diff.replayed or {}
        rows.append(
            [
                diff.label,
                diff.status,
                str(then.get("chars", "-")),
                str(now.get("chars", "-")),
                (then.get("sha256") or "-")[:12],
                (now.get("sha256") or "-")[:12],
            ]
        )
    lines = [head, table(["section", "status", "chars then", "chars now", "sha256 then", "sha256 now"], rows)]
    for diff in report.changed:
        lines.append(f"{diff.label} ({diff.status}):")
        lines.extend(f"  - {reason}" for reason in diff.reasons)
    lines.extend(f"note: {note}" for note in report.notes)
    if report.text_diff:
        lines.append("text diff:")
        lines.extend(report.text_diff)
    return "\n".join(lines)


@click.command("replay", cls=Command)
@click.option("--session", "session_id", required=True, help="The session of the recorded turn.")
@click.option("--turn", "turn_index", type=Whole(), required=True, help="The recorded turn.")
@click.option("--now", is_flag=True, help="Recompose against today's store and configuration instead.")
@_common
def replay_command(
    session_id: str, turn_index: int, now: bool, db: Path | None, config_path: str | None, as_json: bool
) -> None:
    """Recompose a recorded turn from its recorded inputs and compare it with what was delivered.

    Exits 1 when it is not byte-identical, with a section-by-section diff and the reason."""
    with command_backend(config_path, db, write=False) as (_config, host, backend):
        report = replay(backend, session_id, turn_index, host=host, now=now)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        click.echo(render_report(report))
    if not report.identical:
        click.get_current_context().exit(1)
