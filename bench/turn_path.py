"""Trace the path of one recorded turn through contextplane's modules (docs/architecture.md).

Two entries are traced, each on its second turn (the first one imports and warms the caches, so
what is listed is the steady state of a turn, not the imports): ``compose_projected_context`` plus
``deliver`` (the ADR D8 signature an external runtime calls, handed the memory store only, so the
records go to the store's own backend), and a real LangGraph agent
(``langchain.agents.create_agent`` with ``ContextPlaneMiddleware`` and a scripted chat model).
Both run over the standard sections and the embedded SQLite backend in a temporary directory, so
the injection-log row, the turn inputs and the prompt snapshot are really written.

``sys.setprofile`` sees every Python call. Printed: the contextplane modules in the order a turn
first enters them, each with its layer (``LAYERS``); the same modules grouped by the station of
the path they belong to (``STATIONS``: adapter, runtime, engine, host, sections, fitting,
recorder, backend, delivery, values), so "a turn passes N stations" can be read beside "a turn
enters M modules"; then every call that climbs back up the layers (a callee in a higher layer
than its caller, e.g. an observer reading a property of a type the engine module defines).

A call up that the lower module makes through a protocol it defines itself (dependency
inversion: delivery calling the adapter's ``MessageCodec``) is listed apart, as a callback, and
only with its evidence: the calling function (or one of its callers in the same module) has a
parameter annotated with a ``Protocol`` class from a layer no higher than its own, and the
function called is that parameter's object's implementation of one of the protocol's members.
A call up without that evidence stays a climb. A frame of another library (langgraph, attrs'
generated ``__init__``) is attributed to the nearest contextplane frame below it.

    python bench/turn_path.py [--entry d8|langgraph|both]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import typing
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

#: The layers of the tree, top (adapters) to bottom (values); a package prefix maps to a layer.
#: The longest matching prefix wins. docs/architecture.md's "Layers" table is the same list.
LAYERS: Sequence[tuple[int, str, tuple[str, ...]]] = (
    (
        6,
        "adapter",
        (
            "contextplane_langgraph",
            "contextplane_external",
            "contextplane_console",
            "contextplane.cli",
            "contextplane.explain",
            "contextplane_demo",
        ),
    ),
    (
        5,
        "engine",
        (
            "contextplane.runtime",
            "contextplane.default_runtime",
            "contextplane.engine",
            "contextplane.projection",
            "contextplane.aprojection",
            "contextplane.delivery",
            "contextplane.subagents",
            "contextplane.handoff",
        ),
    ),
    (
        4,
        "host",
        ("contextplane.host", "contextplane.plugins", "contextplane.hookspecs", "contextplane.authority"),
    ),
    (
        3,
        "plugin",
        (
            "contextplane_sections",
            "contextplane.observability",
            "contextplane.recorder",
            "contextplane.records.plans",  # the record writer (was observability.writer)
            "contextplane_postgres.plugin",
            "contextplane_embedders",
        ),
    ),
    (
        2,
        "fitting",
        (
            "contextplane.fitting",
            "contextplane.budget",
            "contextplane.escaping",
            "contextplane.aio",
            "contextplane.signatures",
            "contextplane.memo",
        ),
    ),
    (
        1,
        "storage",
        (
            "contextplane.records.backend",
            "contextplane.records.aio",
            "contextplane.backends",
            "contextplane.store",
            "contextplane_postgres",
        ),
    ),
    (
        0,
        "values",
        (
            "contextplane.request",
            "contextplane.sections",
            "contextplane.types",
            "contextplane.config",
            "contextplane.errors",
            "contextplane.notices",
            "contextplane.defaults",
            "contextplane.memory",
            "contextplane.embedding",
            "contextplane.shims",
            "contextplane.store.protocol",
            "contextplane.prompt_parts",
            "contextplane.records.protocol",
            "contextplane.records.injections",
            "contextplane.records.snapshots",
            "contextplane.records.cache_prefix",
            "contextplane.records.summaries",
            "contextplane.records.turn_inputs",
        ),
    ),
)


#: The stations of a turn's path (docs/architecture.md, "The path of one turn"): what part of the
#: work a module does for the turn. The layers above order them; a station is what one reads the
#: "~10" of issue 25 as. Longest matching prefix wins.
STATIONS: Sequence[tuple[str, tuple[str, ...]]] = (
    ("adapter", LAYERS[0][2]),
    ("runtime", ("contextplane.runtime", "contextplane.default_runtime")),
    (
        "engine",
        (
            "contextplane.engine",
            "contextplane.projection",
            "contextplane.aprojection",
            "contextplane.subagents",
            "contextplane.handoff",
            "contextplane.aio",
        ),
    ),
    ("host", LAYERS[2][2]),
    ("sections", ("contextplane_sections", "contextplane_embedders", "contextplane_postgres.plugin")),
    (
        "fitting",
        ("contextplane.fitting", "contextplane.budget", "contextplane.escaping", "contextplane.memo"),
    ),
    ("recorder", ("contextplane.recorder", "contextplane.observability", "contextplane.records.plans")),
    ("backend", LAYERS[5][2]),
    ("delivery", ("contextplane.delivery",)),
    ("values", LAYERS[6][2]),
)


def _longest(module: str, table: Sequence[tuple[Any, tuple[str, ...]]]) -> Any:
    best: tuple[int, Any] = (-1, None)
    for value, prefixes in table:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), value)
    return best[1]


def layer_of(module: str) -> tuple[int, str]:
    found = _longest(module, [((number, name), prefixes) for number, name, prefixes in LAYERS])
    return found if found is not None else (9, "?")


def station_of(module: str) -> str:
    found = _longest(module, STATIONS)
    return found if found is not None else "?"


def _module_of(frame: FrameType) -> str | None:
    name = frame.f_globals.get("__name__", "")
    if isinstance(name, str) and name.partition(".")[0].startswith("contextplane"):
        return name
    return None


def _function_of(frame: FrameType) -> Any:
    """The function object a frame runs (a module-level function or a method of a module-level
    class), or None; what its parameters are annotated with is read from it. (Not memoised by
    code object: equal code objects of two modules compare equal.)"""
    code = frame.f_code
    found = None
    names = frame.f_globals
    candidate = names.get(code.co_name)
    if getattr(candidate, "__code__", None) is code:
        found = candidate
    else:
        for value in list(names.values()):
            if isinstance(value, type) and value.__module__ == names.get("__name__"):
                member = vars(value).get(code.co_name)
                member = getattr(member, "__func__", member)
                if getattr(member, "__code__", None) is code:
                    found = member
                    break
    return found


def _protocols(function: Any) -> dict[str, type]:
    """The function's parameters annotated with a ``Protocol`` class, by name."""
    out: dict[str, type] = {}
    code = function.__code__
    params = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    for name, hint in getattr(function, "__annotations__", {}).items():
        if name not in params:
            continue
        if isinstance(hint, str):
            try:
                hint = eval(hint, function.__globals__)
            except Exception:
                continue
        cls = typing.get_origin(hint) or hint
        if isinstance(cls, type) and getattr(cls, "_is_protocol", False):
            out[name] = cls
    return out


