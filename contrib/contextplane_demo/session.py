"""``run_demo``: seed a fresh backend, run the scripted session, print it and check it."""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from contextplane import ContextPlaneError, PluginHost, ProjectedContext, open_runtime
from contextplane.config import load_config
from contextplane.delivery import PLAIN
from contextplane.notices import PluginWarning
from contextplane.textui import budget_table
from contextplane_demo.checks import Check, run_checks
from contextplane_demo.fixtures import CONFIG_MARKER, SESSION, seed, write_fixture_files
from contextplane_demo.script import TURNS, Turn

TOOLS = ("search_memory", "deploy", "read_ticket")

#: The session's history as a checkpoint from before ADR 0108 holds it: a v1 context frame
#: that delivery keeps out of the model's view (and every prompt snapshot records as stripped).
LEGACY_FRAME = {
    "role": "user",
    "content": "<context>v1 injected memories, persisted by an old runtime</context>",
    "metadata": {"context_frame": True},
    "id": "v1-frame-1",
}


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
    """Run the scripted session in ``directory`` (default: a new temporary directory, removed
    afterwards); return what was composed and the checks. ``echo`` receives every line of the
    report."""
    if directory is None:
        with tempfile.TemporaryDirectory(prefix="contextplane-demo-") as scratch:
            result = _run(Path(scratch), echo)
        echo(f"(the demo's directory {result.directory} is removed; pass --dir to keep it)")
        return result
    return _run(Path(directory), echo)


#: What a demo run writes besides its fixture files: removed before a run in a demo's
#: directory starts over (so a second run does not seed duplicates on top of the first).
RUN_FILES = ("memory.sqlite3", "memory.records.sqlite3")
RUN_DIRS = ("trajectories",)


def _start_over(root: Path, echo: Callable[[str], None]) -> None:
    """A directory that holds a store is a previous demo's (its ``contextplane.toml`` says so):
    its store and records are removed, so the session runs on a freshly seeded store. Any other
    store is refused, never touched."""
    if not (root / RUN_FILES[0]).exists():
        return
    config = root / "contextplane.toml"
    try:
        ours = config.read_text(encoding="utf-8").startswith(CONFIG_MARKER)
    except OSError:
        ours = False
    if not ours:
        raise ContextPlaneError(
            f"{root} holds a store that no demo wrote (no {config.name} from `contextplane demo`); "
            "pass --dir an empty or new directory"
        )
    for name in RUN_FILES:
        for side in ("", "-wal", "-shm"):
            (root / f"{name}{side}").unlink(missing_ok=True)
    for name in RUN_DIRS:
        shutil.rmtree(root / name, ignore_errors=True)
    echo(f"{root} held an earlier demo run: its store and records are removed, starting over")


def _rewarn(found: warnings.WarningMessage, root: Path, echo: Callable[[str], None]) -> None:
    """The warning about the demo's deliberately malformed skill is part of the demo: said as
    a line of its report, not a warning; any other warning is passed on as it was."""
    text = str(found.message)
    if str(root / "skills" / "half-written-on-purpose") in text:
        echo(f"(part of the demo: a malformed skill is skipped with one warning) {text}")
        return
    warnings.warn_explicit(found.message, found.category, found.filename, found.lineno)


def _run(directory: Path, echo: Callable[[str], None]) -> DemoResult:
    # Absolute, so the config's paths (relative to the directory) are not joined to it twice.
    root = directory.expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    _start_over(root, echo)
    write_fixture_files(root)
    # Read back from the file it wrote: later commands with --config <dir>/contextplane.toml
    # run with exactly the configuration the recorded turns ran with.
    config = load_config(root / "contextplane.toml")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PluginWarning)
        result = _session(root, config, echo)
    for found in caught:
        _rewarn(found, root, echo)
    echo("\n== summary ==")
    for name, ok, detail in result.checks:
        echo(f"[{'ok' if ok else 'FAIL'}] {name}" + (f": {detail}" if detail and not ok else ""))
    return result


def _session(root: Path, config: Any, echo: Callable[[str], None]) -> DemoResult:
    host = PluginHost.from_entry_points(config)
    # The deployment's backend, opened by the runtime (and closed with it); the stable prefix
    # built once from the host, with the demo's tools bound.
    with open_runtime(config, host=host, tools=TOOLS) as runtime:
        backend = runtime.backend
        assert backend is not None  # open_runtime opened the configured one
        seeded = seed(backend.memories, backend.summaries)
        prefix = runtime.prefix
        assert prefix is not None and not isinstance(prefix, str)
        echo(f"contextplane demo in {root}: records in {backend.name}")
        echo(f"stable prefix: {len(prefix.text)} chars, sections {', '.join(prefix.order)}")
        logged_before = len(backend.injections.rows(SESSION))

        results: list[tuple[Turn, ProjectedContext]] = []
        history: list[dict[str, Any]] = [LEGACY_FRAME]
        for index, turn in enumerate(TURNS, start=1):
            composed = runtime.compose(
                runtime.request(
                    turn.query,
                    state=turn.state,
                    incognito=turn.incognito,
                    goal_turn=turn.goal_turn,
                    session_id=SESSION,
                    turn_index=index,
                    context_window=turn.context_window,
                )
            )
            projection = composed.projection
            results.append((turn, projection))
            # One model call per turn, as a runtime makes it: the prompt snapshot is recorded here.
            history.append({"role": "user", "content": turn.query})
            runtime.deliver(composed, history, PLAIN, call_index=0)
            echo(f"\n== turn {turn.label}: {turn.query!r} (window {turn.context_window} tokens) ==")
            echo(budget_table(projection))
            for step in projection.overflow:
                echo(f"  shed: {step.section} {step.action} x{step.items} ({step.chars} chars)")

        logged = backend.injections.rows(SESSION)[logged_before:]
        sections = [r.section for r in host.context_sections()]
        checks = run_checks(results, seeded, logged, sections)
    return DemoResult(tuple(results), checks, str(root))
