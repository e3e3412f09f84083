"""The README's "Why wasn't this memory used?" commands run on the demo store and print what the
README shows (the history position's time aside)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

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
            # "here: memory 2 was rejected after the turn", and nothing else: the configuration
            # the demo wrote is the one its turns ran with (issue 23).
            reasons = [line for line in result.stdout.splitlines() if line.startswith("  - ")]
            assert len(reasons) == 1 and reasons[0].startswith(
                "  - memory 2's lifecycle changed after the turn: review state set to rejected"
            ), result.stdout
            assert "configuration" not in result.stdout.replace("today's store and configuration", "")
        elif expected:
            assert head == expected, result.output


def test_the_demo_twice_in_one_directory_starts_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    counts = []
    for _ in range(2):
        result = runner.invoke(main, ["demo", "--dir", "demo"])
        assert result.exit_code == 0, result.output
        listed = runner.invoke(main, ["memory", "list", "--limit", "0", "--json", "--config", "demo/contextplane.toml"])
        injections = runner.invoke(main, ["injections", "--json", "--config", "demo/contextplane.toml"])
        counts.append((len(json.loads(listed.stdout)), len(json.loads(injections.stdout))))
    assert counts[0] == counts[1] and counts[0][0] > 10, counts
    assert "held an earlier demo run: its store and records are removed, starting over" in result.stdout
    # A directory holding someone else's store is never touched.
    (tmp_path / "mine").mkdir()
    runner.invoke(main, ["memory", "add", "my own note", "--db", "mine/memory.sqlite3"])
    result = runner.invoke(main, ["demo", "--dir", "mine"])
    assert result.exit_code == 2 and "holds a store that no demo wrote" in result.stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["memory.sqlite3"]


def test_the_readme_console_block_opens_the_demo_store_with_its_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The console block, verbatim but for the install and the server's loop: the console
    opens the demo's store, and its preview has the identity and the skills (issue 23)."""
    from contextplane_console import command as console_command

    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- console:run -->", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    steps = [shlex.split(part)[1:] for part in block.strip().split(" && ")]
    assert steps[0][:2] == ["-m", "pip"]
    seen: dict[str, object] = {}

    class NoServer:
        """Answers one preview request, as a browser would, instead of serving forever."""

        def __init__(self, app: Any, host: str, port: int, sock: Any = None) -> None:
            self.app, self.url = app, f"http://{host}:{port}"

        def serve(self) -> None:
            from starlette.testclient import TestClient

            with TestClient(self.app, base_url="http://127.0.0.1") as client:
                token = client.get("/api/csrf").json()["csrf_token"]
                response = client.post(
                    "/api/preview", json={"query": "deploy window"}, headers={"X-CSRF-Token": token}
                )
            assert response.status_code == 200, response.text
            seen["preview"] = response.json()

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(console_command, "ConsoleServer", NoServer)
    runner = CliRunner()
    for argv in steps[1:]:
        result = runner.invoke(main, argv)
        assert result.exit_code == 0, result.output
    assert "contextplane console over sqlite:demo-store/memory.sqlite3\n" in result.stdout
    preview: Any = seen["preview"]
    names = [s["name"] for s in preview["stable_prefix"]["sections"]]
    assert "identity" in names, names
    assert any(s["name"] == "skills" and s["chars"] > 0 for s in preview["projected_context"]["sections"])