def callback_evidence(caller: FrameType, callee: FrameType) -> str | None:
    """Why a call up is a callback through a protocol the caller's side defines, or None.

    Walks the caller's frames in its own module (a generator expression, a nested function);
    for each, a parameter annotated with a ``Protocol`` from a layer no higher than the caller's
    whose object's member (one the protocol declares) runs the callee's code."""
    module = _module_of(caller)
    assert module is not None
    level = layer_of(module)[0]
    code = callee.f_code
    frame: FrameType | None = caller
    while frame is not None and _module_of(frame) == module:
        function = _function_of(frame)
        if function is not None:
            for name, protocol in _protocols(function).items():
                if layer_of(protocol.__module__)[0] > level:
                    continue
                obj = frame.f_locals.get(name)
                for member, declared in vars(protocol).items():
                    if member.startswith("_") or not callable(declared):
                        continue
                    impl = getattr(obj, member, None)
                    if getattr(getattr(impl, "__func__", impl), "__code__", None) is code:
                        return (
                            f"{protocol.__module__}.{protocol.__qualname__}.{member}, called on the "
                            f"{type(obj).__name__} passed as `{name}` to {function.__qualname__}"
                        )
        frame = frame.f_back
    return None


#: The module that performs the rows of a turn's records on its backend (the host drives it).
WRITER = "contextplane.records.plans"


