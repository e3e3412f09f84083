"""Trace the path of one recorded turn through contextplane's modules (docs/architecture.md).

Two entries are traced, each on its second turn (the first one imports and warms the caches, so
what is listed is the steady state of a turn, not the imports): ``compose_projected_context`` plus
``deliver`` (the ADR D8 signature an external runtime calls, handed the memory store only, so the
records go to the store's own backend), and a real LangGraph agent
(``langchain.agents.create_agent`` with ``ContextPlaneMiddleware`` and a scripted chat model).
Both run over the standard sections and the embedded SQLite backend in a temporary directory, so
the injection-log row, the turn inputs and the prompt snapshot are really written.

``sys.setprofile`` sees every Python call. Printed: the contextplane modules in the order a turn
first enters them, each with its layer (``LAYERS``), then every call that climbs back up the
layers (a callee in a higher layer than its caller, e.g. an observer reading a property of a type
the engine module defines). A frame of another library (langgraph, attrs' generated ``__init__``)
is attributed to the nearest contextplane frame below it.

    python bench/turn_path.py [--entry d8|langgraph|both]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
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
            "contextplane.engine",
            "contextplane.projection",
            "contextplane.aprojection",
            "contextplane.delivery",
            "contextplane.subagents",
            "contextplane.handoff",
        ),
    ),
    (4, "host", ("contextplane.host", "contextplane.plugins", "contextplane.hookspecs", "contextplane.authority")),
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
            "contextplane.faces",
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
            "contextplane.records.injections",
            "contextplane.records.snapshots",
            "contextplane.records.summaries",
            "contextplane.records.turn_inputs",
        ),
    ),
)


def layer_of(module: str) -> tuple[int, str]:
    best: tuple[int, int, str] = (-1, 9, "?")
    for number, name, prefixes in LAYERS:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), number, name)
    return best[1], best[2]


def _module_of(frame: FrameType) -> str | None:
    name = frame.f_globals.get("__name__", "")
    if isinstance(name, str) and name.partition(".")[0].startswith("contextplane"):
        return name
    return None


class Tracer:
    """First-entry order of contextplane modules and the module-to-module calls of a turn."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.calls: dict[tuple[str, str], str] = {}

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        module = _module_of(frame)
        if module is None:
            return
        if module not in self.order:
            self.order.append(module)
        caller = frame.f_back
        while caller is not None and _module_of(caller) is None:
            caller = caller.f_back
        if caller is not None:
            source = _module_of(caller)
            assert source is not None
            if source != module:
                self.calls.setdefault((source, module), f"{caller.f_code.co_name} -> {frame.f_code.co_name}")

    def climbs(self) -> list[tuple[str, str, str]]:
        return [(a, b, how) for (a, b), how in self.calls.items() if layer_of(b)[0] > layer_of(a)[0]]


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

    def turn(index: int) -> Callable[[], object]:
        def run() -> object:
            projection = compose_projected_context(
                "when is the deploy window?",
                backend.memories,
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
    print(f"== {title}: {len(tracer.order)} contextplane modules, in the order a turn enters them")
    for module in tracer.order:
        number, name = layer_of(module)
        print(f"  {number} {name:<8} {module}")
    climbs = tracer.climbs()
    print(f"-- {len(climbs)} calls climb back up the layers")
    for source, target, how in climbs:
        print(f"  {source} [{layer_of(source)[1]}] -> {target} [{layer_of(target)[1]}]  ({how})")


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
