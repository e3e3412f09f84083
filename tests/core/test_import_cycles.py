"""Zero import cycles among the core's modules, counting ``if TYPE_CHECKING:`` imports too.

tests/core/test_layout.py keeps the cycles that can fail an import at zero; this keeps the ones
that only type checkers follow at zero as well (issue 25): such a cycle is still a knot (the two
modules cannot be moved or read apart) and its usual price is an ``Any``. The count is
bench/import_cycles.py's, static (``ast``): nothing is imported.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import import_cycles  # noqa: E402

#: The value modules: what a turn's data is made of, and the protocols its fields are typed with
#: (the request names its memory store and its backend). They import no behaviour: only each
#: other (and the configuration's type, which the request carries).
VALUE_MODULES = {
    "contextplane.types",
    "contextplane.request",
    "contextplane.sections",
    "contextplane.prompt_parts",
    "contextplane.errors",
    "contextplane.store.protocol",
    "contextplane.records.protocol",
    "contextplane.records.injections",
    "contextplane.records.snapshots",
    "contextplane.records.summaries",
    "contextplane.records.cache_prefix",
    "contextplane.memory.model",
    "contextplane.memory.history",
    "contextplane.memory.trust",
}
VALUE_MAY_IMPORT = VALUE_MODULES | {"contextplane.config"}


def _describe(found: list[tuple[list[str], list[import_cycles.Edge]]]) -> str:
    return "\n".join(
        f"  {' <-> '.join(group)}; one cycle:\n" + "\n".join(f"    {e.describe()}" for e in cycle)
        for group, cycle in found
    )


def test_no_import_cycles_in_core_counting_type_checking_imports() -> None:
    found = import_cycles.cycles(import_cycles.KINDS)
    assert not found, (
        f"{len(found)} import cycle group(s) among core modules, counting TYPE_CHECKING and "
        "function-local imports. Move what both sides need into a module neither imports back "
        "(value types go to contextplane.types), or read the other side through a Protocol:\n"
        + _describe(found)
    )


def test_the_value_modules_import_no_behaviour() -> None:
    edges = [e for e in import_cycles.all_edges() if e.source in VALUE_MODULES]
    assert any(e.target == "contextplane.request" for e in edges), "import parsing broke"
    bad = [e.describe() for e in edges if e.target not in VALUE_MAY_IMPORT]
    assert not bad, (
        "a value module imports behaviour; keep contextplane.types, request and sections (and "
        "the protocols they are typed with) free of it (pass behaviour in, or move the function "
        "out):\n  " + "\n  ".join(bad)
    )


def test_the_request_names_its_store_and_backend_by_their_protocols() -> None:
    """``ProjectionRequest``'s wiring fields are typed (they were ``Any`` while naming the
    backend's protocol closed a cycle through ``contextplane.types``)."""
    import typing

    import contextplane.config
    import contextplane.records.protocol
    import contextplane.request
    import contextplane.store.protocol
    from contextplane.request import ProjectionRequest

    names = vars(contextplane.request) | {
        "Config": contextplane.config.Config,
        "Backend": contextplane.records.protocol.Backend,
        "KnowledgeStore": contextplane.store.protocol.KnowledgeStore,
    }
    hints = typing.get_type_hints(ProjectionRequest, globalns=names)
    assert hints["knowledge_store"] == contextplane.store.protocol.KnowledgeStore | None
    assert hints["backend"] == contextplane.records.protocol.Backend | None
    assert not [name for name, hint in hints.items() if hint is typing.Any]


def test_the_counter_sees_a_cycle_that_closes_only_for_the_type_checker(tmp_path: Path) -> None:
    """The count can fail: a TYPE_CHECKING-only cycle is counted (and is no runtime cycle), and
    a function-local one is counted as lazy."""
    pkg = tmp_path / "knot"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "a.py").write_text("from knot.b import B\n", encoding="utf-8")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from knot.a import A\nB = 1\n",
        encoding="utf-8",
    )
    (pkg / "c.py").write_text("from knot import d\n", encoding="utf-8")
    (pkg / "d.py").write_text("def f():\n    from knot import c\n", encoding="utf-8")
    counts = {name: import_cycles.cycles(kinds, pkg) for name, kinds in import_cycles.GRAPHS.items()}
    assert [g for g, _ in counts["top"]] == []
    assert [g for g, _ in counts["top+typing"]] == [["knot.a", "knot.b"]]
    assert [g for g, _ in counts["top+lazy"]] == [["knot.c", "knot.d"]]
    assert len(counts["all"]) == 2
    ((_group, cycle),) = counts["top+typing"]
    assert [(e.source, e.kind) for e in cycle] == [("knot.a", "top"), ("knot.b", "typing")]


def test_the_record_plugin_is_registered_by_module_path() -> None:
    """plugins.py names the built-in record plugin by its module, imported when a host is made."""
    from contextplane.observability import observer
    from contextplane.plugins import BUILTIN_PLUGINS, PluginHost

    assert BUILTIN_PLUGINS == (("contextplane.records", "contextplane.observability.observer"),)
    assert PluginHost().pm.get_plugin("contextplane.records") is observer
    assert not any(
        e.target.startswith("contextplane.observability")
        for e in import_cycles.edges_of("contextplane.plugins", import_cycles.modules())
    )
