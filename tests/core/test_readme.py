"""The README's runtime snippet runs verbatim, and writes nothing outside its own directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def snippet() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("```python\nimport tempfile")
    body = text[start + len("```python\n") :]
    return body[: body.index("```")]


def test_the_readme_runtime_snippet_runs_verbatim(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTPLANE_")}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"))
    out = subprocess.run(
        [sys.executable, "-c", snippet()], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "Deploy window: Tuesday 14:00 UTC." in out.stdout
    assert "{'always_on': ['1'], 'working_state': ['goal', 'tasks']}" in out.stdout
    assert list(home.rglob("*")) == []  # no user-global store, log or trajectory was written


def test_the_readme_snippet_writes_with_keywords_not_the_legacy_positional_form() -> None:
    """``add_chunk(text, "hot", "operator")`` is the legacy domain/source form; the README
    shows the current one (every attribute by keyword)."""
    import ast

    calls = [
        node
        for node in ast.walk(ast.parse(snippet()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_chunk"
    ]
    assert calls and all(len(call.args) == 1 for call in calls)
    assert {kw.arg for kw in calls[0].keywords} == {"source_type", "delivery_policy"}
