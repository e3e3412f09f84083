"""Every core module imports first, on its own: the static cycle count (test_import_cycles.py)
sees ``from contextplane.observability.redaction import ...`` as an edge to ``redaction`` only,
but Python runs the package's ``__init__`` first, so an eager package face can close a cycle the
graph does not show (``import contextplane.recorder`` failed that way)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import importlib, pkgutil, sys
import contextplane
names = sorted(m.name for m in pkgutil.walk_packages(contextplane.__path__, "contextplane."))
bad = []
for name in names:
    for key in [k for k in sys.modules if k == "contextplane" or k.startswith("contextplane.")]:
        del sys.modules[key]
    try:
        importlib.import_module(name)
    except Exception as exc:
        bad.append(f"{name}: {type(exc).__name__}: {exc}")
print(len(names))
print("\\n".join(bad))
"""


def test_every_core_module_imports_first_in_a_fresh_contextplane() -> None:
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    count, *bad = res.stdout.strip().split("\n")
    assert int(count) > 150, "module discovery broke"
    assert not [b for b in bad if b], "modules that fail when imported first:\n" + "\n".join(bad)
