"""PydanticAI adapter benchmark: the capability's overhead per turn.

    python bench/pydantic_ai_bench.py            # 300 turns per variant
    python bench/pydantic_ai_bench.py --quick    # 60 turns per variant

Per-turn time (``agent.run``, one model request per turn, PydanticAI's own ``FunctionModel``
answering at once) of:

- ``bare``: the agent with no capability;
- ``static``: the agent with the same stable prefix as its own instructions and a capability
  that adds a projection-sized request it did not compose (what PydanticAI and the fake model
  charge for carrying both, with no composition);
- ``contextplane``: the agent with ``ContextPlaneCapability`` composing ~3k tokens of rows per
  turn (80 rows offered, shed to the budget) and recording into an embedded SQLite backend in a
  temporary directory (injection row, trajectory entry and turn inputs per turn, a snapshot per
  model request);
- ``direct``: the same composition and delivery called on the runtime (``acompose`` then
  ``adeliver`` with the capability's codec), no agent around them.

All run round-robin in one process and one event loop (a round is one turn of each, in
order), and are reported as medians and as ratios to the bare turn of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext

from contextplane import (
    ContextSection,
    Envelope,
    PromptSection,
    Row,
    Shed,
    hookimpl,
    open_runtime,
    plugin_host_with,
)
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import structure
from contextplane_pydantic_ai import CODEC, ContextPlaneCapability
from contextplane_pydantic_ai.codec import projection_request

MARK = "BENCHMARK-ROW"
BUDGET_TOKENS = 3_000
#: What a real provider's model call takes, for the figure the fake model cannot give.
PROVIDER_MS = 300.0


class Rows:
    plugin_name = "bench_rows"

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        def draft(req: Any) -> list[Row]:
            return [Row(f"r{n}", n, f"{MARK} {n} for {req.query}: " + "x" * 200) for n in range(80)]

        register(ContextSection("rows", 10, Shed.DROP_ROWS, draft, Envelope("working_state")))

    @hookimpl
    def register_prompt_sections(self, register: Callable[[PromptSection], None]) -> None:
        register(
            PromptSection("identity", lambda _ctx: "You are the bench agent. " + "p" * 1000, authority=10)
        )


class StaticRequest(AbstractCapability[Any]):
    """Adds a projection-sized request it did not compose to every model request (a new list,
    as the capability does)."""

    frame = projection_request("y" * (BUDGET_TOKENS * 4))

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        return replace(request_context, messages=[*request_context.messages, self.frame])


def answer(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("answer")])


async def overhead(turns: int, directory: Path) -> dict[str, float]:
    host = plugin_host_with([Rows()], structure({"context": {"context_window": 200_000}}))
    backend = SQLiteBackend(directory / "bench.sqlite3", config=host.config)
    times: dict[str, list[float]] = {"bare": [], "static": [], "contextplane": [], "direct": []}
    with open_runtime(host=host, backend=backend) as runtime:
        capability = ContextPlaneCapability(runtime, budget_tokens=BUDGET_TOKENS)
        prefix = capability.get_instructions()
        assert prefix, "the bench's host renders a stable prefix"
        agents: dict[str, Agent[Any, str]] = {
            "bare": Agent(FunctionModel(answer)),
            "static": Agent(FunctionModel(answer), instructions=prefix, capabilities=[StaticRequest()]),
            "contextplane": Agent(FunctionModel(answer), capabilities=[capability]),
        }
        for agent in agents.values():  # warm up
            await agent.run("warm", deps={"session_id": "warm"})
        for n in range(turns):
            for name, agent in agents.items():
                start = time.perf_counter()
                await agent.run(f"q{n}", deps={"session_id": f"s{n}"})
                times[name].append(time.perf_counter() - start)
            # The same composition and delivery called directly, with no agent around them.
            start = time.perf_counter()
            request = runtime.request(f"q{n}", session_id=f"d{n}", budget_tokens=BUDGET_TOKENS)
            turn = await runtime.acompose(request)
            history = [ModelRequest(parts=[UserPromptPart(f"q{n}")])]
            await runtime.adeliver(turn, history, CODEC, call_index=0, prefix=runtime.prefix)
            times["direct"].append(time.perf_counter() - start)
        backend.snapshots.flush()
        recorded = len(backend.injections.rows()), len(backend.snapshots.list())
    backend.close()
    medians = {name: statistics.median(t) for name, t in times.items()}
    # Every contextplane turn (and the warm-up) and every direct one was recorded.
    assert recorded == (2 * turns + 1, 2 * turns + 1), recorded
    return medians


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    turns = 60 if args.quick else 300
    with tempfile.TemporaryDirectory() as tmp:
        medians = asyncio.run(overhead(turns, Path(tmp)))
    bare = medians["bare"]
    print(
        f"per-turn median over {turns} interleaved rounds (agent.run, FunctionModel, one request per turn):"
    )
    for name, value in medians.items():
        print(f"  {name:13s} {value * 1000:7.3f} ms  {value / bare:5.2f}x bare")
    added = medians["contextplane"] - medians["static"]
    print(
        f"  the capability adds {(medians['contextplane'] - bare) * 1000:.3f} ms to a bare turn, "
        f"{added * 1000:.3f} ms to a turn carrying the same instructions and a same-size request; "
        "composing and delivering "
        f"directly takes {medians['direct'] * 1000:.3f} ms ({added / medians['direct']:.2f}x of it)"
    )
    ratio = medians["contextplane"] / bare
    met = "met" if ratio <= 1.3 else "missed"
    provider = PROVIDER_MS / 1000
    real = (medians["contextplane"] + provider) / (bare + provider)
    print(f"  target <= 1.30x the bare turn with a fake model: {ratio:.2f}x, {met}")
    print(f"  with a {PROVIDER_MS:.0f} ms provider call on both: {real:.4f}x the bare turn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
