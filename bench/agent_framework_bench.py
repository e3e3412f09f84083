"""The Agent Framework adapter's overhead per turn (issue 24's target: <= 1.3x the bare turn).

    python bench/agent_framework_bench.py [--turns 300] [--quick]

One real ``agent_framework.Agent`` per variant, each over the same fake chat client (the
framework's function-invocation and chat-middleware layers over ``BaseChatClient``, answering
at once: a fake model, so the ratios are the worst case; a real provider's 300 ms-3 s per call
dwarfs them), an ``InMemoryHistoryProvider``, one model call per turn, 10 turns per session:

* ``bare``: no context provider;
* ``no-op provider``: a ``ContextProvider`` that adds a no-op chat middleware per run (what
  the framework itself charges for a provider and a per-call middleware);
* ``provider``: ``ContextPlaneProvider`` over a runtime with no backend (composition and
  delivery, nothing recorded; it logs that once);
* ``provider+records``: the same over the embedded SQLite backend (injection row and trajectory
  entry per turn, snapshot per call).

Measured round-robin in the same run (the order rotating, so machine load falls on every variant
alike), medians of the per-turn wall times, ratios against ``bare``; then composing directly
(``Runtime.acompose`` + ``Runtime.adeliver`` with plain messages, no framework) against the
same runtime, so the adapter's own share shows: ``provider+records`` minus ``bare`` minus
``direct`` is what the adapter adds beyond contextplane's own work.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatMiddleware,
    ChatMiddlewareLayer,
    ChatResponse,
    ContextProvider,
    FunctionInvocationLayer,
    InMemoryHistoryProvider,
    Message,
)

from contextplane import ContextSection, Envelope, Row, Shed, hookimpl, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane.delivery import PLAIN
from contextplane.runtime import Runtime, open_runtime
from contextplane_agent_framework import ContextPlaneProvider

WINDOW_TOKENS = 200_000


class Sections:
    """The standard sections' shapes, ~2.5k tokens a turn (as bench/runtime_bench.py)."""

    plugin_name = "af_bench_sections"

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        def rows(prefix: str, n: int, width: int) -> Callable[[Any], list[Row]]:
            fixed = [Row(f"{prefix}{i}", i, f"{prefix}{i} " + "lorem ipsum dolor " * (width // 18)) for i in range(1, n + 1)]
            return lambda _req: fixed

        mem = Envelope("injected_memory", untrusted=True)
        register(ContextSection("working_state", 10, Shed.NEVER, rows("w", 4, 300), Envelope("working_state")))
        register(ContextSection("always_on", 20, Shed.NEVER, rows("a", 6, 250), mem, carries_memory=True))
        register(ContextSection("skills", 30, Shed.DEGRADE, rows("s", 12, 150), Envelope("available_skills")))
        register(ContextSection("retrieved", 50, Shed.DROP_ROWS, rows("r", 8, 600), mem, carries_memory=True))


class FastClient(FunctionInvocationLayer[Any], ChatMiddlewareLayer[Any], BaseChatClient[Any]):
    async def _reply(self) -> ChatResponse:
        return ChatResponse(messages=[Message(role="assistant", contents=["ok"])])

    def _inner_get_response(self, *, messages: Sequence[Message], stream: bool, options: Any, **kwargs: Any) -> Any:
        return self._reply()


class NoopMiddleware(ChatMiddleware):
    async def process(self, context: Any, call_next: Any) -> None:
        await call_next()


class NoopProvider(ContextProvider):
    async def before_run(self, *, agent: Any, session: Any, context: Any, state: Any) -> None:
        context.extend_middleware(self.source_id, NoopMiddleware())


def agent(*providers: ContextProvider) -> Agent:
    return Agent(FastClient(), context_providers=[InMemoryHistoryProvider(), *providers])


async def whole_turns(turns: int, tmp: Path) -> tuple[dict[str, float], dict[str, float]]:
    config = structure({"context": {"context_window": WINDOW_TOKENS}})
    host = plugin_host_with([Sections()], config)
    records = SQLiteBackend(tmp / "records.sqlite3", config=config)
    agents = {
        "bare": agent(),
        "no-op provider": agent(NoopProvider("noop")),
        "provider": agent(ContextPlaneProvider(Runtime(host=host, config=config))),
        "provider+records": agent(ContextPlaneProvider(open_runtime(config, backend=records, host=host))),
    }
    samples: dict[str, list[float]] = {k: [] for k in agents}
    cpu: dict[str, list[float]] = {k: [] for k in agents}
    sessions: dict[str, Any] = {}
    names = list(agents)
    warm = 30
    for i in range(turns + warm):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            if i % 10 == 0:
                sessions[name] = agents[name].create_session(session_id=f"{name}-{i // 10}")
            t0, c0 = time.perf_counter(), time.process_time()
            await agents[name].run(f"question {i}", session=sessions[name])
            if i >= warm:
                samples[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    records.close()
    return (
        {k: statistics.median(v) * 1e3 for k, v in samples.items()},
        {k: statistics.median(v) * 1e3 for k, v in cpu.items()},
    )


async def direct_turns(turns: int, tmp: Path) -> tuple[float, float]:
    """contextplane's own work per turn without the framework: compose, deliver one call."""
    config = structure({"context": {"context_window": WINDOW_TOKENS}})
    host = plugin_host_with([Sections()], config)
    records = SQLiteBackend(tmp / "direct.sqlite3", config=config)
    runtime = open_runtime(config, backend=records, host=host)
    history: list[dict[str, Any]] = []
    samples, cpu = [], []
    for i in range(turns + 30):
        if i % 10 == 0:
            history = []
        history.append({"role": "user", "content": f"question {i}"})
        t0, c0 = time.perf_counter(), time.process_time()
        turn = await runtime.acompose(runtime.request(f"question {i}", session_id=f"d-{i // 10}", turn_index=i % 10))
        await runtime.adeliver(turn, history, PLAIN, call_index=0)
        if i >= 30:
            samples.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        history.append({"role": "assistant", "content": "ok"})
    records.close()
    return statistics.median(samples) * 1e3, statistics.median(cpu) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="100 turns per variant")
    args = parser.parse_args(argv)
    turns = 100 if args.quick else args.turns
    warnings.simplefilter("ignore")
    logging.getLogger("contextplane").setLevel(logging.ERROR)  # "records nothing", once: measured
    with tempfile.TemporaryDirectory() as tmp:
        med, cpu = asyncio.run(whole_turns(turns, Path(tmp)))
        direct, direct_cpu = asyncio.run(direct_turns(turns, Path(tmp)))
    print(f"Agent Framework turn (1 model call, fake client), median of {turns} interleaved turns:")
    for name, ms in med.items():
        print(
            f"  {name:<18} {ms:7.3f} ms wall  x{ms / med['bare']:.2f} of bare   "
            f"{cpu[name]:7.3f} ms CPU  x{cpu[name] / cpu['bare']:.2f}"
        )
    added, added_cpu = med["provider+records"] - med["bare"], cpu["provider+records"] - cpu["bare"]
    print(f"  composing directly (acompose + adeliver, records on): {direct:.3f} ms wall, {direct_cpu:.3f} ms CPU")
    print(
        f"  the adapter adds {added:.3f} ms wall / {added_cpu:.3f} ms CPU per turn; composing directly "
        f"costs {direct:.3f} / {direct_cpu:.3f} of it"
    )
    print(f"  target <= 1.3x of bare: {'met' if med['provider+records'] <= 1.3 * med['bare'] else 'NOT met'}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"  load average {load:.1f}, python {sys.version.split()[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
