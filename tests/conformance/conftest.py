"""Fixtures for the conformance-kit tests: a site directory with the contrib distributions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.helpers import REPO

#: The third-party plugin, as its own distribution, and the deliberately broken one reused
#: from the core's entry-point tests (an import failure and a bad hook signature).
OPEN_TICKETS = REPO / "contrib" / "contextplane-open-tickets"
BROKEN = REPO / "tests" / "dists" / "cp_broken_plugin"


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``--target`` directory holding the pip-installed open-tickets and broken distributions
    (built by pip from their own pyproject.toml, no dependencies, no network)."""
    target = tmp_path_factory.mktemp("conformance-site")
    for dist in (OPEN_TICKETS, BROKEN):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "--target",
                str(target),
                str(dist),
            ],
            check=True,
            capture_output=True,
        )
    return target