def _chain(frame: FrameType) -> list[tuple[str, str]]:
    """The distinct contextplane modules on the stack down to ``frame``, outermost first, each
    with the function that first entered it: the path a call took through the modules."""
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    walk: FrameType | None = frame
    while walk is not None:
        module = _module_of(walk)
        if module is not None:
            if module in seen:  # re-entered lower on the stack: keep the outermost entry
                found = [entry for entry in found if entry[0] != module]
            seen.add(module)
            found.append((module, walk.f_code.co_name))
        walk = walk.f_back
    return found[::-1]


class Tracer:
    """First-entry order of contextplane modules and the module-to-module calls of a turn."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.calls: dict[tuple[str, str], str] = {}
        #: Pairs with a call up that has no callback evidence.
        self.unexplained: dict[tuple[str, str], str] = {}
        #: Pairs with a call up through a protocol, with the evidence of the first.
        self.evidence: dict[tuple[str, str], tuple[str, str]] = {}
        #: The longest chain of distinct modules on the call stack at any one call.
        self.deepest: list[tuple[str, str]] = []
        #: Each record write (a backend function the record writer calls), with the chain of
        #: modules on the stack from the entry to it: the path from the adapter to the records.
        self.record_paths: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        module = _module_of(frame)
        if module is None:
            return
        if module not in self.order:
            self.order.append(module)
        chain = _chain(frame)
        if len(chain) > len(self.deepest):
            self.deepest = chain
        if station_of(module) == "backend" and len(chain) > 1 and chain[-2][0] == WRITER:
            self.record_paths.setdefault((module, frame.f_code.co_name), chain)
        caller = frame.f_back
        while caller is not None and _module_of(caller) is None:
            caller = caller.f_back
        if caller is not None:
            source = _module_of(caller)
            assert source is not None
            if source != module:
                how = f"{caller.f_code.co_name} -> {frame.f_code.co_name}"
                self.calls.setdefault((source, module), how)
                if layer_of(module)[0] > layer_of(source)[0]:
                    why = callback_evidence(caller, frame)
                    if why is None:
                        self.unexplained.setdefault((source, module), how)
                    else:
                        self.evidence.setdefault((source, module), (how, why))

    def climbs(self) -> list[tuple[str, str, str]]:
        """Calls up the layers with no evidence of a callback (a pair with one such call is a climb)."""
        return [(a, b, how) for (a, b), how in self.unexplained.items()]

    def callbacks(self) -> list[tuple[str, str, str, str]]:
        """Calls up the layers, every one of them made through a protocol the caller's side defines."""
        return [
            (a, b, how, why) for (a, b), (how, why) in self.evidence.items() if (a, b) not in self.unexplained
        ]

    def stations(self) -> dict[str, list[str]]:
        """The modules entered, grouped by station, stations in the order the turn reaches them."""
        out: dict[str, list[str]] = {}
        for module in self.order:
            out.setdefault(station_of(module), []).append(module)
        return out


def traced(turn: Callable[[], object]) -> Tracer:
    tracer = Tracer()
    sys.setprofile(tracer)
    try:
        turn()
    finally:
        sys.setprofile(None)
    return tracer


def _seed(backend: Any) -> None:
    memories = backend.memories
    memories.add_chunk("The deploy window is Tuesday 14:00 UTC.", "hot", "operator")
    memories.add_chunk("The staging database is called orchid.", "general", "operator")
    memories.add_chunk("Deploys roll back with the undo-release script.", "fact", "extracted")


