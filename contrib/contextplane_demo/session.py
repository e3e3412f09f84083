"""``run_demo``: seed a fresh backend, run the scripted session, print it and check it."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import attrs

from contextplane import (
    BuildContext,
    PluginHost,
    ProjectedContext,
    build_stable_prefix,
    compose_projected_context,
    open_backend,
)
from contextplane.textui import budget_table
from contextplane_demo.checks import Check, run_checks
from contextplane_demo.fixtures import SESSION, demo_config, seed, write_fixture_files
from contextplane_demo.script import TURNS, Turn

TOOLS = ("search_memory", "deploy", "read_ticket")


@attrs.frozen
class DemoResult:
    """What the session composed, the checks on it, and where its backend lives."""

    projections: tuple[tuple[Turn, ProjectedContext], ...]
    checks: tuple[Check, ...]
    directory: str

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.checks)


def run_demo(directory: str | Path | None = None, echo: Callable[[str], None] = print) -> DemoResult:
    """Run the scripted session in ``directory`` (default: a new temporary directory); return
    what was composed and the checks. ``echo`` receives every line of the report."""
    # Absolute: the demo's configuration resolves its paths against this directory, so a relative
    # one would nest (``--dir demo`` put the store in ``demo/demo``).
    root = (
        Path(directory).resolve()
        if directory is not None
        else Path(tempfile.mkdtemp(prefix="contextplane-demo-"))
    )
    root.mkdir(parents=True, exist_ok=True)
    write_fixture_files(root)
    config = demo_config(root)
    host = PluginHost.from_entry_points(config)
    backend = open_backend(host)
    try:
        seeded = seed(backend.memories, backend.summaries)
        prefix = build_stable_prefix(host, BuildContext(config=config, tools=TOOLS))
        echo(f"contextplane demo in {root}: records in {backend.name}")
        echo(f"stable prefix: {len(prefix.text)} chars, sections {', '.join(prefix.order)}")
        logged_before = len(backend.injections.rows(SESSION))

        results: list[tuple[Turn, ProjectedContext]] = []
        for index, turn in enumerate(TURNS, start=1):
            projection = compose_projected_context(
                turn.query,
                backend.memories,
                None,
                turn.state,
                incognito=turn.incognito,
                goal_turn=turn.goal_turn,
                session_id=SESSION,
                turn_index=index,
                context_window=turn.context_window,
                backend=backend,
                host=host,
            )
            results.append((turn, projection))
            echo(f"\n== turn {turn.label}: {turn.query!r} (window {turn.context_window} tokens) ==")
            echo(budget_table(projection))
            for step in projection.overflow:
                echo(f"  shed: {step.section} {step.action} x{step.items} ({step.chars} chars)")

        logged = backend.injections.rows(SESSION)[logged_before:]
        sections = [r.section for r in host.context_sections()]
        checks = run_checks(results, seeded, logged, sections)
    finally:
        backend.close()

    echo("\n== summary ==")
    for name, ok, detail in checks:
        echo(f"[{'ok' if ok else 'FAIL'}] {name}" + (f": {detail}" if detail and not ok else ""))
    return DemoResult(tuple(results), checks, str(root))
