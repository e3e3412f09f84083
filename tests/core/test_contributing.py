"""CONTRIBUTING's "Testing a plugin" block runs as it stands: its tests pass, and they would
fail on a host built without the configuration (issue 23 item 18). Its "Writing a runtime"
block runs as it stands too (issue 25)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

CONTRIBUTING = Path(__file__).resolve().parents[2] / "CONTRIBUTING.md"


def block(heading: str = "## Testing a plugin\n") -> str:
    text = CONTRIBUTING.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```", start)]


def test_the_testing_a_plugin_block_runs_and_its_tests_pass() -> None:
    code = block()
    assert "plugin_host_with([Tickets()], config)" in code
    scope: dict[str, Any] = {}
    exec(compile(code, str(CONTRIBUTING), "exec"), scope)
    tests = sorted(name for name in scope if name.startswith("test_"))
    assert tests == ["test_the_section_delivers_what_its_settings_name", "test_without_its_settings_the_section_is_empty"]
    for name in tests:
        scope[name]()


def test_the_block_shows_why_the_config_matters() -> None:
    """Built without the configuration, the first test's assertion fails: the reason the guide
    passes it."""
    scope: dict[str, Any] = {}
    exec(compile(block(), str(CONTRIBUTING), "exec"), scope)
    real = scope["plugin_host_with"]
    scope["plugin_host_with"] = lambda plugins, config=None: real(plugins)
    with pytest.raises(AssertionError):
        scope["test_the_section_delivers_what_its_settings_name"]()


def test_the_writing_a_runtime_block_runs_and_records_a_row_per_turn_and_a_snapshot_per_call() -> None:
    code = block("## Writing a runtime\n")
    assert "open_runtime(" in code and "runtime.deliver(turn" in code
    scope: dict[str, Any] = {}
    exec(compile(code, str(CONTRIBUTING), "exec"), scope)  # its own asserts check the records
    backend = scope["backend"]
    assert [r.turn_index for r in backend.injections.rows("s1")] == [0, 1]
    assert [s.key for s in backend.snapshots.list("s1")] == [("s1", t, c) for t in (0, 1) for c in (0, 1)]
