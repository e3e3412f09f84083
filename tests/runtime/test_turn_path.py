"""The path of one turn (issue 25, docs/architecture.md): no call climbs back up the layers.

``bench/turn_path.py`` traces a recorded turn from both entries (ADR D8's
``compose_projected_context`` + ``deliver``, and a LangGraph agent with the middleware). These
tests run its tracer: no climb on either entry; the only calls up are delivery's through the
``MessageCodec`` it defines, each with its evidence; a call up with no such evidence (a plain
function handed in, or a protocol the higher layer defines) is still counted as a climb; and
reading a projection's section reports calls nothing above the value types (it called back into
``engine.assembly`` before).
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextplane import PluginHost, compose_projected_context

BENCH = Path(__file__).resolve().parents[2] / "bench" / "turn_path.py"


@pytest.fixture(scope="module")
def turn_path() -> Iterator[Any]:
    spec = importlib.util.spec_from_file_location("turn_path_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def traced_second_turn(turn_path: Any, entry: str) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        turns = {"d8": turn_path.d8_turns, "langgraph": turn_path.langgraph_turns}[entry](Path(tmp))
        next(turns)()
        tracer = turn_path.traced(next(turns))
        next(turns, None)
    return tracer


@pytest.mark.parametrize("entry", ["d8", "langgraph"])
def test_a_turn_climbs_no_layer_and_calls_up_only_through_the_codec(turn_path: Any, entry: str) -> None:
    tracer = traced_second_turn(turn_path, entry)
    assert tracer.climbs() == []
    for source, _target, _how, why in tracer.callbacks():
        assert source == "contextplane.delivery"
        assert why.startswith("contextplane.delivery.MessageCodec.")
        assert "passed as `codec` to placed" in why
    stations = tracer.stations()
    assert "?" not in stations, f"modules in no station: {stations.get('?')}"
    unplaced = [m for m in tracer.order if turn_path.layer_of(m)[1] == "?"]
    assert not unplaced, f"modules in no layer: {unplaced}"
    assert {"runtime", "engine", "sections", "fitting", "recorder", "backend", "delivery"} <= set(stations)
    if entry == "langgraph":
        assert len(tracer.callbacks()) >= 1 and "adapter" in stations
    else:  # the D8 path resolves no backend per turn: the store's runtime did it once
        assert not {"contextplane.backends", "contextplane.records.backend"} & set(tracer.order)


LOW = """
from typing import Protocol

class Codec(Protocol):
    def wrap(self, text: str) -> str: ...

def through(codec: Codec) -> str:
    return codec.wrap("x")

def direct(wrap) -> str:
    return wrap("x")
"""

HIGH = """
from typing import Protocol

class Theirs(Protocol):
    def wrap(self, text: str) -> str: ...

class Carrier:
    def wrap(self, text: str) -> str:
        return text.upper()

def wrap(text: str) -> str:
    return text.upper()
"""


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def test_a_call_up_is_a_callback_only_with_a_protocol_of_the_lower_layer(turn_path: Any) -> None:
    low = _module("contextplane.engine.turn_path_probe_low", LOW)
    high = _module("contextplane_langgraph.turn_path_probe_high", HIGH)
    theirs = _module(
        "contextplane.engine.turn_path_probe_theirs", LOW.replace("codec: Codec", "codec: Theirs")
    )
    theirs.Theirs = high.Theirs  # the annotation names the adapter's protocol
    try:
        through = turn_path.traced(lambda: low.through(high.Carrier()))
        assert through.climbs() == []
        ((source, target, _how, why),) = through.callbacks()
        assert (source, target) == (low.__name__, high.__name__)
        assert why.startswith(f"{low.__name__}.Codec.wrap, called on the Carrier passed as `codec`")

        direct = turn_path.traced(lambda: low.direct(high.wrap))  # a bare function: no protocol
        assert [(a, b) for a, b, _ in direct.climbs()] == [(low.__name__, high.__name__)]
        assert direct.callbacks() == []

        upward = turn_path.traced(lambda: theirs.through(high.Carrier()))  # the higher layer's protocol
        assert [(a, b) for a, b, _ in upward.climbs()] == [(theirs.__name__, high.__name__)]
        assert upward.callbacks() == []
    finally:
        for module in (low, high, theirs):
            del sys.modules[module.__name__]


def test_reading_a_projection_s_reports_calls_nothing_above_the_value_types(
    turn_path: Any, host: PluginHost
) -> None:
    """The reports are built when first read; before, that read called ``engine.assembly``."""
    projection = compose_projected_context("q", host=host, session_id="s", record=False)
    tracer = turn_path.traced(lambda: projection.sections)
    layers = {module: turn_path.layer_of(module)[1] for module in tracer.order}
    assert layers and set(layers.values()) == {"values"}, layers
    assert [r.name for r in projection.sections] == sorted(
        (r.name for r in projection.sections),
        key=lambda n: (projection.section(n).priority, n),  # type: ignore[union-attr]
    )


#: Issue 25's bar, "from an adapter to the records in at most ~10 modules", read on the call
#: stack: the modules a call passes through from the entry down to each record write.
RECORD_PATH_LIMIT = 10
#: The deepest chain of modules on the stack at any call of a turn (the retrieved section's
#: search down to a value check): 11 at the end of issue 25; more means a new layer of hops.
DEEPEST_LIMIT = 11


@pytest.mark.parametrize("entry", ["d8", "langgraph"])
def test_the_path_from_the_entry_to_the_records_is_at_most_ten_modules(turn_path: Any, entry: str) -> None:
    tracer = traced_second_turn(turn_path, entry)
    writes = {function for (_module, function) in tracer.record_paths}
    assert {"record", "put_inputs", "put"} <= writes, writes  # injection row, turn inputs, snapshot
    first = {
        "d8": {"contextplane.default_runtime", "contextplane.delivery"},
        "langgraph": {"contextplane_langgraph.middleware"},
    }
    for (module, function), chain in tracer.record_paths.items():
        names = [m for m, _f in chain]
        assert names[0] in first[entry], (function, names)
        assert names[-2:] == ["contextplane.records.plans", module]
        assert len(names) <= RECORD_PATH_LIMIT, (function, names)
    assert len(tracer.deepest) <= DEEPEST_LIMIT, [m for m, _f in tracer.deepest]


def test_the_chain_counts_a_module_once_where_the_stack_re_enters_it(turn_path: Any) -> None:
    """The count can fail: a call that goes a -> b -> a -> c is three modules, a kept where it
    was first entered."""
    frames: list[Any] = []
    a_mod = types.ModuleType("contextplane.fake_a")
    b_mod = types.ModuleType("contextplane.fake_b")
    c_mod = types.ModuleType("contextplane.fake_c")
    exec("def a(n):\n    return b(n) if n else c()\n", a_mod.__dict__)
    exec("def b(n):\n    return a(n - 1)\n", b_mod.__dict__)
    exec("def c():\n    return leaf()\n", c_mod.__dict__)
    a_mod.b, b_mod.a, a_mod.c = b_mod.b, a_mod.a, c_mod.c  # type: ignore[attr-defined]
    c_mod.leaf = lambda: frames.append(sys._getframe(1))  # type: ignore[attr-defined]  # c's frame
    a_mod.a(1)  # type: ignore[attr-defined]
    chain = [m for m, _f in turn_path._chain(frames[-1])]
    assert chain[-3:] == ["contextplane.fake_a", "contextplane.fake_b", "contextplane.fake_c"]
