"""The README's "Why wasn't this memory used?" commands run on the demo store and print what the
README shows (the history position's time aside)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from contextplane.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("## Why wasn't this memory used?", 1)[1].split("\n## ", 1)[0]


def _blocks(section: str, lang: str) -> list[str]:
    """The fenced blocks of one language tag ("" for untagged), in order."""
    return [body for tag, body in re.findall(r"```(\w*)\n(.*?)```", section, re.S) if tag == lang]


def _commands(block: str) -> list[tuple[list[str], str]]:
    """(argv, expected comment) per command of a bash block (continuation lines joined)."""
    joined = block.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        command, _, comment = line.partition("#")
        if command.strip():
            out.append((shlex.split(command)[1:], comment.strip()))
    return out


def test_the_readme_explain_walkthrough_is_what_the_demo_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    section = _section()
    bash = _blocks(section, "bash")
    shown = _blocks(section, "")[0].rstrip("\n").splitlines()
    runner = CliRunner()
    (demo, _), (first, _) = _commands(bash[0])
    assert runner.invoke(main, demo).exit_code == 0
    result = runner.invoke(main, first)
    assert result.exit_code == 0, result.output
    printed = result.stdout.rstrip("\n").splitlines()
    assert len(printed) == len(shown)
    for got, want in zip(printed, shown, strict=True):
        if want.endswith("…"):
            assert got.startswith(want[:-1]), (got, want)
        else:
            assert got == want
    for argv, expected in _commands(bash[1]):
        result = runner.invoke(main, argv)
        head = result.stdout.splitlines()[0] if result.stdout else ""
        if "replay" in argv and "--now" not in argv:
            assert result.exit_code == 0 and "byte-identical" in head, result.output
        elif "--now" in argv:
            assert result.exit_code == 1 and "DIFFERS" in head
            assert (
                "memory 2's lifecycle changed after the turn: review state set to rejected" in result.stdout
            )
        elif expected:
            assert head == expected, result.output
