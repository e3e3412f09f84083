"""docs/runtime.md's OpenAI Agents SDK example runs as written in an empty directory (in this
process: the SDK is already imported, and a subprocess spent its time importing it again),
and its own asserts are what the run checks."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEADING = "## The OpenAI Agents SDK adapter\n"


def example() -> str:
    text = (REPO / "docs" / "runtime.md").read_text(encoding="utf-8")
    begin = text.index(HEADING)
    end = text.index("\n## ", begin + len(HEADING))
    (code,) = re.findall(r"^```python\n(.*?)^```", text[begin:end], re.S | re.M)
    return code


@pytest.fixture
def empty_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    for key in [k for k in os.environ if k.startswith(("CONTEXTPLANE_", "OPENAI_"))]:
        monkeypatch.delenv(key)
    for key, value in {
        "HOME": home,
        "XDG_DATA_HOME": home / "data",
        "XDG_CONFIG_HOME": home / "config",
    }.items():
        monkeypatch.setenv(key, str(value))
    monkeypatch.chdir(work)
    return home


def test_the_example_runs_in_an_empty_directory(empty_dir: Path) -> None:
    exec(compile(example(), "docs/runtime.md", "exec"), {"__name__": "__example__"})
    assert not any(empty_dir.rglob("*")), "the example wrote outside its directory"


def test_a_broken_example_fails(empty_dir: Path) -> None:
    broken = example().replace('snapshots.list("s1")) == 1', 'snapshots.list("s1")) == 2')
    assert broken != example()
    with pytest.raises(AssertionError):
        exec(compile(broken, "docs/runtime.md", "exec"), {"__name__": "__example__"})
