"""Running the conformance kit the way an implementer does: ``pytest`` in a subprocess.

A kit that cannot fail is worthless, so the deliberate breaks are run in a child pytest and
their outcomes read back per test id from its JUnit XML. The child loads the kit's pytest
plugin through the ``pytest11`` entry point when it is installed, and with ``-p`` otherwise.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

REPO = Path(__file__).resolve().parents[2]
_REQ = re.compile(r"\[([A-Z]+(?:-[A-Z]+)+)\]$")


def kit_plugin_args() -> list[str]:
    """``-p contextplane.testing.pytest_plugin`` unless the ``pytest11`` entry point loads it
    already (passing both would register the module twice)."""
    if any(ep.name == "contextplane" for ep in md.entry_points(group="pytest11")):
        return []
    return ["-p", "contextplane.testing.pytest_plugin"]


@attrs.frozen
class Outcome:
    outcome: str  # passed | failed | error | skipped | xfailed
    message: str = ""
    #: The requirement id the report carried (``contextplane.testing.REQUIREMENT_PROPERTY``).
    requirement: str | None = None


@attrs.frozen
class Run:
    returncode: int
    stdout: str
    stderr: str
    outcomes: Mapping[str, Outcome]

    def by_class(self, cls: str) -> dict[str, Outcome]:
        """Outcomes of one test class, keyed by requirement id."""
        out = {}
        for test_id, outcome in self.outcomes.items():
            klass, _, name = test_id.rpartition("::")
            if klass.rsplit(".", 1)[-1] == cls:
                found = _REQ.search(name)
                out[found.group(1) if found else name] = outcome
        return out

    def failing(self, cls: str) -> set[str]:
        return {req for req, o in self.by_class(cls).items() if o.outcome in ("failed", "error")}


def run_pytest(
    paths: Sequence[str | Path],
    tmp_path: Path,
    *args: str,
    pythonpath: Sequence[str | Path] = (),
    cwd: Path = REPO,
) -> Run:
    """Run pytest on ``paths`` in a child process; return its outcomes by test id."""
    xml = tmp_path / "junit.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTPLANE_")}
    env["PYTHONPATH"] = os.pathsep.join([*(str(p) for p in pythonpath), str(REPO)])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *map(str, paths),
            "-p",
            "no:cacheprovider",
            *kit_plugin_args(),
            f"--junitxml={xml}",
            "-o",
            "junit_family=xunit2",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    outcomes: dict[str, Outcome] = {}
    if xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            test_id = f"{case.get('classname')}::{case.get('name')}"
            found = [p.get("value") for p in case.iter("property") if p.get("name") == "contextplane_requirement"]
            outcome = Outcome("passed", requirement=found[0] if found else None)
            for child in case:
                # pytest shortens the attribute to its first line; the element text is the whole report.
                message = (child.get("message") or "") + "\n" + (child.text or "")
                if child.tag == "failure":
                    outcome = Outcome("failed", message, outcome.requirement)
                elif child.tag == "error":
                    outcome = Outcome("error", message, outcome.requirement)
                elif child.tag == "skipped":
                    kind = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
                    outcome = Outcome(kind, message, outcome.requirement)
            outcomes[test_id] = outcome
    return Run(proc.returncode, proc.stdout, proc.stderr, outcomes)
