"""OpenAI Agents SDK adapter benchmark: its overhead per turn, and what the SDK stores.

    python bench/openai_agents_bench.py            # 20-turn session, 200 turns per variant
    python bench/openai_agents_bench.py --quick    # 60 turns per variant

Overhead. Per-turn time (``Runner.run``, one model call per turn, the SDK's own
``ScriptedModel``, tracing off) of a bare agent, the same agent with a no-op
``call_model_input_filter`` (what the SDK charges for the seam), and with contextplane's filter
composing ~3k tokens of marker rows per turn and recording into an embedded SQLite backend
(injection row, trajectory entry, turn inputs per turn, snapshot per call), and the same
composition and delivery called directly on the runtime, beside a filter that appends a
projection-sized item it did not compose (the SDK's and the fake model's cost of carrying it) with no SDK around them; all run
round-robin in one process, one event loop, and are reported as ratios to the bare turn.

Session. A 20-turn session through the SDK's ``SQLiteSession``: the bytes of projected
context found in the session's file and in ``to_input_list()`` (must be 0), and the
projection's chars per request against its budget.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, SQLiteSession, set_tracing_disabled
from agents.run_config import ModelInputData
from agents.testing import ScriptedModel, assistant_message

from contextplane import ContextSection, Envelope, Row, Shed, hookimpl, open_runtime, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane_openai_agents import ITEMS, run_config

MARK = "BENCHMARK-ROW"
BUDGET_TOKENS = 3_000
#: Issue 24's target: the adapter's turn at most this many times the SDK's bare turn (fake model).
TARGET = 1.3
#: A real provider's model call, for what the overhead comes to beside one.
PROVIDER_MS = 300


class Rows:
    plugin_name = "bench_rows"

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        def draft(req: Any) -> list[Row]:
            return [Row(f"r{n}", n, f"{MARK} {n} for {req.query}: " + "x" * 200) for n in range(80)]

        register(ContextSection("rows", 10, Shed.DROP_ROWS, draft, Envelope("working_state")))


def noop(data: Any) -> ModelInputData:
    return ModelInputData(input=list(data.model_data.input), instructions=data.model_data.instructions)


STATIC = {"role": "user", "content": "y" * (BUDGET_TOKENS * 4)}


def static(data: Any) -> ModelInputData:
    """A filter that appends a projection-sized item it did not compose (what the SDK and the
    model charge for carrying one)."""
    return ModelInputData(input=[*data.model_data.input, STATIC], instructions=data.model_data.instructions)


def model(n: int) -> ScriptedModel:
    return ScriptedModel([[assistant_message(f"r{i}")] for i in range(n)])


async def overhead(turns: int, directory: Path) -> dict[str, float]:
    host = plugin_host_with([Rows()], structure({"context": {"context_window": 200_000}}))
    backend = SQLiteBackend(directory / "bench.sqlite3", config=host.config)
    times: dict[str, list[float]] = {
        "bare": [],
        "noop filter": [],
        "static item": [],
        "contextplane": [],
        "direct": [],
    }
    with open_runtime(host=host, backend=backend) as runtime:
        agents = {name: Agent(name="a", model=model(turns + 5)) for name in times if name != "direct"}
        configs: dict[str, Callable[[int], RunConfig]] = {
            "bare": lambda _n: RunConfig(),
            "noop filter": lambda _n: RunConfig(call_model_input_filter=noop),
            "static item": lambda _n: RunConfig(call_model_input_filter=static),
            "contextplane": lambda n: run_config(runtime, session_id=f"s{n}", budget_tokens=BUDGET_TOKENS),
        }
        for name in agents:  # warm up
            await Runner.run(agents[name], "warm", run_config=configs[name](-1))
        for n in range(turns):
            for name in agents:
                start = time.perf_counter()
                await Runner.run(agents[name], f"q{n}", run_config=configs[name](n))
                times[name].append(time.perf_counter() - start)
            # The same composition and delivery called directly, with no SDK around them.
            start = time.perf_counter()
            request = runtime.request(f"q{n}", session_id=f"d{n}", budget_tokens=BUDGET_TOKENS)
            turn = await runtime.acompose(request)
            await runtime.adeliver(turn, [{"role": "user", "content": f"q{n}"}], ITEMS, call_index=0)
            times["direct"].append(time.perf_counter() - start)
    backend.close()
    medians = {name: statistics.median(t) for name, t in times.items()}
    return medians


async def session(directory: Path) -> tuple[int, int, list[int]]:
    host = plugin_host_with([Rows()], structure({"context": {"context_window": 200_000}}))
    backend = SQLiteBackend(directory / "session.sqlite3", config=host.config)
    m = model(20)
    agent = Agent(name="a", model=m)
    history = SQLiteSession("s", directory / "sdk.sqlite3")
    with open_runtime(host=host, backend=backend) as runtime:
        for n in range(20):
            result = await Runner.run(
                agent,
                f"q{n}",
                session=history,
                run_config=run_config(runtime, session=history, budget_tokens=BUDGET_TOKENS),
            )
    backend.close()
    in_file = (directory / "sdk.sqlite3").read_bytes().count(MARK.encode())
    in_result = repr(result.to_input_list()).count(MARK)
    sizes = [len(call.input[-1]["content"]) for call in m.calls]
    return in_file, in_result, sizes


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    set_tracing_disabled(True)
    turns = 60 if args.quick else 200
    with tempfile.TemporaryDirectory() as tmp:
        medians = asyncio.run(overhead(turns, Path(tmp)))
        in_file, in_result, sizes = asyncio.run(session(Path(tmp)))
    bare = medians["bare"]
    print(f"per-turn median over {turns} turns (Runner.run, ScriptedModel, one call per turn):")
    for name, value in medians.items():
        print(f"  {name:13s} {value * 1000:7.2f} ms  {value / bare:5.2f}x bare")
    adapter = medians["contextplane"] - medians["static item"]
    direct = medians["direct"]
    # The adapter's turn against the same turn built by hand: the SDK carrying a same-size
    # item plus the composition and delivery called directly (1.00x: the filter adds nothing).
    by_hand = medians["static item"] + direct
    ratio = medians["contextplane"] / bare
    print(
        f"  contextplane adds {adapter * 1000:.2f} ms per turn to a turn carrying a same-size item; "
        f"composing and delivering directly takes {direct * 1000:.2f} ms ({adapter / direct:.2f}x of it)"
    )
    print(
        f"  contextplane turn vs the bare turn: {ratio:.2f}x (target <= {TARGET}x: "
        f"{'met' if ratio <= TARGET else 'missed'}); vs the same item and a direct composition: "
        f"{medians['contextplane'] / by_hand:.2f}x"
    )
    real = PROVIDER_MS / 1000
    print(
        f"  with a {PROVIDER_MS} ms provider call: {(medians['contextplane'] + real) / (bare + real):.3f}x "
        f"the bare turn ({(medians['contextplane'] + real) * 1000:.1f} vs {(bare + real) * 1000:.1f} ms)"
    )
    print("20-turn SQLiteSession:")
    print(f"  projected rows in the SDK's session file: {in_file}; in to_input_list(): {in_result}")
    print(f"  projection chars per request: max {max(sizes)} (budget {BUDGET_TOKENS * 4} chars)")
    ok = in_file == 0 and in_result == 0 and max(sizes) <= BUDGET_TOKENS * 4
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
