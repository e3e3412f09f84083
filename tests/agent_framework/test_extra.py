"""The adapter is its own package behind the ``agent-framework`` extra: contextplane never
imports it, and importing it without the framework says which extra to install."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
sys.modules["agent_framework"] = None  # as if agent-framework-core were not installed
import contextplane, contextplane.runtime
assert "contextplane_agent_framework" not in sys.modules
try:
    import contextplane_agent_framework
except ImportError as exc:
    print(exc)
"""


def test_missing_framework_names_the_extra_and_core_never_imports_the_adapter() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "contextplane_agent_framework needs agent-framework-core: pip install 'contextplane[agent-framework]'"
    )
