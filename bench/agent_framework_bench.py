"""The Agent Framework adapter's overhead per turn (issue 24's target: <= 1.3x the bare turn).

    python bench/agent_framework_bench.py [--turns 300] [--quick]

One real ``agent_framework.Agent`` per variant, each over the same fake chat client (the
framework's function-invocation and chat-middleware layers over ``BaseChatClient``, answering
at once: a fake model, so the ratios are the worst case; a real provider's 300 ms-3 s per call
dwarfs them), an ``InMemoryHistoryProvider``, one model call per turn, 10 turns per session:

* ``bare``: no context provider;
* ``no-op provider``: a ``ContextProvider`` that adds a no-op chat middleware per run (what
  the framework itself charges for a provider and a per-call middleware);
* ``static message``: a provider adding one fixed context message of the projection's size and
  a no-op chat middleware (what the framework charges for carrying a context message);
* ``provider``: ``ContextPlaneProvider`` over a runtime with no backend (composition and
  delivery, nothing recorded; it logs that once);
* ``provider+records``: the same over the embedded SQLite backend (injection row and trajectory
  entry per turn, snapshot per call).

* ``direct``: composing directly (``Runtime.acompose`` + ``Runtime.adeliver`` with plain
  messages, no framework) on the same sections and an embedded backend of its own.

Measured round-robin in the same run (the order rotating, so machine load falls on every variant
alike), medians of the per-turn wall and CPU times; ratios against ``bare``, and of
``provider+records`` against ``bare`` + ``direct`` (a hand-wired integration: the adapter's own
share is what is left beyond contextplane's work).
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
#: A real provider's model call, for what the ratio becomes off the fake model.
REAL_CALL_MS = 300.0


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


class StaticMessageProvider(ContextProvider):
    """A fixed context message of the projection's size plus a no-op middleware: what the
    framework charges for carrying one context message through a run (its copy, attribution
    and the history provider's identity checks), with no contextplane work at all."""

    def __init__(self, source_id: str, text: str) -> None:
        super().__init__(source_id)
        self.message = Message(role="user", contents=[text])

    async def before_run(self, *, agent: Any, session: Any, context: Any, state: Any) -> None:
        context.extend_messages(self.source_id, [self.message])
        context.extend_middleware(self.source_id, NoopMiddleware())


def agent(*providers: ContextProvider) -> Agent:
    return Agent(FastClient(), context_providers=[InMemoryHistoryProvider(), *providers])


def projection_text(host: Any, config: Any) -> str:
    """One turn's projection text on the bench's sections (the static message's content)."""
    runtime = Runtime(host=host, config=config)
    return runtime.compose(runtime.request("question 0", session_id="size", turn_index=0)).text


class AgentTurns:
    """One variant's turns: ``agent.run`` in a session of 10 turns."""

    def __init__(self, name: str, agent: Agent) -> None:
        self.name, self.agent, self.session = name, agent, None

    async def __call__(self, i: int) -> None:
        if i % 10 == 0:
            self.session = self.agent.create_session(session_id=f"{self.name}-{i // 10}")
        await self.agent.run(f"question {i}", session=self.session)


class DirectTurns:
    """contextplane's own work per turn without the framework: compose, deliver one call, with
    plain messages (what a hand-wired integration does around the bare framework turn)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.history: list[dict[str, Any]] = []

    async def __call__(self, i: int) -> None:
        if i % 10 == 0:
            self.history = []
        self.history.append({"role": "user", "content": f"question {i}"})
        runtime = self.runtime
        turn = await runtime.acompose(runtime.request(f"question {i}", session_id=f"d-{i // 10}", turn_index=i % 10))
        await runtime.adeliver(turn, self.history, PLAIN, call_index=0)
        self.history.append({"role": "assistant", "content": "ok"})


async def measure(turns: int, tmp: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall and CPU ms per turn of every variant, interleaved in one run."""
    config = structure({"context": {"context_window": WINDOW_TOKENS}})
    host = plugin_host_with([Sections()], config)
    records = SQLiteBackend(tmp / "records.sqlite3", config=config)
    direct_records = SQLiteBackend(tmp / "direct.sqlite3", config=config)
    variants: dict[str, Callable[[int], Any]] = {
        "bare": AgentTurns("bare", agent()),
        "no-op provider": AgentTurns("noop", agent(NoopProvider("noop"))),
        "static message": AgentTurns("static", agent(StaticMessageProvider("static", projection_text(host, config)))),
        "provider": AgentTurns("provider", agent(ContextPlaneProvider(Runtime(host=host, config=config)))),
        "provider+records": AgentTurns(
            "records", agent(ContextPlaneProvider(open_runtime(config, backend=records, host=host)))
        ),
        "direct": DirectTurns(open_runtime(config, backend=direct_records, host=host)),
    }
    samples: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    warm = 30
    for i in range(turns + warm):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            t0, c0 = time.perf_counter(), time.process_time()
            await variants[name](i)
            if i >= warm:
                samples[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    records.close()
    direct_records.close()
    return (
        {k: statistics.median(v) * 1e3 for k, v in samples.items()},
        {k: statistics.median(v) * 1e3 for k, v in cpu.items()},
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="100 turns per variant")
    args = parser.parse_args(argv)
    turns = 100 if args.quick else args.turns
    warnings.simplefilter("ignore")
    logging.getLogger("contextplane").setLevel(logging.ERROR)  # "records nothing", once: measured
    with tempfile.TemporaryDirectory() as tmp:
        med, cpu = asyncio.run(measure(turns, Path(tmp)))
    direct, direct_cpu = med.pop("direct"), cpu.pop("direct")
    print(f"Agent Framework turn (1 model call, fake client), median of {turns} interleaved turns:")
    for name, ms in med.items():
        print(
            f"  {name:<18} {ms:7.3f} ms wall  x{ms / med['bare']:.2f} of bare   "
            f"{cpu[name]:7.3f} ms CPU  x{cpu[name] / cpu['bare']:.2f}"
        )
    added, added_cpu = med["provider+records"] - med["bare"], cpu["provider+records"] - cpu["bare"]
    print(f"  composing directly (acompose + adeliver, records on): {direct:.3f} ms wall, {direct_cpu:.3f} ms CPU")
    # Against composing directly: the adapter's turn over what a hand-wired integration costs
    # (the bare framework turn plus contextplane's own work, no adapter); 1.00 = the adapter adds nothing.
    by_hand, by_hand_cpu = med["bare"] + direct, cpu["bare"] + direct_cpu
    print(
        f"  provider+records vs bare + composing directly: x{med['provider+records'] / by_hand:.2f} wall, "
        f"x{cpu['provider+records'] / by_hand_cpu:.2f} CPU (the adapter's own share: "
        f"{added - direct:+.3f} ms wall, {added_cpu - direct_cpu:+.3f} ms CPU per turn)"
    )
    carry, carry_cpu = med["static message"] - med["bare"], cpu["static message"] - cpu["bare"]
    print(
        f"    of which the framework carrying one context message (static message - bare): "
        f"{carry:+.3f} ms wall, {carry_cpu:+.3f} ms CPU"
    )
    ratio = med["provider+records"] / med["bare"]
    print(f"  target <= 1.3x of bare (fake model): {'met' if ratio <= 1.3 else 'missed'} (x{ratio:.2f})")
    real = REAL_CALL_MS
    print(
        f"  with a real provider's {real:.0f} ms model call: x{(med['provider+records'] + real) / (med['bare'] + real):.3f} "
        f"of the bare turn ({added:.3f} ms added to {med['bare'] + real:.1f} ms)"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"  load average {load:.1f}, python {sys.version.split()[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
