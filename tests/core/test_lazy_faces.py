"""The faces are small and lazy (issue 25, item 4): ``import contextplane`` loads nothing heavy,
yet every name it ever exported still imports; ``contextplane --help`` loads no subcommand; the
kit's pytest plugin loads nothing heavy until a kit class is used.

Why subprocesses: what a fresh interpreter has in ``sys.modules`` is the whole claim, and this
test process has long since imported everything.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import contextplane

#: What ``import contextplane`` must not load: the store and the libraries only it needs.
HEAVY = ("apsw", "cattrs", "numpy", "sqlite_vec", "contextplane.store")


def fresh(code: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    res = fresh(f"{code}\nimport sys; print('\\n'.join(sorted(sys.modules)))")
    assert res.returncode == 0, res.stderr
    return set(res.stdout.split())


# --- the root package ---------------------------------------------------------------------


def test_import_contextplane_loads_nothing_heavy() -> None:
    loaded = modules_after("import contextplane")
    assert not {m for m in loaded if m in HEAVY or m.startswith("contextplane.store.")}
    assert {m for m in loaded if m.startswith("contextplane")} == {"contextplane"}


@pytest.mark.parametrize("name", sorted(contextplane._WHERE))
def test_every_exported_name_still_imports(name: str) -> None:
    value = getattr(contextplane, name)
    exec(f"from contextplane import {name} as got", namespace := {})
    assert namespace["got"] is value
    # The object its defining module holds, not a copy or a stand-in.
    home = inspect.getmodule(value) if inspect.isclass(value) or inspect.isfunction(value) else None
    if home is not None and home.__name__.startswith("contextplane"):
        assert getattr(home, getattr(value, "__name__", name), value) is value


def test_star_import_and_dir_name_every_export() -> None:
    res = fresh("from contextplane import *; import contextplane; print(sorted(contextplane.__all__) == "
                "sorted(n for n in contextplane.__all__ if n in globals()))")
    assert res.returncode == 0 and res.stdout.strip() == "True", res.stderr
    assert set(contextplane.__all__) <= set(dir(contextplane))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'compose_everything'"):
        contextplane.compose_everything  # noqa: B018
    with pytest.raises(ImportError):
        exec("from contextplane import compose_everything")


def test_a_plugin_author_pays_only_for_what_it_imports() -> None:
    loaded = modules_after("from contextplane import ContextSection, Row, Shed, Envelope")
    assert not {m for m in loaded if m in HEAVY or m.startswith("contextplane.store")}


def test_the_docstrings_and_contributing_name_every_face_name() -> None:
    """Each face's docstring names every name in its ``__all__``; CONTRIBUTING.md's "The three
    faces" names the runtime and section faces' names and every name the root ever exported."""
    import contextplane.backend
    import contextplane.section

    contributing = (Path(__file__).resolve().parents[2] / "CONTRIBUTING.md").read_text(encoding="utf-8")
    faces = contributing[contributing.index("## The three faces") :]
    faces = faces[: faces.index("\n## ", 1)]
    for face in (contextplane, contextplane.section, contextplane.backend):
        doc = face.__doc__ or ""
        for name in face.__all__:
            assert f"``{name}``" in doc, f"{name} is in {face.__name__}.__all__ but not its docstring"
    for name in {*contextplane._WHERE, *contextplane.__all__, *contextplane.section.__all__}:
        assert f"`{name}`" in faces, f"{name} is in no face of CONTRIBUTING.md"


# --- the kit's pytest plugin --------------------------------------------------------------

RECORD_MODULES = """
import sys
from pathlib import Path


def test_records_what_is_loaded():
    assert ("contextplane.testing.pytest_plugin" in sys.modules) is {enabled}
    Path("modules.txt").write_text("\\n".join(sorted(sys.modules)))
"""

USES_THE_KIT = """
import sys


def test_the_kit_loads_when_used():
    from contextplane.testing import SectionInput  # here, not at collection: after test_a

    assert SectionInput.__module__ == "contextplane.testing.inputs"
    assert "contextplane.testing.inputs" in sys.modules
"""


def pytest_run(where: Path, tests: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    where.mkdir()
    (where / "pytest.ini").write_text("[pytest]\n")  # this folder is the rootdir, whatever is above
    for name, text in tests.items():
        (where / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *sorted(tests), *flags],
        capture_output=True, text=True, timeout=180, cwd=where, env=env,
    )


def test_the_kit_plugin_loads_nothing_heavy_until_a_kit_class_is_used(tmp_path: Path) -> None:
    # In the run with the plugin, a second file (run after the first) then uses the kit.
    on = pytest_run(
        tmp_path / "on", {"test_a.py": RECORD_MODULES.format(enabled=True), "test_b.py": USES_THE_KIT}
    )
    off = pytest_run(tmp_path / "off", {"test_a.py": RECORD_MODULES.format(enabled=False)}, "-p", "no:contextplane")
    assert on.returncode == 0 and off.returncode == 0, on.stdout + off.stdout
    assert "2 passed" in on.stdout, on.stdout
    with_plugin = set((tmp_path / "on" / "modules.txt").read_text().split())
    without = set((tmp_path / "off" / "modules.txt").read_text().split())
    added = with_plugin - without
    assert "contextplane.testing.pytest_plugin" in added
    heavy = sorted(m for m in added if m.split(".")[0] in HEAVY or m.startswith("contextplane.store"))
    assert not heavy, f"the kit's pytest plugin imported {heavy}"
    ours = sorted(m for m in added if m.startswith("contextplane"))
    assert ours == ["contextplane", "contextplane.testing", "contextplane.testing.pytest_plugin"], ours


@pytest.mark.parametrize("face", ["contextplane", "contextplane.section", "contextplane.backend"])
def test_what_mypy_sees_is_what_runs(face: str) -> None:
    """The ``TYPE_CHECKING`` imports (what mypy and IDEs read), ``_WHERE`` (what ``__getattr__``
    loads) and ``__all__`` name the same names from the same modules: a name added to one and
    not the others would be invisible to the type checker or missing at run time. A name the
    root keeps outside ``__all__`` is imported ``X as X``, mypy's mark of a re-export (without
    it, a strict third party's ``from contextplane import Row`` fails to type-check)."""
    import ast
    import importlib

    module = importlib.import_module(face)
    tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
    guarded = [
        node for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    ]
    aliases = [alias for block in guarded for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names]
    seen = {
        alias.asname or alias.name: node.module
        for block in guarded
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == module._WHERE
    assert set(module.__all__) <= set(seen)
    kept = {alias.name for alias in aliases if alias.name not in module.__all__}
    assert kept == set(seen) - set(module.__all__)
    assert all(alias.asname == alias.name for alias in aliases if alias.name in kept)
    if face != "contextplane":
        assert sorted(seen) == sorted(module.__all__), "a face keeps no name outside __all__"
