"""The async path end to end: concurrent ``ainvoke`` turns of a real ``create_agent`` graph never
wait on each other's store queries and embeddings, and never see each other's projection.

The store here answers ``search`` after 20 ms and its embedder after 15 ms, as a remote store
and a remote embedding service would; both have native async forms. Blocking, fifty turns
would spend at least 50 x 35 ms waiting; overlapped, about one turn's waiting plus the graph's
own CPU work per turn. Overlap is shown structurally (searches in flight at once), and the wall
time only against a bound the blocking path could not meet.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from mcp import Client

from contextplane import ContextSection, Row, Shed, hookimpl, plugin_host_with
from contextplane.config import structure
from contextplane.testing.memory import (
    InMemoryBackend,
    InMemoryInjectionLog,
    InMemoryKnowledgeStore,
    InMemorySnapshotStore,
)
from contextplane_external import ContextAssembler
from contextplane_external.mcp_server import build_mcp_server
from contextplane_langgraph import ContextPlaneMiddleware, is_context_frame
from contextplane_sections import always_on, prior_sessions, retrieved, skills, working_state

from .conftest import MEMORY, MarkerSections, cfg, make_agent
from .fakes import RecordingChatModel

SEARCH_S = 0.020
EMBED_S = 0.015
TURNS = 50
SECRET = re.compile(r"T(\d+)SECRET")
GOAL = re.compile(r"Goal: answer topic(\d+) question")


class SlowEmbedder:
    """15 ms per call, as a remote embedding service; ``aembed`` waits without blocking."""

    name = "slow-remote"
    dimensions = 3

    def embed(self, texts: Any) -> list[list[float]]:
        time.sleep(EMBED_S)
        return [[1.0, 0.0, 0.0] for _ in texts]

    async def aembed(self, texts: Any) -> list[list[float]]:
        await asyncio.sleep(EMBED_S)
        return [[1.0, 0.0, 0.0] for _ in texts]


class SlowStore:
    """The kit's in-memory store behind a 20 ms search that embeds its query first (35 ms in
    all), counting the searches in flight at once; its views are just as slow."""

    def __init__(self, inner: Any, embedder: SlowEmbedder, counter: list[int] | None = None) -> None:
        self.inner = inner
        self.embedder = embedder
        self.counter = counter if counter is not None else [0, 0]  # [in flight, most at once]
        self.backend: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @contextlib.contextmanager
    def consistent_read(self) -> Iterator[SlowStore]:
        with self.inner.consistent_read() as view:
            yield SlowStore(view, self.embedder, self.counter)

    def search(self, query: str, k: int = 10, **options: Any) -> Any:
        self.embedder.embed([query])
        time.sleep(SEARCH_S)
        return self.inner.search(query, k, **options)

    async def asearch(self, query: str, k: int = 10, **options: Any) -> Any:
        self.counter[0] += 1
        self.counter[1] = max(self.counter)
        try:
            await self.embedder.aembed([query])
            await asyncio.sleep(SEARCH_S)
            return self.inner.search(query, k, **options)
        finally:
            self.counter[0] -= 1


def slow_agent(host: Any, backend: Any) -> tuple[Any, RecordingChatModel]:
    model = RecordingChatModel(policy=lambda _m: AIMessage("ok"))
    middleware = ContextPlaneMiddleware(
        host=host,
        backend=backend,
        skills_index=[("deploy", "Run a production deploy safely.")],
        working_state=lambda state, _rt: {"goal": f"answer {state['messages'][-1].content}"},
    )
    agent = create_agent(model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    return agent, model


def test_fifty_concurrent_ainvoke_turns_overlap_their_waits_and_keep_their_own_projection() -> None:
    inner = InMemoryKnowledgeStore()
    own = {}
    for i in range(TURNS):
        own[i] = inner.add_chunk(f"T{i}SECRET note about topic{i}", "general", "operator", namespace=f"session:t{i}")
    inner.add_chunk("Deploy window: Tuesday 14:00 UTC.", "hot", "operator")
    store = SlowStore(inner, SlowEmbedder())
    backend = InMemoryBackend(store)
    config = structure({"context": {"context_window": 200_000}})
    host = plugin_host_with([working_state, always_on, skills, prior_sessions, retrieved], config)
    agent, model = slow_agent(host, backend)

    def turn(i: int, thread: str) -> Any:
        return agent.ainvoke({"messages": [HumanMessage(f"topic{i} question")]}, cfg(thread))

    async def main() -> tuple[float, float]:
        # Warm up concurrently too: the first concurrent turns pay for imports, first calls
        # and the executor's threads, which is not what the test measures.
        await asyncio.gather(*(turn(i, f"warm-up-{i}") for i in range(10)))
        singles = []
        for n in range(3):
            started = time.perf_counter()
            await turn(1, f"single-{n}")
            singles.append(time.perf_counter() - started)
        single = sorted(singles)[1]
        model._calls.clear()
        store.counter[1] = 0
        started = time.perf_counter()
        await asyncio.gather(*(turn(i, f"t{i}") for i in range(TURNS)))
        return single, time.perf_counter() - started

    single, together = asyncio.run(main())
    ratio = together / single
    print(
        f"\n{TURNS} concurrent turns: {together * 1e3:.0f} ms; one turn: {single * 1e3:.0f} ms; "
        f"ratio {ratio:.1f}; searches in flight at once: {store.counter[1]}"
    )
    # The turns overlapped: many searches were waiting at once (blocking, never more than one).
    assert store.counter[1] >= TURNS // 2, f"at most {store.counter[1]} searches were in flight at once"
    # Blocking, the waits alone would take 50 x 35 ms = 1.75 s. Overlapped, it is one turn's
    # waits plus the graph's CPU work per turn (a ratio of 3-6 to one turn on an idle 2-core
    # machine, more under load: bench/async_bench.py measures it); the bound is the blocking floor.
    assert together < TURNS * (SEARCH_S + EMBED_S), f"{together:.3f}s for {TURNS} turns (ratio {ratio:.1f})"
    # No leaks: each model call saw its own turn's goal and memory, and nobody else's.
    assert len(model.calls) == TURNS
    seen = set()
    for messages in model.calls:
        question = next(m.content for m in messages if m.type == "human" and not is_context_frame(m))
        i = int(re.fullmatch(r"topic(\d+) question", question).group(1))
        (frame,) = [m for m in messages if is_context_frame(m)]
        assert messages[-1] is frame
        assert {int(n) for n in SECRET.findall(frame.content)} == {i}, frame.content
        assert {int(n) for n in GOAL.findall(frame.content)} == {i}
        assert "Deploy window: Tuesday" in frame.content
        seen.add(i)
    assert seen == set(range(TURNS))
    for i in range(TURNS):
        (row,) = backend.injections.rows(f"t{i}")
        assert own[i] in row.delivered["retrieved"]


class Hangs:
    """A section whose provider never returns."""

    plugin_name = "hangs"

    def __init__(self) -> None:
        self.cancelled = 0

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        async def never(_req: Any) -> list[Row]:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            return []

        register(ContextSection("hangs", 30, Shed.DROP_ROWS, never, MEMORY, carries_memory=True))


class Captured:
    plugin_name = "captured"

    def __init__(self) -> None:
        self.projections: list[Any] = []

    @hookimpl
    def observe_projection(self, projection: Any) -> None:
        self.projections.append(projection)


def test_a_provider_that_never_returns_is_cancelled_and_the_ainvoke_turn_completes(tmp_path: Any) -> None:
    hangs, captured = Hangs(), Captured()
    config = structure({"context": {"context_window": 200_000, "provider_timeout_ms": 200}})
    host = plugin_host_with([MarkerSections(), hangs, captured], config)
    agent, model, _saver, _mw = make_agent(host, policy=lambda _m: AIMessage("done"), tools=[])

    async def main() -> tuple[Any, float]:
        started = time.perf_counter()
        result = await agent.ainvoke({"messages": [HumanMessage("h:are you there")]}, cfg("h"))
        return result, time.perf_counter() - started

    result, elapsed = asyncio.run(main())
    assert result["messages"][-1].content == "done"
    assert elapsed < 2
    assert hangs.cancelled == 1
    (projection,) = captured.projections
    assert projection.section("hangs").error == (
        "TimeoutError: no result within the 0.200s limit (context.provider_timeout_ms); cancelled"
    )
    (frame,) = [m for m in model.calls[0] if is_context_frame(m)]
    assert "MARK{h|0|h:are you there}" in frame.content  # the other sections were delivered


def test_ainvoke_composes_on_the_async_path_and_invoke_on_the_sync_one(host: Any, sections: Any) -> None:
    threads: dict[str, int] = {}

    class Where:
        plugin_name = "where"

        @hookimpl
        def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
            def blocking(req: Any) -> list[Row]:
                threads[req.session_id] = threading.get_ident()
                return [Row("w", 1, "where")]

            register(ContextSection("where", 60, Shed.DROP_ROWS, blocking, MEMORY))

    host.register(Where())
    agent, _model, _saver, _mw = make_agent(host, policy=lambda _m: AIMessage("ok"), tools=[])

    async def main() -> int:
        await agent.ainvoke({"messages": [HumanMessage("as:q")]}, cfg("as"))
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    agent.invoke({"messages": [HumanMessage("sy:q")]}, cfg("sy"))
    assert threads["as"] != loop_thread  # a blocking provider never ran on the graph's loop
    assert threads["sy"] == threading.get_ident()  # the sync path drafts in the caller's thread


class Ordered(InMemoryInjectionLog):
    #: Its async forms count as thread hops (as the embedded SQLite parts' are): the records
    #: observer writes its rows in a worker thread.
    threaded_async = True

    def __init__(self, events: list[tuple[str, str, int]]) -> None:
        super().__init__()
        self.events = events

    def record(self, row: Any) -> int:
        self.events.append(("injection", row.session_id, threading.get_ident()))
        return super().record(row)


class OrderedSnapshots(InMemorySnapshotStore):
    threaded_async = True

    def __init__(self, events: list[tuple[str, str, int]]) -> None:
        super().__init__()
        self.events = events

    def put(self, row: Any) -> None:
        self.events.append(("snapshot", row.session_id, threading.get_ident()))
        super().put(row)


def test_records_are_written_off_the_loop_injection_row_before_snapshot(host: Any) -> None:
    events: list[tuple[str, str, int]] = []
    backend = InMemoryBackend(injections=Ordered(events), snapshots=OrderedSnapshots(events))
    agent, _model, _saver, _mw = make_agent(host, backend=backend)  # a tool call: two model calls

    async def main() -> int:
        await asyncio.gather(
            *(agent.ainvoke({"messages": [HumanMessage(f"{t}:q")]}, cfg(t)) for t in ("r1", "r2", "r3"))
        )
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    for t in ("r1", "r2", "r3"):
        kinds = [kind for kind, session, _ in events if session == t]
        assert kinds == ["injection", "snapshot", "snapshot"], kinds
    assert all(thread != loop_thread for *_, thread in events)


class NativeOrdered(InMemoryInjectionLog):
    """Async forms of its own (a backend with an async client): awaited on the loop."""

    def __init__(self, events: list[tuple[str, str, int]]) -> None:
        super().__init__()
        self.events = events

    async def arecord(self, row: Any) -> int:
        self.events.append(("arecord", row.session_id, threading.get_ident()))
        return self.record(row)


class NativeSnapshots(InMemorySnapshotStore):
    def __init__(self, events: list[tuple[str, str, int]]) -> None:
        super().__init__()
        self.events = events

    async def aput(self, row: Any) -> None:
        self.events.append(("aput", row.session_id, threading.get_ident()))
        self.put(row)


def test_a_backend_with_async_record_methods_is_awaited_on_the_loop_in_the_same_order(host: Any) -> None:
    events: list[tuple[str, str, int]] = []
    backend = InMemoryBackend(injections=NativeOrdered(events), snapshots=NativeSnapshots(events))
    agent, _model, _saver, _mw = make_agent(host, backend=backend)

    async def main() -> int:
        await asyncio.gather(
            *(agent.ainvoke({"messages": [HumanMessage(f"{t}:q")]}, cfg(t)) for t in ("n1", "n2", "n3"))
        )
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    for t in ("n1", "n2", "n3"):
        kinds = [kind for kind, session, _ in events if session == t]
        assert kinds == ["arecord", "aput", "aput"], kinds
        assert len(backend.injections.rows(t)) == 1 and backend.snapshots.count(t) == 2
    assert all(thread == loop_thread for *_, thread in events)


class Recalled:
    """A memory section with both forms, over the store's ``search`` / ``asearch``."""

    plugin_name = "recalled"

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        def rows(hits: Any) -> list[Row]:
            return [Row(h.chunk.id, h.rank, h.chunk.content) for h in hits]

        def draft(req: Any) -> list[Row]:
            return rows(req.knowledge_store.search(req.query, 3, namespaces=req.namespaces))

        async def adraft(req: Any) -> list[Row]:
            return rows(await req.knowledge_store.asearch(req.query, 3, namespaces=req.namespaces))

        register(ContextSection("recalled", 50, Shed.DROP_ROWS, draft, MEMORY, carries_memory=True, adraft=adraft))


