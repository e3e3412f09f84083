"""A 20-turn session through the SDK's ``SQLiteSession`` (issue 24's session check).

On every turn: the session (its items and every byte of its SQLite file) holds 0 bytes of
projected context; the projection each request carries fits its budget (chars // 4 <= budget
tokens) although the sections offer far more; and the instructions are byte-identical, with the
instructions plus the history before the projection a byte prefix of the next call's (what a
provider's prefix cache keeps). Every fifth turn calls a tool, so tool rounds are in it too.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents import Agent, Runner, SQLiteSession
from agents.testing import ScriptedModel, assistant_message, function_call

from contextplane import ContextSection, Envelope, Row, Shed, hookimpl
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.runtime import open_runtime
from contextplane_openai_agents import run_config

from .conftest import MARK, MEMTEXT, MarkerSections, lookup, make_host

BUDGET_TOKENS = 1_000
BULK = "BULKROW{"
TURNS = 20


class Bulk:
    """Far more rows than the budget holds: the budget, not the section, bounds the request."""

    plugin_name = "bulk"

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        def draft(req: Any) -> list[Row]:
            return [Row(f"b{n}", n, f"{BULK}{req.turn_index}|{n}}} " + "x" * 200) for n in range(60)]

        register(ContextSection("bulk", 30, Shed.DROP_ROWS, draft, Envelope("working_state")))


def test_twenty_turns_store_no_context_stay_in_budget_and_keep_the_prefix(tmp_path: Path) -> None:
    host = make_host(MarkerSections(), Bulk())
    backend = SQLiteBackend(tmp_path / "m.sqlite3", config=host.config)
    model = ScriptedModel()
    agent = Agent(name="a", model=model, tools=[lookup])
    path = tmp_path / "sdk.sqlite3"
    session = SQLiteSession("s20", path)

    async def turns() -> None:
        with open_runtime(host=host, backend=backend) as runtime:
            for n in range(TURNS):
                if n % 5 == 4:
                    model.enqueue([function_call("lookup", {"topic": f"t{n}"}, call_id=f"c{n}")])
                model.enqueue([assistant_message(f"answer {n}")])
                config = run_config(runtime, session=session, budget_tokens=BUDGET_TOKENS)
                await Runner.run(agent, f"question {n}", session=session, run_config=config)
                items = await session.get_items()
                raw = path.read_bytes()
                for marker in (MARK, MEMTEXT, BULK):
                    assert marker not in json.dumps(items), (n, marker)
                    assert marker.encode() not in raw, (n, marker)
                assert [i["content"] for i in items if i.get("role") == "user"] == [
                    f"question {k}" for k in range(n + 1)
                ]

    asyncio.run(turns())
    snapshots = backend.snapshots.list("s20")
    backend.close()
    assert len(snapshots) == TURNS + TURNS // 5
    calls = model.calls
    assert len(calls) == TURNS + TURNS // 5
    instructions = calls[0].system_instructions
    assert instructions is not None and "PREFIX-IDENTITY" in instructions
    for n, call in enumerate(calls):
        projection = call.input[-1]["content"]
        assert MARK in projection and BULK in projection, n
        assert len(projection) // 4 <= BUDGET_TOKENS, (n, len(projection))
        assert projection.count(BULK) < 60, n  # the budget shed rows: it is what bounds the request
        assert call.system_instructions == instructions, n
        if n:  # the previous call's history, byte for byte, starts this one's
            before = calls[n - 1].input[:-1]
            assert json.dumps(call.input[: len(before)]) == json.dumps(before), n
    assert {s.prefix_sha256 for s in snapshots} == {hashlib.sha256(instructions.encode()).hexdigest()}
