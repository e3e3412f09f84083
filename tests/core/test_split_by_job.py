"""Issue 25, step 7: ``plugins.py`` became ``contextplane.host`` and ``fitting.py`` the
``contextplane.fitting`` package, and every import path used before still works.

Why these checks: the engine and third parties import and patch names on the old paths. A name
that moved must still import from there as the very object its new home holds, and a patch set
on the old path must reach the code that reads the name (else a test's patch silently tests
nothing). The host must still not import the record pipeline (the knot of step 0), from any of
its new modules.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pytest

import contextplane.fitting as fitting
import contextplane.plugins as plugins
from contextplane.fitting import plans, rows, shedding
from contextplane.host import calling, loading, tracing

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import import_cycles  # noqa: E402

#: Every name ``fitting.py`` defined or re-exported when it was one module.
FITTING_NAMES = (
    "CONTINUATION", "CUT_MARKER", "ENVELOPE_SEPARATOR", "ROW_PREFIX", "Layout", "SectionPlan",
    "ShedStep", "Step", "cut_row", "escape_measured", "fit", "format_row", "log", "overflow_key",
    "restore", "_CUR", "_DEGRADE", "_DELIVERY_ORDER", "_DROP_ROWS", "_DROP_SECTION",
    "_ENVELOPE_TAG", "_LINE", "_LINE_LEN", "_MIN_LINE", "_NEVER", "_NONE", "_NO_LINES", "_ROW_ID",
    "_SHORT", "_SIZE", "_TEXT", "_above_the_first_kept_shed", "_degrade", "_degrade_all",
    "_degrade_away", "_degrade_rows", "_drop_rows", "_drop_section", "_drop_to", "_give_back",
    "_line_len", "_line_of", "_lines", "_rank_order", "_render_order", "_row_key",
)  # fmt: skip
#: Every name ``plugins.py`` defined or re-exported (but ``_default``: the process-wide host is
#: state, reached through ``get_host``/``reset_host``).
PLUGINS_NAMES = (
    "BUILTIN_PLUGINS", "ENTRY_POINT_GROUP", "PLUGINS_ENV", "TRACE_ENV", "UNHONOURED_OPTIONS",
    "PluginFailure", "PluginHost", "PluginInfo", "Registered", "T", "get_host", "log",
    "plugin_host_with", "reset_host", "selected_plugin_names", "trace_log", "_BUILTIN_NAMES",
    "_SPEC_NAMES", "_core_version", "_default_lock", "_describe_exc", "_protocol_problems",
    "_trace_repr",
)  # fmt: skip


def _home_of(name: str, homes: tuple[types.ModuleType, ...]) -> object:
    held = [home.__dict__[name] for home in homes if name in home.__dict__]
    assert held, f"{name} lives in none of {[h.__name__ for h in homes]}"
    return held[0]


@pytest.mark.parametrize("name", FITTING_NAMES)
def test_every_name_fitting_had_imports_from_it_as_the_object_its_home_holds(name: str) -> None:
    assert getattr(fitting, name) is _home_of(name, (rows, plans, shedding, sys.modules["contextplane.types"]))


@pytest.mark.parametrize("name", PLUGINS_NAMES)
def test_every_name_plugins_had_imports_from_it_as_the_object_its_home_holds(name: str) -> None:
    homes = (loading, calling, tracing, sys.modules["contextplane.types"])
    assert getattr(plugins, name) is _home_of(name, homes)


def test_the_loggers_keep_their_names() -> None:
    """Log configurations and caplog filters name them; the split moved code, not log names."""
    assert fitting.log.name == "contextplane.fitting"
    assert plugins.log.name == "contextplane.plugins"
    assert plugins.trace_log.name == "contextplane.plugins.trace"


def test_a_patch_on_the_old_plugins_path_reaches_the_loader() -> None:
    assert plugins.PluginHost().pm.get_plugin("contextplane.records") is not None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plugins, "BUILTIN_PLUGINS", ())
        assert loading.BUILTIN_PLUGINS == ()
        assert plugins.PluginHost().pm.get_plugin("contextplane.records") is None
    assert loading.BUILTIN_PLUGINS == plugins.BUILTIN_PLUGINS != ()
    assert plugins.PluginHost().pm.get_plugin("contextplane.records") is not None


def test_a_patch_on_the_old_fitting_path_reaches_the_row_cutter() -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fitting, "CUT_MARKER", "[cut {n}]")
        assert fitting.cut_row("word " * 20, 40).endswith("\n[cut 71]")
    assert fitting.cut_row("word " * 20, 40).endswith("\n[… cut: 86 more chars]")


def test_patch_through_sets_only_homes_holding_the_same_object(tmp_path: Path) -> None:
    (tmp_path / "shimtest_home_a.py").write_text("X = object()\nY = 1\n", encoding="utf-8")
    (tmp_path / "shimtest_home_b.py").write_text("X = object()\n", encoding="utf-8")  # another X
    (tmp_path / "shimtest_old.py").write_text(
        "from shimtest_home_a import X, Y\n"
        "import shimtest_home_a, shimtest_home_b\n"
        "from contextplane.shims import patch_through\n"
        "patch_through(__name__, (shimtest_home_a, shimtest_home_b))\n",
        encoding="utf-8",
    )
    sys.path.insert(0, str(tmp_path))
    try:
        old = importlib.import_module("shimtest_old")
        a, b = sys.modules["shimtest_home_a"], sys.modules["shimtest_home_b"]
        b_x = b.X
        old.X = "patched"
        old.Y = 2
        old.Z = 3  # a name the old module never had reaches no home
        assert a.X == "patched" and a.Y == 2 and b.X is b_x
        assert not hasattr(a, "Z") and not hasattr(b, "Z")
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("shimtest_old", "shimtest_home_a", "shimtest_home_b"):
            sys.modules.pop(name, None)


def test_no_host_module_imports_the_record_pipeline() -> None:
    known = import_cycles.modules()
    host = sorted(m for m in known if m == "contextplane.host" or m.startswith("contextplane.host."))
    assert host == ["contextplane.host", "contextplane.host.calling", "contextplane.host.loading",
                    "contextplane.host.tracing"]  # fmt: skip
    reaching = [
        e.describe()
        for module in [*host, "contextplane.plugins"]
        for e in import_cycles.edges_of(module, known)
        if e.target.startswith("contextplane.observability")
    ]
    assert not reaching, "the host imports the record pipeline (register it by module path):\n" + "\n".join(
        reaching
    )


@pytest.mark.parametrize("package", ["host", "fitting"])
def test_the_split_modules_stay_small(package: str) -> None:
    """The point of the split: one job per module, none over 500 lines (issue 25)."""
    sizes = {
        p.name: len(p.read_text(encoding="utf-8").splitlines())
        for p in (ROOT / "core" / "contextplane" / package).glob("*.py")
    }
    assert len(sizes) == 4
    assert max(sizes.values()) <= 500, sizes