def test_aassemble_is_assemble_on_the_async_path(tmp_path: Any) -> None:
    config = structure({"context": {"context_window": 200_000}})
    store = InMemoryKnowledgeStore()
    store.add_chunk("The deploy window is Tuesday 14:00 UTC", "general", "operator")
    host = plugin_host_with([MarkerSections(), Recalled()], config)
    sync_backend, async_backend = InMemoryBackend(store), InMemoryBackend(store)
    history = [{"role": "user", "content": "ext:when is the deploy window"}]
    kw: dict[str, Any] = {"session_id": "ext", "turn_index": 0, "history": history}
    sync = ContextAssembler(host=host, backend=sync_backend).assemble("ext:when is the deploy window", **kw)
    other = asyncio.run(
        ContextAssembler(host=host, backend=async_backend).aassemble("ext:when is the deploy window", **kw)
    )
    assert other.projected_context.text == sync.projected_context.text
    assert "deploy window is Tuesday" in sync.projected_context.text
    assert other.sources == sync.sources and list(other.messages) == list(sync.messages)
    assert other.stable_prefix.text == sync.stable_prefix.text
    for backend in (sync_backend, async_backend):
        delivered = {k: list(v) for k, v in sync.projected_context.delivered_ids.items()}
        assert [dict(r.delivered) for r in backend.injections.rows("ext")] == [delivered]
        assert [s.key for s in backend.snapshots.list("ext")] == [("ext", 0, 0)]


