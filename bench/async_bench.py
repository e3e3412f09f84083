"""Async composition: its overhead on one turn, and what it buys under concurrency.

    python bench/async_bench.py [--turns 50] [--rounds 15] [--quick] [--json]

1. Overhead (target <= 1.2x). The path users take: ``compose_projected_context`` against
   ``acompose_projected_context`` with the same providers (the standard sections), the
   embedded SQLite backend (2,000 memories across the global, project and session scopes, ten
   prior-session summaries), natural-language queries, the turn's scopes and ``record=True``
   (injection-log row and trajectory entry per turn), one turn at a time. The embedded store
   reads in worker threads, so ``acompose`` composes each turn in one worker thread (one
   hand-off per turn). Measured in pairs (one turn each way, the order alternating, both the
   same query for the same session), so machine load falls on both halves of a pair alike;
   the figures are the median per-turn times and the median of the pairs' ratios. A second
   pair, with no store and nothing recorded (working state and a skills index only), isolates
   the machinery's fixed cost, which the first pair's I/O otherwise hides; it is reported, not
   held to the target. The same turns are also reported in CPU time (the process's, every
   thread): the wall-time ratio includes waiting for a core at each of the two thread
   wake-ups, which machine load inflates (the load average is printed beside it), while the
   CPU ratio is the work the async route adds.

   Then the embedded store alone: ``asearch`` against ``search`` per call (what one worker-thread
   hop over a pooled reader costs), and six searches gathered against six awaited in turn.

2. Concurrency. A store that answers a search after 20 ms and an embedder that answers after
   15 ms (a remote store and embedding service, both with native async forms):
   ``acompose_projected_context`` for N turns awaited one after another (the baseline) against
   the same N turns gathered; then the same through a real ``create_agent`` graph with a fake
   model (``ainvoke``), where the baseline is the middleware as it was before the async path
   (its async hooks calling the synchronous composition on the loop, which is what blocking
   costs), and one turn alone. Reported as wall times and ratios; the graph's own CPU work per
   turn (the bare graph's concurrent wall time is shown) is the floor the ratio cannot go under.

3. The local case. The same concurrent turns on the embedded SQLite backend itself, where
   nothing is remote: wall time and the event loop's longest stall (the longest single callback
   or task step: how long one turn's work held every other coroutine of the process) with the
   async middleware and with the blocking one. Here the async path does not buy throughput (the work is local CPU and
   SQLite under one GIL); it buys a loop that keeps answering.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from contextplane import acompose_projected_context, compose_projected_context, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.testing.memory import InMemoryBackend, InMemoryKnowledgeStore
from contextplane_langgraph import ContextPlaneMiddleware
from contextplane_sections import always_on, prior_sessions, retrieved, skills, working_state

SECTIONS = [working_state, always_on, skills, prior_sessions, retrieved]
TOPICS = [
    ("deploy", "The deploy window is Tuesday 14:00 UTC; never deploy on Fridays."),
    ("canary", "Canary runs 30 minutes before a full rollout and checks p95 latency."),
    ("database", "We chose Alembic for schema migrations; every migration needs a rollback."),
    ("checkout", "Checkout calls the payment provider with a 3 second timeout."),
    ("oncall", "Priya is on call this week; page her for production incidents."),
    ("billing", "Invoices are generated on the first business day of each month."),
    ("search", "The search index is rebuilt nightly at 02:00 UTC."),
    ("auth", "Sessions expire after 12 hours; refresh tokens after 30 days."),
]
QUERIES = [
    "when is the deploy window this week?",
    "how long does the canary run before a rollout?",
    "which tool do we use for database migrations?",
    "what timeout does checkout use for payments?",
    "who is on call for production incidents?",
    "when are invoices generated?",
]
SKILLS = [(f"skill-{i}", f"Does task number {i} safely.") for i in range(12)]
STATE = {"goal": "Ship checkout v2", "plan": ["Freeze", "Canary", "Deploy"], "tasks": ["Ask Priya"]}


# --- 1. overhead --------------------------------------------------------------------------------


def seeded_backend(tmp: Path, config: Any, embedder: Any = None) -> SQLiteBackend:
    backend = SQLiteBackend(tmp / "bench.sqlite3", config=config, embedder=embedder)
    rows = []
    for i in range(2_000):
        topic, text = TOPICS[i % len(TOPICS)]
        scope = ("", "project:web", f"session:s-{i % 20}")[i % 3]
        domain = "hot" if i % 400 == 0 else "general"
        rows.append(
            {"content": f"{text} (note {i} on {topic})", "domain": domain, "source_type": "operator", "namespace": scope}
        )
    backend.memories.add_chunks(rows)
    for i in range(10):
        topic, text = TOPICS[i % len(TOPICS)]
        backend.summaries.add(f"s-{i}", f"Discussed {topic}: {text}", topic=topic)
    return backend


def per_turn(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


async def overhead(rounds: int, block: int, tmp: Path) -> dict[str, Any]:
    config = structure({"context": {"context_window": 200_000, "project": "web"}})
    host = plugin_host_with(SECTIONS, config)
    backend = seeded_backend(tmp, config)
    counter = iter(range(10**9))

    def kwargs(record: bool, store: Any, n: int) -> dict[str, Any]:
        return {
            "query": QUERIES[n % len(QUERIES)],
            "knowledge_store": store,
            "skills_index": SKILLS,
            "state": STATE,
            "session_id": f"s-{n % 20}",
            "turn_index": n,
            "host": host,
            "record": record,
        }

    async def pair(record: bool, store: Any) -> tuple[float, float, float]:
        """Per-turn medians of each path, and the median of the per-pair ratios: turns are
        composed in pairs (one each way, the order alternating), so a load spike on the machine
        falls on both halves of a pair alike. Both halves of a pair compose the same query for
        the same session (the turn index differs, so each records its own turn): the queries
        cost 1.4 to 2.3 ms each, so halves with different queries would compare the queries."""
        sync_s: list[float] = []
        async_s: list[float] = []
        sync_cpu: list[float] = []  # the process's CPU time (every thread): what load cannot inflate
        async_cpu: list[float] = []

        def one_sync(kw: dict[str, Any]) -> None:
            cpu, started = time.process_time(), time.perf_counter()
            compose_projected_context(**kw)
            sync_s.append(time.perf_counter() - started)
            sync_cpu.append(time.process_time() - cpu)

        async def one_async(kw: dict[str, Any]) -> None:
            cpu, started = time.process_time(), time.perf_counter()
            await acompose_projected_context(**kw)
            async_s.append(time.perf_counter() - started)
            async_cpu.append(time.process_time() - cpu)

        def two() -> tuple[dict[str, Any], dict[str, Any]]:
            n = next(counter)
            return kwargs(record, store, n), {**kwargs(record, store, n), "turn_index": next(counter)}

        for _ in range(block):  # warm-up of both paths (caches, the executor's threads)
            first, second = two()
            one_sync(first)
            await one_async(second)
        for samples in (sync_s, async_s, sync_cpu, async_cpu):
            samples.clear()
        for n in range(rounds * block):
            first, second = two()
            if n % 2:
                await one_async(first)
                one_sync(second)
            else:
                one_sync(first)
                await one_async(second)
        ratios = [a / s for a, s in zip(async_s, sync_s, strict=True)]
        cpu_ratio = statistics.median(async_cpu) / statistics.median(sync_cpu)
        return per_turn(sync_s), per_turn(async_s), statistics.median(ratios), cpu_ratio

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        user_sync, user_async, user_ratio, user_cpu = await pair(True, backend)
        bare_sync, bare_async, bare_ratio, _ = await pair(False, None)
    backend.close()
    return {
        "user_path_sync_ms": user_sync,
        "user_path_async_ms": user_async,
        "user_path_ratio": user_ratio,
        "user_path_cpu_ratio": user_cpu,
        "load_average": os.getloadavg()[0],
        "no_io_sync_ms": bare_sync,
        "no_io_async_ms": bare_async,
        "no_io_ratio": bare_ratio,
    }


async def store_hop(rounds: int, block: int, tmp: Path) -> dict[str, Any]:
    """The embedded store's ``asearch`` (one worker-thread hop over a pooled reader) against its
    ``search``, per call, in alternating pairs; and the six queries gathered against the same
    awaited one after another (apsw releases the GIL while SQLite works, so threads overlap)."""
    config = structure({"context": {"project": "web"}})
    backend = seeded_backend(tmp, config)
    store = backend.memories
    scopes = ["", "project:web"]
    sync_s: list[float] = []
    async_s: list[float] = []
    for n in range(block + rounds * block):
        query = QUERIES[n % len(QUERIES)]
        first_sync = n % 2 == 0
        for kind in ("sync", "async") if first_sync else ("async", "sync"):
            started = time.perf_counter()
            if kind == "sync":
                store.search(query, 8, namespaces=scopes)
                (sync_s if n >= block else []).append(time.perf_counter() - started)
            else:
                await store.asearch(query, 8, namespaces=scopes)
                (async_s if n >= block else []).append(time.perf_counter() - started)

    async def gathered_six() -> None:
        await asyncio.gather(*(store.asearch(q, 8, namespaces=scopes) for q in QUERIES))

    async def six_in_turn() -> None:
        for q in QUERIES:
            await store.asearch(q, 8, namespaces=scopes)

    gathered = await median_of(rounds, gathered_six)
    in_turn = await median_of(rounds, six_in_turn)
    backend.close()
    return {
        "search_ms": per_turn(sync_s),
        "asearch_ms": per_turn(async_s),
        "asearch_ratio": per_turn(async_s) / per_turn(sync_s),
        "asearch_6_gathered_ms": gathered,
        "asearch_6_in_turn_ms": in_turn,
    }


# --- 2. concurrency -----------------------------------------------------------------------------

SEARCH_S = 0.020
EMBED_S = 0.015


class SlowEmbedder:
    name = "remote"
    dimensions = 3

    def embed(self, texts: Any) -> list[list[float]]:
        time.sleep(EMBED_S)
        return [[1.0, 0.0, 0.0] for _ in texts]

    async def aembed(self, texts: Any) -> list[list[float]]:
        await asyncio.sleep(EMBED_S)
        return [[1.0, 0.0, 0.0] for _ in texts]


class SlowStore:
    """The kit's in-memory store behind a remote-like search: embed (15 ms), then 20 ms."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.embedder = SlowEmbedder()
        self.backend: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[SlowStore]:
        with self.inner.consistent_read() as view:
            yield SlowStore(view)

    def search(self, query: str, k: int = 10, **options: Any) -> Any:
        self.embedder.embed([query])
        time.sleep(SEARCH_S)
        return self.inner.search(query, k, **options)

    async def asearch(self, query: str, k: int = 10, **options: Any) -> Any:
        await self.embedder.aembed([query])
        await asyncio.sleep(SEARCH_S)
        return self.inner.search(query, k, **options)


class FakeModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "bench"

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return self._generate(messages)


class BlockingMiddleware(ContextPlaneMiddleware):
    """The middleware as it was before the async path: async hooks, synchronous work."""

    async def abefore_agent(self, state: Any, runtime: Any) -> Any:
        return self.before_agent(state, runtime)

    async def abefore_model(self, state: Any, runtime: Any) -> Any:
        return self.before_model(state, runtime)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(self._prepare(request))


def slow_store(turns: int) -> SlowStore:
    inner = InMemoryKnowledgeStore()
    for i in range(turns):
        inner.add_chunk(f"note {i} about topic{i}", "general", "operator", namespace=f"session:t{i}")
    inner.add_chunk("Deploy window: Tuesday 14:00 UTC.", "hot", "operator")
    return SlowStore(inner)


async def timed(make: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await make()
    return time.perf_counter() - started


async def median_of(repeats: int, make: Callable[[], Awaitable[Any]]) -> float:
    return statistics.median([await timed(make) for _ in range(repeats)]) * 1e3


async def concurrency(turns: int, repeats: int) -> dict[str, Any]:
    config = structure({"context": {"context_window": 200_000}})
    host = plugin_host_with(SECTIONS, config)
    store = slow_store(turns)
    backend = InMemoryBackend(store)
    run = iter(range(10**9))

    def compose_turn(i: int, tag: int) -> Awaitable[Any]:
        return acompose_projected_context(
            f"topic{i} question", backend, SKILLS, STATE, session_id=f"t{i}", turn_index=tag, host=host
        )

    async def sequential() -> None:
        tag = next(run)
        for i in range(turns):
            await compose_turn(i, tag)

    async def gathered() -> None:
        tag = next(run)
        await asyncio.gather(*(compose_turn(i, tag) for i in range(turns)))

    await gathered()  # warm-up
    compose_single = await median_of(repeats * 3, lambda: compose_turn(0, next(run)))
    compose_seq = await median_of(repeats, sequential)
    compose_conc = await median_of(repeats, gathered)

    def agent(middleware: Any | None) -> Any:
        return create_agent(
            FakeModel(), tools=[], middleware=[middleware] if middleware else [], checkpointer=InMemorySaver()
        )

    kw: dict[str, Any] = {"host": host, "backend": backend, "skills_index": SKILLS}
    graphs = {
        "async": agent(ContextPlaneMiddleware(**kw)),
        "blocking": agent(BlockingMiddleware(**kw)),
        "bare": agent(None),
    }

    def graph_turns(name: str) -> Callable[[], Awaitable[Any]]:
        graph = graphs[name]

        async def go() -> None:
            tag = next(run)
            await asyncio.gather(
                *(
                    graph.ainvoke(
                        {"messages": [HumanMessage(f"topic{i} question")]},
                        {"configurable": {"thread_id": f"{name}-{tag}-{i}"}},
                    )
                    for i in range(turns)
                )
            )

        return go

    def graph_single(name: str) -> Callable[[], Awaitable[Any]]:
        graph = graphs[name]

        async def go() -> None:
            tag = next(run)
            await graph.ainvoke(
                {"messages": [HumanMessage("topic0 question")]}, {"configurable": {"thread_id": f"one-{tag}"}}
            )

        return go

    for name in graphs:
        await graph_turns(name)()  # warm-up
    single = await median_of(repeats * 3, graph_single("async"))
    # Round-robin, so load on the machine falls on every variant alike.
    samples: dict[str, list[float]] = {name: [] for name in graphs}
    for _ in range(repeats):
        for name in graphs:
            samples[name].append(await timed(graph_turns(name)))
    conc = {name: statistics.median(v) * 1e3 for name, v in samples.items()}
    return {
        "turns": turns,
        "compose_single_ms": compose_single,
        "compose_sequential_ms": compose_seq,
        "compose_concurrent_ms": compose_conc,
        "compose_speedup": compose_seq / compose_conc,
        "compose_concurrent_per_single": compose_conc / compose_single,
        "graph_single_ms": single,
        "graph_concurrent_ms": conc["async"],
        "graph_concurrent_per_single": conc["async"] / single,
        "graph_blocking_concurrent_ms": conc["blocking"],
        "graph_speedup_over_blocking": conc["blocking"] / conc["async"],
        "bare_graph_concurrent_ms": conc["bare"],
        "waits_per_turn_ms": (SEARCH_S + EMBED_S) * 1e3,
    }


class StallMeter:
    """How long the event loop was held: by its longest piece of work (one callback or task step)
    and in all (the sum), timing each ``Handle._run`` while the meter is on. Both include the
    loop thread's waits for the GIL while worker threads run Python code; the sum is where a
    blocking call shows (a wait inside a callback holds the loop for all of it)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.held = 0.0
        self._original: Any = None

    def __enter__(self) -> StallMeter:
        original = self._original = asyncio.events.Handle._run
        meter = self

        def timed(handle: asyncio.events.Handle) -> None:
            started = time.perf_counter()
            try:
                original(handle)
            finally:
                took = time.perf_counter() - started
                meter.worst = max(meter.worst, took)
                meter.held += took

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]


class LocalModelEmbedder:
    """A synchronous embedder that holds its caller for 15 ms outside the GIL, as a local
    sentence model's native code does (or a blocking HTTP client): no ``aembed``. Vectors are
    hashed bags of words, so the vector leg still ranks."""

    name = "local-model"
    dimensions = 32

    def embed(self, texts: Any) -> list[list[float]]:
        time.sleep(EMBED_S)
        out = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in text.lower().split():
                vector[hash(word) % self.dimensions] += 1.0
            norm = sum(x * x for x in vector) ** 0.5 or 1.0
            out.append([x / norm for x in vector])
        return out


async def local_store(turns: int, repeats: int, tmp: Path) -> dict[str, Any]:
    """The same concurrent ``ainvoke`` turns on the embedded SQLite backend itself, hybrid search
    with a local model's 15 ms query embedding (``LocalModelEmbedder``), the records written to
    the file: wall time, and the loop's longest stall, with the async middleware and with the
    blocking one."""
    config = structure({"context": {"context_window": 200_000, "project": "web"}})
    host = plugin_host_with(SECTIONS, config)
    backend = seeded_backend(tmp, config, embedder=LocalModelEmbedder())
    run = iter(range(10**9))
    kw: dict[str, Any] = {"host": host, "backend": backend, "skills_index": SKILLS}
    graphs = {
        "async": create_agent(FakeModel(), tools=[], middleware=[ContextPlaneMiddleware(**kw)], checkpointer=InMemorySaver()),
        "blocking": create_agent(FakeModel(), tools=[], middleware=[BlockingMiddleware(**kw)], checkpointer=InMemorySaver()),
    }

    async def go(name: str) -> tuple[float, float, float]:
        tag = next(run)
        with StallMeter() as meter:
            started = time.perf_counter()
            await asyncio.gather(
                *(
                    graphs[name].ainvoke(
                        {"messages": [HumanMessage(QUERIES[i % len(QUERIES)])]},
                        {"configurable": {"thread_id": f"s-{tag}-{i}"}},
                    )
                    for i in range(turns)
                )
            )
            wall = time.perf_counter() - started
        return wall, meter.worst, meter.held

    for name in graphs:
        await go(name)  # warm-up
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in graphs}
    for _ in range(repeats):
        for name in graphs:
            samples[name].append(await go(name))
    backend.close()
    out: dict[str, Any] = {}
    for name, runs in samples.items():
        out[f"local_{name}_ms"] = statistics.median(r[0] for r in runs) * 1e3
        out[f"local_{name}_stall_ms"] = statistics.median(r[1] for r in runs) * 1e3
        out[f"local_{name}_held_ms"] = statistics.median(r[2] for r in runs) * 1e3
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        first = await overhead(args.rounds, args.block, Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        hop = await store_hop(args.rounds, args.block, Path(tmp))
    second = await concurrency(args.turns, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        local = await local_store(args.turns, args.repeats, Path(tmp))
    return {**first, **hop, **second, **local}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=15, help="overhead: rounds of --block pairs")
    parser.add_argument("--block", type=int, default=40, help="overhead: pairs per round (and warm-up)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each concurrent measurement")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and repeats")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.block, args.repeats = 5, 20, 3
    r = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"python {platform.python_version()}, {platform.machine()}")
    print("1. one turn at a time: the standard sections, embedded SQLite backend, record=True")
    print(
        f"   compose_projected_context {r['user_path_sync_ms']:.3f} ms, acompose_projected_context "
        f"{r['user_path_async_ms']:.3f} ms: {r['user_path_ratio']:.2f}x (target <= 1.2x: "
        f"{'met' if r['user_path_ratio'] <= 1.2 else 'MISSED'}; load average {r['load_average']:.1f})"
    )
    print(
        f"   the same turns in CPU time (every thread of the process; what load cannot inflate): "
        f"{r['user_path_cpu_ratio']:.2f}x (reported)"
    )
    print(
        f"   no store, nothing recorded (the fixed cost): {r['no_io_sync_ms']:.3f} ms vs "
        f"{r['no_io_async_ms']:.3f} ms: {r['no_io_ratio']:.2f}x (reported)"
    )
    print(
        f"   the embedded store: search {r['search_ms']:.3f} ms, asearch {r['asearch_ms']:.3f} ms "
        f"({r['asearch_ratio']:.2f}x: one worker-thread hop); 6 queries gathered "
        f"{r['asearch_6_gathered_ms']:.2f} ms vs awaited in turn {r['asearch_6_in_turn_ms']:.2f} ms"
    )
    n = r["turns"]
    print(f"2. {n} turns, search 20 ms + embedding 15 ms per turn (native async)")
    print(
        f"   acompose: one turn {r['compose_single_ms']:.1f} ms; {n} sequential {r['compose_sequential_ms']:.0f} ms; "
        f"{n} concurrent {r['compose_concurrent_ms']:.1f} ms: {r['compose_speedup']:.1f}x the throughput, "
        f"{r['compose_concurrent_per_single']:.2f}x one turn's time"
    )
    print(
        f"   create_agent ainvoke: one turn {r['graph_single_ms']:.1f} ms; {n} concurrent "
        f"{r['graph_concurrent_ms']:.0f} ms ({r['graph_concurrent_per_single']:.1f}x one turn); with the "
        f"blocking middleware {r['graph_blocking_concurrent_ms']:.0f} ms ({r['graph_speedup_over_blocking']:.1f}x "
        f"slower); the bare graph alone {r['bare_graph_concurrent_ms']:.0f} ms for {n} turns"
    )
    print(f"3. {n} concurrent ainvoke turns on the embedded SQLite backend, hybrid search, a 15 ms local-model embedder")
    for name in ("async", "blocking"):
        print(
            f"   {name} middleware: {r[f'local_{name}_ms']:.0f} ms; the loop held {r[f'local_{name}_held_ms']:.0f} ms "
            f"in all, {r[f'local_{name}_stall_ms']:.1f} ms at most at once"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
