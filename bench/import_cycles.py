"""Count the import cycles among contextplane's core modules, by kind of import.

Why a separate count from tests/core/test_layout.py: that test keeps the cycles that can bite at
run time at zero (module-level and function-local imports; ``if TYPE_CHECKING:`` ones never run).
A cycle that closes only under ``TYPE_CHECKING`` does not fail an import, but it is still a knot:
the two modules cannot be read, typed or moved apart, and the usual way out of it is an ``Any``.
Issue 25 asks for zero counting those too, so this tool counts three kinds of edge separately:

- ``top``: module-level imports, run when the module is imported;
- ``lazy``: imports inside a function or method body, run when it is called;
- ``typing``: imports under ``if TYPE_CHECKING:``, read only by type checkers.

A cycle is a strongly connected group of modules (Tarjan); each is listed with one shortest cycle
through it, as its import statements. Static (``ast``), nothing is imported.
``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to ``a.b``; the parent
packages an import initialises on the way are not edges (every module would then depend on
``contextplane/__init__`` and the graph would say nothing).

    python bench/import_cycles.py            # the table of counts, then every cycle
    python bench/import_cycles.py --json     # the same as JSON
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core" / "contextplane"
KINDS = ("top", "lazy", "typing")
#: The graphs counted: which kinds of import each one follows.
GRAPHS: dict[str, tuple[str, ...]] = {
    "top": ("top",),
    "top+lazy": ("top", "lazy"),
    "top+typing": ("top", "typing"),
    "all": KINDS,
}


@dataclass(frozen=True)
class Edge:
    """One import statement of a core module, resolved to the core module it names."""

    source: str
    target: str
    kind: str
    line: int
    text: str

    def describe(self) -> str:
        return f"{self.source}:{self.line} [{self.kind}] {self.text}"


def modules(package: Path = CORE) -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the package (packages by their ``__init__``)."""
    found: dict[str, Path] = {}
    for file in sorted(package.rglob("*.py")):
        parts = list(file.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = file
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(body: Iterable[ast.stmt], kind: str) -> Iterator[tuple[ast.AST, str]]:
    """Every node below ``body`` with the kind of import it would be."""
    stack: list[tuple[ast.AST, str]] = [(node, kind) for node in reversed(list(body))]
    while stack:
        node, here = stack.pop()
        yield node, here
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((n, "typing") for n in reversed(node.body))
            stack.extend((n, here) for n in reversed(node.orelse))
            continue
        inner = (
            "lazy"
            if here == "top" and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            else here
        )
        stack.extend((child, inner) for child in reversed(list(ast.iter_child_nodes(node))))


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def edges_of(module: str, known: dict[str, Path]) -> list[Edge]:
    file = known[module]
    source = file.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(file))
    lines = source.splitlines()
    found: list[Edge] = []
    for node, kind in _walk(tree.body, "top"):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                if file.name != "__init__.py":
                    anchor.pop()
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        text = " ".join(" ".join(lines[node.lineno - 1 : node.end_lineno]).split())
        for target in dict.fromkeys(targets):
            resolved = _resolve(target, known)
            if resolved is not None and resolved != module:
                found.append(Edge(module, resolved, kind, node.lineno, text))
    return found


@functools.cache
def all_edges(package: Path = CORE) -> tuple[Edge, ...]:
    """Every import edge of the package (read once per process: the files do not change under it)."""
    known = modules(package)
    return tuple(edge for module in known for edge in edges_of(module, known))


def strongly_connected(nodes: Iterable[str], edges: Iterable[Edge]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively: the groups (of two or more) of modules that import each other."""
    out: dict[str, set[str]] = {n: set() for n in nodes}
    for e in edges:
        out[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    for root in sorted(out):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(out[root])))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(out[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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


def shortest_cycle(group: list[str], edges: Iterable[Edge]) -> list[Edge]:
    """One shortest cycle through the group's first module, as its import statements."""
    members = set(group)
    by_source: dict[str, list[Edge]] = {}
    for e in edges:
        if e.source in members and e.target in members:
            by_source.setdefault(e.source, []).append(e)
    start = group[0]
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for e in by_source.get(node, []):
                if e.target == start:
                    path = [e]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                if e.target not in came:
                    came[e.target] = e
                    following.append(e.target)
        frontier = following
    raise AssertionError(f"no cycle in {group}")  # Tarjan said there is one


def cycles(kinds: tuple[str, ...], package: Path = CORE) -> list[tuple[list[str], list[Edge]]]:
    """Every cycle group of the graph that follows ``kinds`` of import, with one cycle through it."""
    edges = [e for e in all_edges(package) if e.kind in kinds]
    return [(g, shortest_cycle(g, edges)) for g in strongly_connected(modules(package), edges)]


def report(package: Path = CORE) -> dict[str, list[tuple[list[str], list[Edge]]]]:
    return {name: cycles(kinds, package) for name, kinds in GRAPHS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    found = report()
    if args.json:
        print(
            json.dumps(
                {
                    name: [{"modules": g, "cycle": [e.describe() for e in c]} for g, c in groups]
                    for name, groups in found.items()
                },
                indent=2,
            )
        )
        return 0
    print("graph       cycle groups  modules in them")
    for name, groups in found.items():
        print(f"{name:<11} {len(groups):>12}  {sum(len(g) for g, _ in groups):>15}")
    for name, groups in found.items():
        for group, cycle in groups:
            print(f"\n[{name}] {' <-> '.join(group)}")
            for e in cycle:
                print(f"    {e.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
