"""Runtime benchmark: the ADR's v1 failure against the v2 projection, and the runtime overheads.

    python bench/runtime_bench.py            # full run: 20, 100 and 500 turns
    python bench/runtime_bench.py --quick    # 20 and 100 turns, fewer overhead iterations

Headline (ADR Fault 1). Both runs drive a real ``create_agent`` graph with a fake model for N
turns on one thread, composing the same ~3k-token projection each turn:

* v1, simulated faithfully: ``before_agent`` returns the frame as a ``messages`` state update
  (the ADR's rollback path), so it is checkpointed and re-sent on every later request;
* v2: ``ContextPlaneMiddleware`` delivers it through ``request.override`` only.

It reports the chars (and chars//4 tokens) of derived context the model sees per request at
turns 20/100/500, whether v2 stayed within its budget on every turn, and the bytes of projected
context found in the checkpoint (v2 must be 0). The long runs keep history in the state
passed to ``invoke`` rather than in a checkpointer: an in-memory saver re-serialises v1's
whole message list on every step, which is v1's cost, not the thing measured; checkpoint
bytes are measured on a 20-turn run with ``InMemorySaver`` for both.

Overhead. Per-turn time (one model call per turn) of a bare agent, the same agent with no-op
middleware hooks (what LangGraph charges for the extra before_agent/before_model nodes), with
the middleware recording nothing (no backend), and with the middleware recording into an
embedded SQLite backend (injection row and trajectory entry per turn, snapshot per call),
measured round-robin in the same run and reported as ratios; then the middleware's own work
timed directly (compose per turn, delivery per call, delivery with the records observer per
call), and the cost of one snapshot per model call as an adapter pays it:
``contextplane.delivery.deliver`` with the records observer writing the row, written per call
and batched, against the same ``deliver`` with nothing recorded in the same run. (The
variants without a backend log, once, that they record nothing: that is what they measure.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from contextplane import (
    ContextSection,
    Envelope,
    ProjectionRequest,
    Row,
    Shed,
    Surface,
    compose_projected_context,
    hookimpl,
    plugin_host_with,
)
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.delivery import deliver, plain_projection_message
from contextplane.projection import compose
from contextplane_langgraph import ContextPlaneMiddleware, is_context_frame

WINDOW_TOKENS = 200_000  # budget: 8% of the window = 16,000 tokens = 64,000 chars
MARK = "PROJECTED-CONTEXT"


class FastModel(BaseChatModel):
    """Answers instantly and remembers the derived-context chars of the last request."""

    last_frame_chars: int = 0

    @property
    def _llm_type(self) -> str:
        return "bench"

    def bind_tools(self, tools: Any, **kwargs: Any) -> FastModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.last_frame_chars = sum(len(m.content) for m in messages if is_context_frame(m))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])


def _rows(prefix: str, n: int, width: int) -> list[Row]:
    return [
        Row(f"{prefix}{i}", i, f"{MARK} {prefix}{i} " + "lorem ipsum dolor " * (width // 18))
        for i in range(1, n + 1)
    ]


class Sections:
    """The five standard sections' shapes, sized like the ADR's frames (~3k tokens a turn)."""

    plugin_name = "bench_sections"

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        ws, mem, sk = (
            Envelope("working_state"),
            Envelope("injected_memory", untrusted=True),
            Envelope("available_skills"),
        )

        def fixed(rows: list[Row]) -> Callable[[Any], list[Row]]:
            return lambda _req: rows

        register(ContextSection("working_state", 10, Shed.NEVER, fixed(_rows("w", 4, 300)), ws))
        register(
            ContextSection("always_on", 20, Shed.NEVER, fixed(_rows("a", 6, 250)), mem, carries_memory=True)
        )
        register(ContextSection("skills", 30, Shed.DEGRADE, fixed(_rows("s", 12, 150)), sk))
        register(
            ContextSection(
                "prior_sessions", 40, Shed.DROP_ROWS, fixed(_rows("d", 5, 500)), mem, carries_memory=True,
                goal_suppressed=True, inner_tag="prior_sessions",
            )
        )  # fmt: skip
        register(
            ContextSection(
                "retrieved", 50, Shed.DROP_ROWS, fixed(_rows("r", 8, 600)), mem, carries_memory=True
            )
        )


class V1FrameMiddleware(AgentMiddleware):
    """v1: the projection composed in before_agent and returned as a messages state update."""

    def __init__(self, host: Any) -> None:
        super().__init__()
        self.host = host

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any]:
        query = next(
            m.content for m in reversed(state["messages"]) if m.type == "human" and not is_context_frame(m)
        )
        p = compose_projected_context(query, host=self.host, record=False)
        return {"messages": [HumanMessage(p.text, additional_kwargs={"context_frame": True})]}


class NoopHooks(AgentMiddleware):
    """The same hooks doing nothing: what LangGraph charges for the extra nodes themselves."""

    def before_agent(self, state: Any, runtime: Any) -> None:
        return None

    def before_model(self, state: Any, runtime: Any) -> None:
        return None

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)


def headline(turns: list[int]) -> tuple[list[str], bool]:
    config = structure({"context": {"context_window": WINDOW_TOKENS}})
    host = plugin_host_with([Sections()], config)
    budget = compose_projected_context("q", host=host, record=False).budget_chars
    assert budget is not None
    lines = [
        f"budget: {budget} chars ({budget // 4} tokens) = 8% of a {WINDOW_TOKENS}-token window",
        "",
        "turn  v1 derived chars/request (tokens)   v2 derived chars/request (tokens)   v1/v2",
    ]
    ok = True
    for label, make in (
        ("v1", lambda: V1FrameMiddleware(host)),
        ("v2", lambda: ContextPlaneMiddleware(host=host)),
    ):
        model = FastModel()
        agent = create_agent(model, tools=[], middleware=[make()])
        messages: list[BaseMessage] = []
        per_turn: list[int] = []
        for n in range(max(turns)):
            out = agent.invoke({"messages": [*messages, HumanMessage(f"turn {n}: what next?")]})
            messages = out["messages"]
            per_turn.append(model.last_frame_chars)
        stored = sum(len(m.content) for m in messages if is_context_frame(m))
        globals()[f"_{label}"] = (per_turn, stored)
    v1, v1_stored = globals()["_v1"]
    v2, v2_stored = globals()["_v2"]
    for t in turns:
        a, b = v1[t - 1], v2[t - 1]
        lines.append(
            f"{t:>4}  {a:>12,} ({a // 4:>9,})              {b:>12,} ({b // 4:>7,})              {a / b:>6.1f}x"
        )
    within = all(c <= budget for c in v2)
    ok &= within and v2_stored == 0
    lines += [
        "",
        f"v2 within budget on every one of {len(v2)} turns: {within} (max {max(v2):,} chars)",
        f"projected chars carried in session state after {max(turns)} turns: v1 {v1_stored:,}, v2 {v2_stored}",
    ]
    # Checkpoint bytes: a real InMemorySaver, 20 turns each.
    for label, mw in (("v1", V1FrameMiddleware(host)), ("v2", ContextPlaneMiddleware(host=host))):
        saver = InMemorySaver()
        agent = create_agent(FastModel(), tools=[], middleware=[mw], checkpointer=saver)
        for n in range(20):
            agent.invoke({"messages": [HumanMessage(f"turn {n}")]}, {"configurable": {"thread_id": "t"}})
        blob = repr(saver.storage) + repr(saver.writes) + repr(saver.blobs)
        found = blob.count(MARK)
        state_chars = sum(
            len(m.content)
            for m in agent.get_state({"configurable": {"thread_id": "t"}}).values["messages"]
            if is_context_frame(m)
        )
        lines.append(
            f"InMemorySaver after 20 turns, {label}: {found} occurrences of projected text in saver storage, {state_chars:,} frame chars in get_state()"
        )
        if label == "v2":
            ok &= found == 0 and state_chars == 0
    return lines, ok


def overhead(iterations: int, tmp: Path) -> list[str]:
    config = structure({"context": {"context_window": WINDOW_TOKENS}})
    host = plugin_host_with([Sections()], config)
    records = SQLiteBackend(tmp / "records.sqlite3", config=config)
    snap_mw = ContextPlaneMiddleware(host=host, backend=records)
    agents = {
        "bare": create_agent(FastModel(), tools=[], checkpointer=InMemorySaver()),
        "no-op hooks": create_agent(
            FastModel(), tools=[], middleware=[NoopHooks()], checkpointer=InMemorySaver()
        ),
        "middleware": create_agent(
            FastModel(),
            tools=[],
            middleware=[ContextPlaneMiddleware(host=host)],
            checkpointer=InMemorySaver(),
        ),
        "middleware+records": create_agent(
            FastModel(), tools=[], middleware=[snap_mw], checkpointer=InMemorySaver()
        ),
    }
    samples: dict[str, list[float]] = {k: [] for k in agents}
    names = list(agents)
    for i in range(iterations + 30):
        # Round-robin, one turn each, rotating the order: machine noise hits every variant alike.
        for name in names[i % len(names) :] + names[: i % len(names)]:
            cfg = {"configurable": {"thread_id": f"{name}-{i // 10}"}}  # 10 turns per thread
            t0 = time.perf_counter()
            agents[name].invoke({"messages": [HumanMessage(f"q {i}")]}, cfg)
            if i >= 30:  # warm-up
                samples[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
    lines = [f"whole turn (1 model call), median of {iterations} interleaved turns, ms:"]
    for k in agents:
        lines.append(
            f"  {k:<20} {med[k]:7.3f} ms   x{med[k] / med['bare']:.2f} of bare   x{med[k] / med['no-op hooks']:.2f} of no-op hooks"
        )

    # The middleware's own work, timed directly (the agent-level numbers above include
    # LangGraph's per-node cost for the two extra hook nodes, and machine noise).
    from langchain.agents.middleware.types import ModelRequest

    mw = ContextPlaneMiddleware(host=host)
    history: list[BaseMessage] = []
    for n in range(10):
        history += [HumanMessage(f"q {n}"), AIMessage(f"a {n}")]
    history.append(HumanMessage("q 10"))
    state = {"messages": history}

    def per_call_ms(fn: Callable[[], Any], n: int = 2_000) -> float:
        fn()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n * 1e3

    compose_ms = per_call_ms(lambda: mw.compose(state, None, reason="turn"))
    carrier = mw.compose(state, None, reason="turn")
    request = ModelRequest(
        model=FastModel(), messages=history, state={**state, "contextplane_projection": carrier}
    )
    deliver_ms = per_call_ms(lambda: mw._prepare(request))
    snap_carrier = snap_mw.compose(state, None, reason="turn")
    snap_request = ModelRequest(
        model=FastModel(), messages=history, state={**state, "contextplane_projection": snap_carrier}
    )
    deliver_snap_ms = per_call_ms(lambda: snap_mw._prepare(snap_request))
    lines += [
        "middleware work, timed directly (21-message history, ~12k-char projection):",
        f"  compose (once per turn, before_agent; no backend)   {compose_ms:.4f} ms",
        f"  delivery (per model call, wrap_model_call; no backend) {deliver_ms:.4f} ms",
        f"  delivery + records observer (per call, SQLite)       {deliver_snap_ms:.4f} ms  "
        f"(snapshot share {deliver_snap_ms - deliver_ms:.4f} ms)",
    ]
    records.close()

    # One snapshot per model call as an adapter pays it: deliver() notifying the records
    # observer, which writes the row, against the same deliver() recording nothing.
    from contextplane.authority import build_stable_prefix

    prefix = build_stable_prefix(host)
    calls = [
        m
        for n in range(20)
        for m in ({"role": "user", "content": f"q {n} " + "x" * 220}, {"role": "assistant", "content": "a" * 220})
    ]  # 40 plain messages, ~9,000 chars

    def deliver_loop(projection: Any, n: int) -> float:
        t0 = time.perf_counter()
        for i in range(n):
            deliver(projection, calls, prefix=prefix, call_index=i, wrap=plain_projection_message, host=host)
        return time.perf_counter() - t0

    n = 5_000
    quiet = compose(ProjectionRequest(query="q", config=config, session_id="s", record=False), host=host)
    deliver_loop(quiet, 200)
    base_ms = deliver_loop(quiet, n) / n * 1e3
    lines.append(f"deliver() with nothing recorded (baseline): {base_ms:.4f} ms per model call")
    for batch in (1, 64):
        backend = SQLiteBackend(tmp / f"cap{batch}.sqlite3", config=config, snapshot_batch_size=batch)
        request = ProjectionRequest(
            query="q", config=config, session_id="s", surface=Surface.EXTERNAL, backend=backend
        )
        projection = compose(request, host=host)  # the turn's injection row and trajectory entry
        deliver_loop(projection, 1)  # the session's first call stores the prefix text once
        t0 = time.perf_counter()
        deliver_loop(projection, n)
        backend.flush()
        total = (time.perf_counter() - t0) / n * 1e3
        rows = backend.snapshots.count("s")
        backend.close()
        assert rows == n, f"expected {n} snapshot rows, found {rows}"
        lines.append(
            f"deliver() + snapshot, batch {batch:>2}: {total:.4f} ms per model call, "
            f"snapshot share {total - base_ms:.4f} ms (target <= 0.3 ms synchronous)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    turns = [20, 100] if args.quick else [20, 100, 500]
    t0 = time.perf_counter()
    lines, ok = headline(turns)
    print("== headline: derived context per request, v1 (frames checkpointed) vs v2 (projected)")
    print("\n".join(lines))
    print()
    with tempfile.TemporaryDirectory() as d:
        print("== overhead against a bare agent (same run)")
        print("\n".join(overhead(200 if args.quick else 1000, Path(d))))
    print(f"\n(total {time.perf_counter() - t0:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
