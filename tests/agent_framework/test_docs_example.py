"""The example in docs/runtime.md ("Microsoft Agent Framework") runs as printed: two turns,
the projection reached each call (one message more than the history), one snapshot per call.
It opens the deployment's default backend, which the suite's fixtures point at a fresh home."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "runtime.md"


def example() -> str:
    section = DOC.read_text(encoding="utf-8").split("## Microsoft Agent Framework\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the section lost its example"
    return match.group(1)


def test_the_documented_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(example(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=dict(os.environ), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    # Turn 1: the projection and the input; turn 2: history (2), the projection and the input.
    assert done.stdout.splitlines() == ["saw 2 messages", "saw 4 messages", "[('s1', 0, 0), ('s1', 1, 0)]"]