def d8_turns(root: Path) -> Iterator[Callable[[], object]]:
    from contextplane import compose_projected_context
    from contextplane.backends.sqlite import SQLiteBackend
    from contextplane.config import structure
    from contextplane.delivery import deliver, plain_projection_message
    from contextplane.plugins import PluginHost

    config = structure({"context": {"context_window": 200_000}})
    host = PluginHost.from_entry_points(config)
    backend = SQLiteBackend(root / "d8.sqlite3", config=config)
    _seed(backend)
    store = backend.memories  # the store the caller holds (reading it is not the turn's work)

    def turn(index: int) -> Callable[[], object]:
        def run() -> object:
            projection = compose_projected_context(
                "when is the deploy window?",
                store,
                state={"task": "deploy"},
                session_id="s1",
                turn_index=index,
                host=host,
            )
            history = [{"role": "user", "content": "when is the deploy window?"}]
            return deliver(
                projection, history, prefix=None, call_index=0, wrap=plain_projection_message, host=host
            )

        return run

    yield turn(0)
    yield turn(1)
    backend.close()


def langgraph_turns(root: Path) -> Iterator[Callable[[], object]]:
    from langchain.agents import create_agent
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph.checkpoint.memory import InMemorySaver

    from contextplane.backends.sqlite import SQLiteBackend
    from contextplane.config import structure
    from contextplane.plugins import PluginHost
    from contextplane_langgraph import ContextPlaneMiddleware

    class Answering(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "turn-path-fake"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Answering:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=AIMessage("Tuesday 14:00 UTC."))])

    config = structure({"context": {"context_window": 200_000}})
    host = PluginHost.from_entry_points(config)
    backend = SQLiteBackend(root / "lg.sqlite3", config=config)
    _seed(backend)
    middleware = ContextPlaneMiddleware(host=host, backend=backend, knowledge_store=backend.memories)
    agent = create_agent(Answering(), tools=[], middleware=[middleware], checkpointer=InMemorySaver())

    def turn() -> object:
        return agent.invoke(
            {"messages": [HumanMessage("when is the deploy window?")]},
            {"configurable": {"thread_id": "t1"}},
        )

    yield turn
    yield turn
    backend.close()


def show(title: str, tracer: Tracer) -> None:
    stations = tracer.stations()
    print(f"== {title}: {len(tracer.order)} contextplane modules, in the order a turn enters them")
    for module in tracer.order:
        number, name = layer_of(module)
        print(f"  {number} {name:<8} {module}")
    print(f"-- {len(stations)} stations, in the order a turn reaches them (modules per station)")
    for station, modules in stations.items():
        print(f"  {station:<9} {len(modules):>2}  {', '.join(modules)}")
    climbs = tracer.climbs()
    print(f"-- {len(climbs)} calls climb back up the layers")
    for source, target, how in climbs:
        print(f"  {source} [{layer_of(source)[1]}] -> {target} [{layer_of(target)[1]}]  ({how})")
    print("-- the path from the entry to each record write (modules on the stack)")
    for (_module, function), chain in tracer.record_paths.items():
        print(f"  {len(chain):>2}  {' -> '.join(m.rpartition('.')[2] for m, _f in chain)}  ({function})")
    print(f"-- the deepest chain of modules on the stack: {len(tracer.deepest)}")
    print("  " + " -> ".join(f"{m}:{f}" for m, f in tracer.deepest))
    callbacks = tracer.callbacks()
    print(
        f"-- {len(callbacks)} calls up the layers are callbacks through a protocol the caller's side defines"
    )
    for source, target, how, why in callbacks:
        print(f"  {source} [{layer_of(source)[1]}] -> {target} [{layer_of(target)[1]}]  ({how})")
        print(f"      through {why}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entry", choices=("d8", "langgraph", "both"), default="both")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        entries = {"d8": d8_turns, "langgraph": langgraph_turns}
        for name, make in entries.items():
            if args.entry not in (name, "both"):
                continue
            turns = make(root)
            next(turns)()  # warm: imports, caches, the schema
            show(name, traced(next(turns)))
            next(turns, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