class AsyncOnlyStore(InMemoryKnowledgeStore):
    """Native async forms; the sync ones refuse, so a call that took the sync path shows."""

    def search(self, *a: Any, **kw: Any) -> Any:
        raise AssertionError("the MCP server called the blocking search")

    async def asearch(self, query: str, k: int = 10, **options: Any) -> Any:
        return InMemoryKnowledgeStore.search(self, query, k, **options)

    def add_chunk(self, *a: Any, **kw: Any) -> str:
        raise AssertionError("the MCP server called the blocking add_chunk")

    async def aadd_chunk(self, content: str, *args: Any, **attrs: Any) -> str:
        return InMemoryKnowledgeStore.add_chunk(self, content, *args, **attrs)


def test_the_mcp_server_awaits_the_stores_async_methods() -> None:
    store = AsyncOnlyStore()

    async def main() -> tuple[Any, Any]:
        async with Client(build_mcp_server(store)) as client:
            wrote = await client.call_tool("memory_ingest", {"content": "Standup moved to 09:30"})
            found = await client.call_tool("memory_recall", {"query": "standup", "k": 3})
            return wrote, found

    wrote, found = asyncio.run(main())
    assert not wrote.is_error and not found.is_error, (wrote.content, found.content)
    new_id = wrote.structured_content["id"]
    assert [r["id"] for r in found.structured_content["results"]] == [new_id]
