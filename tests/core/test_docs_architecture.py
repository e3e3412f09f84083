"""docs/architecture.md's module map stays true: every module path it names exists, and every
package and top-level module of ``core/contextplane`` is named in its module map.

Why a test: the map is what the next person reads first; a module that is added, moved or
split without it is exactly the day the map starts to lie. Reads files only; imports nothing."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
CORE = ROOT / "core" / "contextplane"
#: Where a path the doc names may start: repo-relative, or under one of the source roots, or
#: (in the trace, for brevity) under ``core/contextplane``.
BASES = (ROOT, ROOT / "core", ROOT / "plugins", ROOT / "contrib", CORE)
SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"(?<![\w.+/])((?:[\w-]+/)+(?:[\w-]+\.py)?)(?![\w/])")
#: A module the migration plan creates is written ``+contextplane/...``.
PLANNED = re.compile(r"(?<![\w./])\+((?:[\w-]+/)+(?:[\w-]+\.py)?)(?![\w/])")


def named_paths(text: str) -> list[str]:
    """Every path-like word inside a backtick span (``a/b.py``, ``a/b/``)."""
    return [m for span in SPAN.findall(text) for m in PATH.findall(span)]


def planned_paths(text: str) -> list[str]:
    """Every path marked ``+`` (a module the plan creates) inside a backtick span."""
    return [m for span in SPAN.findall(text) for m in PLANNED.findall(span)]


def stale_plans(text: str) -> list[str]:
    """Planned modules that exist by now: the map should name them as they are."""
    return sorted({p for p in planned_paths(text) if any((base / p).exists() for base in BASES)})


def missing_paths(text: str) -> list[str]:
    return sorted({p for p in named_paths(text) if not any((base / p).exists() for base in BASES)})


def module_map(text: str) -> str:
    start = text.index("\n## Module map")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def required_names(core: Path = CORE) -> list[str]:
    """Every top-level module and every package (at any depth) of the core, as the map writes
    them: ``contextplane/x.py`` and ``contextplane/pkg/``."""
    top = [f"contextplane/{f.name}" for f in sorted(core.glob("*.py"))]
    packages = [
        f"contextplane/{d.relative_to(core).as_posix()}/"
        for d in sorted(p.parent for p in core.rglob("__init__.py"))
        if d != core
    ]
    return top + packages


def unnamed(text: str, core: Path = CORE) -> list[str]:
    named = set(named_paths(module_map(text)))
    return [name for name in required_names(core) if name not in named]


def test_every_path_the_architecture_doc_names_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert len(named_paths(text)) > 40, "path parsing broke: the doc names dozens of modules"
    missing = missing_paths(text)
    assert not missing, (
        "docs/architecture.md names paths that do not exist (moved or renamed? fix the map): "
        + ", ".join(missing)
    )


def test_no_module_the_plan_creates_exists_yet() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert planned_paths("`+contextplane/backend.py` and `contextplane/section.py`") == [
        "contextplane/backend.py"
    ], "the plan's + paths are not parsed"
    stale = stale_plans(text)
    assert not stale, (
        "docs/architecture.md marks these modules as planned (+), but they exist: drop the + and "
        "give each its line in the module map: " + ", ".join(stale)
    )


def test_every_core_package_and_top_level_module_is_in_the_module_map() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "contextplane/store/" in required_names() and "contextplane/projection.py" in required_names()
    missing = unnamed(text)
    assert not missing, (
        "docs/architecture.md's module map does not name these core modules; add one line each "
        "saying its one job: " + ", ".join(missing)
    )


def test_the_checks_catch_a_stale_map(tmp_path: Path) -> None:
    """The two checks can fail: a path that is gone, and a module the map leaves out."""
    stale = "\n## Module map\n\n- `contextplane/nowhere.py` — gone.\n- `contextplane/a.py` — here.\n- `contextplane/projection.py` — real.\n"
    assert missing_paths(stale) == ["contextplane/a.py", "contextplane/nowhere.py"]
    assert stale_plans("`+contextplane/projection.py` and `+contextplane/later.py`") == [
        "contextplane/projection.py"
    ]
    core = tmp_path / "contextplane"
    (core / "pkg").mkdir(parents=True)
    for name in ("__init__.py", "a.py", "b.py", "pkg/__init__.py"):
        (core / name).write_text("", encoding="utf-8")
    assert unnamed(stale, core) == ["contextplane/__init__.py", "contextplane/b.py", "contextplane/pkg/"]
