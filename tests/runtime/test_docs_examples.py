"""docs/runtime.md holds one copyable example per agent framework (LangGraph, PydanticAI,
Microsoft Agent Framework, OpenAI Agents SDK), and each runs as printed: in a new process, in
an empty directory, offline (each uses its framework's own test or fake model), with this
test's fresh home as the user's. What each prints (or asserts itself) is what the page says
the adapter does: the projection reaches the model, the framework stores none of it, a
snapshot per model call."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "runtime.md"


@attrs.frozen
class Example:
    heading: str
    #: The last lines the example prints, in order.
    prints: tuple[str, ...]
    #: The example keeps everything in its own directory: the user's home stays empty.
    home_untouched: bool = False


EXAMPLES = {
    "langgraph": Example(
        "## The native middleware\n",
        (
            "On Tuesday afternoon.",
            "The release manager.",
            "['when is the deploy window?', 'On Tuesday afternoon.', 'who approves it?', 'The release manager.']",
            "{'always_on': ('1',)}",  # the memory, delivered to the second turn's call
        ),
    ),
    "pydantic-ai": Example("## The PydanticAI capability\n", ("[('ops-1', 0, 0), ('ops-1', 1, 0)]",)),
    "agent-framework": Example(
        "## Microsoft Agent Framework\n",
        # Turn 1: the projection and the input; turn 2: history (2), the projection and the input.
        ("saw 2 messages", "saw 4 messages", "[('s1', 0, 0), ('s1', 1, 0)]"),
    ),
    # Prints nothing: its own asserts are the check (a broken one fails, below).
    "openai-agents": Example("## The OpenAI Agents SDK adapter\n", (), home_untouched=True),
}


def example(name: str) -> str:
    """The first Python block of the framework's section of docs/runtime.md."""
    text = DOC.read_text(encoding="utf-8")
    heading = EXAMPLES[name].heading
    assert text.count(heading) == 1, f"docs/runtime.md lost its section {heading.strip()!r}"
    begin = text.index(heading)
    end = text.find("\n## ", begin + len(heading))
    blocks = re.findall(r"^```python\n(.*?)^```", text[begin : end if end != -1 else None], re.S | re.M)
    assert blocks, f"{heading.strip()!r} lost its example"
    return str(blocks[0])


def run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONTEXTPLANE_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=work, timeout=180
    )


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_the_example_runs_as_printed(name: str, tmp_path: Path) -> None:
    want = EXAMPLES[name]
    done = run(example(name), tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[len(lines) - len(want.prints) :] == list(want.prints), done.stdout
    if want.home_untouched:
        assert not [p for p in Path(os.environ["HOME"]).rglob("*") if p.is_file()], "wrote outside its directory"


def test_a_broken_example_fails(tmp_path: Path) -> None:
    """The OpenAI example checks itself with asserts: they run (a wrong count fails it)."""
    code = example("openai-agents")
    broken = code.replace('snapshots.list("s1")) == 1', 'snapshots.list("s1")) == 2')
    assert broken != code
    done = run(broken, tmp_path)
    assert done.returncode != 0 and "AssertionError" in done.stderr
