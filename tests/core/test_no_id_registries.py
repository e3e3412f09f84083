"""No process-wide table keyed by ``id()`` in core (issue 25).

Per-turn and per-deployment state used to travel through module-level dicts keyed by an
object's ``id()`` (the observer's recorders, the backend owners, the engine's drafting memos,
the configuration's JSON). A runtime holds that state now, and the engine's memos ride on the
host's ``SectionOrder``. This test reads every core module's syntax tree and fails on a
module-level name subscripted or looked up with ``id(...)`` as its key; a local table inside
one call (a turn's outcomes by registration) is not a registry and is allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core" / "contextplane"


def id_keyed_globals(source: str) -> list[tuple[int, str]]:
    """(line, name) of each module-level name used as a table keyed by ``id(...)``."""
    tree = ast.parse(source)
    module_names = set()
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        module_names |= {t.id for t in targets if isinstance(t, ast.Name)}

    def is_id_call(node: ast.AST) -> bool:
        if isinstance(node, ast.Tuple):
            return any(is_id_call(e) for e in node.elts)
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id"

    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and is_id_call(node.slice)
            and node.value.id in module_names
        ):
            found.append((node.lineno, node.value.id))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in module_names
            and node.func.attr in {"get", "pop", "setdefault"}
            and node.args
            and is_id_call(node.args[0])
        ):
            found.append((node.lineno, node.func.value.id))
    return found


def test_no_core_module_keeps_a_table_keyed_by_id() -> None:
    bad = [
        f"{path.relative_to(CORE.parent)}:{line} {name}"
        for path in sorted(CORE.rglob("*.py"))
        for line, name in id_keyed_globals(path.read_text(encoding="utf-8"))
    ]
    assert not bad, (
        "module-level tables keyed by id(): hold the state on the object it belongs to (the "
        "Runtime, the TurnState, the host's SectionOrder) instead:\n  " + "\n  ".join(bad)
    )


def test_the_check_finds_a_registry_and_leaves_a_local_table_alone() -> None:
    registry = "_seen: dict[int, object] = {}\ndef f(x):\n    _seen[id(x)] = x\n    return _seen.get(id(x))\n"
    assert id_keyed_globals(registry) == [(3, "_seen"), (4, "_seen")]
    keyed_by_pair = "_memo = {}\ndef f(x, y):\n    return _memo.get((id(x), y))\n"
    assert id_keyed_globals(keyed_by_pair) == [(3, "_memo")]
    local = "def f(regs):\n    outcomes = {}\n    for r in regs:\n        outcomes[id(r)] = r\n    return outcomes\n"
    assert id_keyed_globals(local) == []


def test_the_engine_memos_live_and_die_with_the_registration_state() -> None:
    from contextplane import PluginHost, ProjectionRequest, hookimpl
    from contextplane.config import Config
    from contextplane.engine.assembly import Drafting, prepare
    from contextplane.sections import ContextSection, Envelope, Shed

    host = PluginHost.from_entry_points(Config())
    request = ProjectionRequest(query="q", config=host.config)
    first = prepare(request, host, None)[3]
    assert isinstance(first, Drafting)
    order = host.ordered_context_sections()
    assert prepare(request, host, None)[3] is first  # memoised on the order
    assert any(value is first for value in order.plans.values())

    class Extra:
        @hookimpl
        def register_context_sections(self, register):  # type: ignore[no-untyped-def]
            register(ContextSection("extra", 99, Shed.DROP_SECTION, lambda _r: None, Envelope("extra")))

    host.register(Extra(), name="extra")
    again = prepare(request, host, None)[3]
    assert again is not first and "extra" in [reg.section.name for reg, _why in again]
    assert host.ordered_context_sections() is not order
