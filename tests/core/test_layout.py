"""The layout is honest: no import cycles, the core names no plugin, every package is typed.

Why a test and not a convention: a cycle or a core-to-plugin import is one line in a review
that nobody sees until the day the import order changes. These checks read the source with
``ast`` (nothing is imported), so they see every import, including the lazy ones inside a
function body, which only hide a cycle until the function runs. Imports under
``if TYPE_CHECKING:`` are not counted: they never run.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

REPO = Path(__file__).resolve().parents[2]
CORE = REPO / "core" / "contextplane"


def shipped_packages() -> list[Path]:
    """Every top-level package the wheel ships: the core, the standard sections, contrib."""
    contrib = sorted(p for p in (REPO / "contrib").glob("contextplane_*") if (p / "__init__.py").exists())
    return [CORE, REPO / "plugins" / "contextplane_sections", *contrib]


PACKAGES = shipped_packages()
FIRST_PARTY = frozenset(p.name for p in PACKAGES)


def module_name(package: Path, file: Path) -> str:
    parts = list(file.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {
    module_name(package, file): file for package in PACKAGES for file in sorted(package.rglob("*.py"))
}


@attrs.frozen
class Import:
    """One import statement of a first-party module, resolved to the module it runs."""

    source: str
    target: str
    line: int
    text: str

    def describe(self) -> str:
        return f"{self.source} (line {self.line}): {self.text}"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node below ``body``, except what only runs under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(reversed(node.orelse))
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _resolve(name: str) -> str | None:
    """The first-party module ``name`` names, or the nearest package that holds it."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str) -> list[Import]:
    """The first-party modules ``module`` imports, each with its statement.

    ``from a.b import c`` runs ``a.b.c`` when that is a module, else ``a.b``; the parent
    packages an import initialises on the way are not counted (every module would then depend
    on ``contextplane/__init__``, and the graph would say nothing)."""
    file = MODULES[module]
    source = file.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(file))
    is_package = file.name == "__init__.py"
    found: list[Import] = []
    for node in _nodes(tree.body):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                if not is_package:
                    anchor.pop()
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names
            ]
        else:
            continue
        text = " ".join((ast.get_source_segment(source, node) or "").split())
        for target in dict.fromkeys(targets):
            if target.partition(".")[0] not in FIRST_PARTY:
                continue
            resolved = _resolve(target)
            if resolved is not None and resolved != module:
                found.append(Import(module, resolved, node.lineno, text))
    return found


GRAPH: dict[str, list[Import]] = {module: imports_of(module) for module in MODULES}


def strongly_connected(graph: dict[str, list[Import]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively: the groups of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted({i.target for i in graph[root]})))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted({i.target for i in graph[child]}))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def cycle_in(group: list[str], graph: dict[str, list[Import]]) -> list[Import]:
    """One shortest import cycle through the group's first module, as its import statements."""
    members = set(group)
    start = group[0]
    came: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for imp in graph[node]:
                if imp.target not in members:
                    continue
                if imp.target == start:
                    path = [imp]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                if imp.target not in came:
                    came[imp.target] = imp
                    following.append(imp.target)
        frontier = following
    raise AssertionError(f"no cycle found in the group {group}")  # Tarjan said there is one


def test_the_layout_sees_every_shipped_package() -> None:
    assert {"contextplane", "contextplane_sections", "contextplane_demo"} <= FIRST_PARTY
    assert "contextplane.projection" in MODULES and "contextplane_demo" in MODULES
    assert any(i.target == "contextplane.cli_common" for i in GRAPH["contextplane.cli"]), "import parsing broke"


def test_every_shipped_package_is_built_linted_and_type_checked() -> None:
    """A package folder the wheel, ruff's import sorting or mypy does not know is not shipped
    honestly: it is missing from the wheel, or sorted as third-party, or never type checked."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    folders = {str(p.relative_to(REPO)) for p in PACKAGES}
    wheel = set(config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"])
    assert wheel == folders, f"[tool.hatch.build.targets.wheel] packages differ: {sorted(wheel ^ folders)}"
    first_party = set(config["tool"]["ruff"]["lint"]["isort"]["known-first-party"])
    assert first_party == set(FIRST_PARTY), (
        f"ruff known-first-party differs: {sorted(first_party ^ FIRST_PARTY)}"
    )
    checked = set(config["tool"]["mypy"]["files"])
    assert checked == folders, f"[tool.mypy] files differ: {sorted(checked ^ folders)}"


def test_no_import_cycles() -> None:
    groups = strongly_connected(GRAPH)
    report = []
    for group in groups:
        lines = "\n".join(f"    {imp.describe()}" for imp in cycle_in(group, GRAPH))
        report.append(f"  {' <-> '.join(group)}; one cycle:\n{lines}")
    assert not groups, (
        f"{len(groups)} import cycle(s) among first-party modules (lazy imports count; "
        "TYPE_CHECKING imports do not). Break each by moving what both need into a module "
        "neither imports back:\n" + "\n".join(report)
    )


def test_the_core_imports_no_plugin_or_contrib_package() -> None:
    """The core is the mechanism: sections, bridges and the demo plug into it, never the reverse
    (they reach the core through entry points: ``contextplane`` and ``contextplane.commands``)."""
    outside = FIRST_PARTY - {"contextplane"}
    offending = [
        imp.describe()
        for module, imps in GRAPH.items()
        if module.partition(".")[0] == "contextplane"
        for imp in imps
        if imp.target.partition(".")[0] in outside
    ]
    # Any other contextplane_* name (a third-party plugin, a package not shipped here) too.
    for module, file in MODULES.items():
        if module.partition(".")[0] != "contextplane":
            continue
        tree = ast.parse(file.read_text(encoding="utf-8"))
        for node in _nodes(tree.body):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in names:
                top = name.partition(".")[0]
                if top.startswith("contextplane_") and top not in outside:
                    offending.append(f"{module} (line {node.lineno}): imports {name}")
    assert not offending, "core modules import plugin or contrib packages:\n  " + "\n  ".join(offending)


#: The third-party example distribution ships typed too: plugin authors copy it.
EXAMPLE = REPO / "contrib" / "contextplane-open-tickets" / "src" / "contextplane_open_tickets"


@pytest.mark.parametrize("package", [*PACKAGES, EXAMPLE], ids=[p.name for p in [*PACKAGES, EXAMPLE]])
def test_every_shipped_package_is_typed(package: Path) -> None:
    assert (package / "py.typed").is_file(), (
        f"{package.relative_to(REPO)} has no py.typed: type checkers of code that imports "
        f"{package.name} ignore its annotations (PEP 561); add an empty py.typed"
    )
