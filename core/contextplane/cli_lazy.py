"""Subcommands listed without being loaded: ``contextplane --help`` names every command with its
short help, yet imports none of them; a command's module is imported when it is run (or its own
``--help`` is asked for).

Why: a command's module imports what the command needs (the MCP server, Starlette, psycopg, the
store), and listing nine commands used to import all of that, 1-2 s before a line of help.

Where the short help comes from without importing the command: its source. The command's
module file is found through its top-level package's import spec (found, not imported) and read
with ``ast``: the ``help=``/``short_help=`` of the ``@click.command``/``@...group`` decorator,
else the decorated function's docstring, which is exactly what Click would show. Why not a
second copy (a registry, or text packed into the entry point): the help would have two homes
and drift, and a third party would have to learn a second convention; the entry point stays
``name = "module:attr"`` as before. A command the reader cannot make out (built by a factory,
say) is listed with a pointer to its own ``--help``. tests/core/test_lazy_faces.py holds the
listing equal to the loaded commands' short help.

Whether a plugged command's dependencies are installed is read from its entry point's extras
(``console = "contextplane_console.command:console [console]"``): a requirement of that extra
that cannot be imported lists the command as "not installed" with the ``pip install`` line. An
entry point without extras is found out only when it is run (the same hint, as an error line).
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.metadata as md
import importlib.util
import logging
import re
from pathlib import Path
from typing import Any, NamedTuple

import click

from contextplane.errors import ContextPlaneError

log = logging.getLogger("contextplane.cli")

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


class Listing(NamedTuple):
    """What ``--help`` shows of a command, read from its source."""

    help: str | None
    short_help: str | None
    hidden: bool
    deprecated: bool


def listed(name: str, listing: Listing) -> click.Command:
    """A stand-in that formats in a command list exactly as the real command would."""
    return click.Command(
        name,
        help=listing.help,
        short_help=listing.short_help,
        hidden=listing.hidden,
        deprecated=listing.deprecated,
    )


def load_target(target: str) -> Any:
    """The object ``module:attr`` names, importing the module."""
    module, _, attr = target.partition(":")
    value: Any = importlib.import_module(module)
    for part in attr.split("."):
        value = getattr(value, part)
    return value


def _source_file(module: str) -> Path | None:
    """The ``.py`` file of ``module``, found without importing it or its packages (the top
    package's spec names where it lives; the rest is the folder layout)."""
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if not rest:
        origin = spec.origin
        return Path(origin) if origin and origin.endswith(".py") else None
    for location in spec.submodule_search_locations or ():
        base = Path(location).joinpath(*rest)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _is_command_decorator(node: ast.expr) -> ast.Call | None:
    """``@click.command(...)``, ``@click.group(...)``, ``@some_group.command(...)``..."""
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in {"command", "group"}:
            return node
    return None


def _text(call: ast.Call, keyword: str) -> str | None:
    for kw in call.keywords:
        if kw.arg == keyword and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    return None


def _flag(call: ast.Call, keyword: str) -> bool:
    return any(
        kw.arg == keyword and isinstance(kw.value, ast.Constant) and bool(kw.value.value)
        for kw in call.keywords
    )


@functools.cache
def _parsed(path: Path) -> ast.Module | None:
    """A module's syntax tree, parsed once per process (two commands may share a module)."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def read_listing(target: str) -> Listing | None:
    """The help of the command ``module:function`` names, read from its source; None when the
    source is not at hand or the command is not a decorated function."""
    module, _, attr = target.partition(":")
    path = _source_file(module)
    if path is None or not attr or "." in attr:
        return None
    tree = _parsed(path)
    if tree is None:
        return None
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name != attr:
            continue
        for decorator in node.decorator_list:
            call = _is_command_decorator(decorator)
            if call is not None:
                return Listing(
                    help=_text(call, "help") or ast.get_docstring(node),
                    short_help=_text(call, "short_help"),
                    hidden=_flag(call, "hidden"),
                    deprecated=_flag(call, "deprecated"),
                )
    return None


def unlisted(name: str, where: str) -> Listing:
    """The listing of a command whose help cannot be read without running its module."""
    return Listing(None, f"(from {where}; see `contextplane {name} --help`)", False, False)


# --- entry points -----------------------------------------------------------------------------


def entry_points(group: str) -> dict[str, md.EntryPoint]:
    """The group's entry points by name (the first in name order wins a clash), unloaded."""
    found: dict[str, md.EntryPoint] = {}
    for ep in sorted(md.entry_points(group=group), key=lambda e: (e.name, e.value)):
        found.setdefault(ep.name, ep)
    return found


def _requirements(dist: md.Distribution | None, extra: str) -> list[str]:
    """The names of the distributions ``dist``'s ``extra`` requires."""
    names: list[str] = []
    for requirement in (dist.requires or []) if dist is not None else []:
        name, wanted = _NAME.match(requirement), _EXTRA.search(requirement)
        if name and wanted and wanted[1] == extra:
            names.append(name[0])
    return names


def _importable(distribution: str) -> bool:
    """Whether the module of a required distribution can be imported (found, not imported):
    its name as a module (``sentence-transformers`` -> ``sentence_transformers``), else the
    top-level modules the installed distribution lists."""
    guess = distribution.lower().replace("-", "_").replace(".", "_")
    if _findable(guess):
        return True
    try:
        dist = md.distribution(distribution)
    except md.PackageNotFoundError:
        return False
    tops = (dist.read_text("top_level.txt") or "").split() or [
        f.parts[0].removesuffix(".py")
        for f in dist.files or ()
        if f.parts and f.parts[0] != ".." and not f.parts[0].endswith((".dist-info", ".data", ".pth"))
    ]
    return any(_findable(top) for top in dict.fromkeys(tops) if top != guess)


def _findable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def install_hint(project: str, extra: str) -> str:
    return f"pip install '{project}[{extra}]'"


def missing_extra(ep: md.EntryPoint) -> str | None:
    """The install hint for an entry point whose extras are not all installed, else None."""
    for extra in ep.extras:
        if not all(_importable(name) for name in _requirements(ep.dist, extra)):
            return install_hint(ep.dist.name if ep.dist is not None else "contextplane", extra)
    return None


def entry_point_listing(name: str, ep: md.EntryPoint) -> Listing:
    hint = missing_extra(ep)
    if hint is not None:
        return Listing(f"Not installed: {hint}.", f"(not installed: {hint})", False, False)
    target = f"{ep.module}:{ep.attr}"  # ``ep.value`` may end in `` [extra]``
    return read_listing(target) or unlisted(name, ep.dist.name if ep.dist is not None else target)


def _extra_for(dist: md.Distribution | None, module: str) -> str | None:
    """The extra of ``dist`` that requires the distribution named like ``module`` (jinja2,
    mcp, starlette...), if any."""
    want = module.split(".")[0].lower().replace("_", "-")
    for requirement in (dist.requires or []) if dist is not None else []:
        name, extra = _NAME.match(requirement), _EXTRA.search(requirement)
        if name and extra and extra[1] != "test" and name[0].lower().replace("_", "-") == want:
            return extra[1]
    return None


def unavailable(name: str, why: str, short: str) -> click.Command:
    """A stand-in for a command that cannot run here: running it (with any arguments) is
    ``why`` as one error line, and ``--help`` lists ``short``."""

    def run() -> None:
        raise ContextPlaneError(f"`contextplane {name}` {why}")

    return click.Command(
        name,
        callback=run,
        help=short,
        short_help=f"({short})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )


def not_installed(name: str, dist: md.Distribution | None, exc: ModuleNotFoundError) -> click.Command:
    """A stand-in for a command whose dependencies are missing: running it is the install hint."""
    missing = exc.name or str(exc)
    extra = _extra_for(dist, missing)
    project = dist.name if dist is not None else "contextplane"
    hint = (
        install_hint(project, extra)
        if extra
        else f"install the module {missing!r} it needs (pip install {missing})"
    )
    return unavailable(
        name, f"is not installed: {hint} (no module named {missing!r})", f"not installed: {hint}"
    )


def load_entry_point(name: str, ep: md.EntryPoint) -> click.Command:
    """The command an entry point names, or a stand-in that says when run why it cannot run:
    its module's dependencies are missing, its module fails to import, or it names something
    that is not a ``click.Command``. The failure is also logged once, with its traceback."""
    where = f"entry point {ep.module}:{ep.attr} of {ep.dist.name if ep.dist is not None else '?'}"
    try:
        command = ep.load()
    except ModuleNotFoundError as exc:
        return not_installed(name, ep.dist, exc)
    except Exception as exc:
        log.warning("command %r (%s) could not be loaded", name, where, exc_info=True)
        why = f"could not be loaded ({where}): {type(exc).__name__}: {exc}"
        return unavailable(name, why, f"broken: {where} fails to load")
    if not isinstance(command, click.Command):
        why = f"is not available: {where} is a {type(command).__name__}, not a click.Command"
        log.warning("command %r %s", name, why)
        return unavailable(name, why, f"broken: {where} is not a command")
    return command
