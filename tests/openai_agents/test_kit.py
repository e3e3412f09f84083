"""The runtime conformance kit on the OpenAI Agents SDK adapter, on the real SDK.

``AgentsHarness`` runs each turn through ``Runner.run`` (``run_sync``, ``run_streamed``) with
``run_config`` on the kit's runtime, the SDK's own ``ScriptedModel`` (scripted per turn: an
answer, or a ``kit_lookup`` call then an answer) and the SDK's ``SQLiteSession`` in a file as
the stored state. The "resume" capability is the SDK's tool approval: a tool built with
``needs_approval=True`` interrupts the run, and the turn is resumed from its ``RunState``
(``result.to_state()``, approved) in a new run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel, assistant_message, function_call

from contextplane.backends.sqlite import SQLiteBackend
from contextplane.runtime import Runtime, open_runtime
from contextplane.testing import (
    KIT_TOOL,
    ModelCall,
    Requirement,
    RuntimeConformance,
    RuntimeKit,
    SeenMessage,
    ToolCall,
    kit_lookup,
    new_runtime_kit,
    run_checks,
)
from contextplane_openai_agents import ContextPlaneInputFilter, run_config
from contextplane_openai_agents.items import item_text


@function_tool(name_override=KIT_TOOL)
def kit_lookup_tool(topic: str) -> str:
    """Look a topic up."""
    return kit_lookup(topic)


@function_tool(needs_approval=True)
def kit_delete(branch: str) -> str:
    """Delete a branch (the operator approves first)."""
    return f"deleted {branch}"


def seen(call: Any) -> ModelCall:
    """One ``ScriptedModel`` call in the kit's plain form: the instructions, then the input
    items; consecutive ``function_call`` items (one response's calls) are one assistant message."""
    messages = [SeenMessage("system", call.system_instructions or "")]
    items = call.input if isinstance(call.input, list) else [{"role": "user", "content": call.input}]
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            last = messages[-1]
            if last.role == "assistant" and last.tool_call_ids and not last.text:
                messages[-1] = SeenMessage("assistant", "", (*last.tool_call_ids, item["call_id"]))
            else:
                messages.append(SeenMessage("assistant", "", (item["call_id"],)))
        elif kind == "function_call_output":
            messages.append(SeenMessage("tool", item_text(item), tool_call_id=item["call_id"]))
        else:
            messages.append(SeenMessage(str(item.get("role", "user")), item_text(item)))
    return ModelCall(messages)


class AgentsHarness:
    """One agent per session (its own ``ScriptedModel``) over one SQLite file of sessions."""

    def __init__(self, runtime: Runtime, directory: Path, *, how: str = "run") -> None:
        #: How the runs are driven: ``Runner.run``, ``Runner.run_sync`` or ``Runner.run_streamed``.
        self.how = how
        self.runtime = runtime
        self.path = directory / "sdk-sessions.sqlite3"
        self._models: dict[str, ScriptedModel] = {}
        self._agents: dict[str, Agent[Any]] = {}
        self._sessions: dict[str, SQLiteSession] = {}
        self._paused: dict[str, Any] = {}

    def _agent(self, session_id: str) -> Agent[Any]:
        if session_id not in self._agents:
            self._models[session_id] = ScriptedModel()
            self._agents[session_id] = Agent(
                name="kit", model=self._models[session_id], tools=[kit_lookup_tool, kit_delete]
            )
            self._sessions[session_id] = SQLiteSession(session_id, self.path)
        return self._agents[session_id]

    def config(self, session: SQLiteSession) -> RunConfig:
        """The run's ``RunConfig``: the adapter's, one filter per run."""
        return run_config(self.runtime, session=session)

    def _run(self, session_id: str, payload: Any, context: Mapping[str, Any]) -> Any:
        agent, session = self._agent(session_id), self._sessions[session_id]
        config = self.config(session)
        if self.how == "run_sync":
            return Runner.run_sync(agent, payload, session=session, context=context, run_config=config)
        if self.how == "run_streamed":
            return asyncio.run(self._streamed(agent, payload, session, context, config))
        return asyncio.run(Runner.run(agent, payload, session=session, context=context, run_config=config))

    @staticmethod
    async def _streamed(
        agent: Agent[Any], payload: Any, session: SQLiteSession, context: Any, config: RunConfig
    ) -> Any:
        result = Runner.run_streamed(agent, payload, session=session, context=context, run_config=config)
        async for _event in result.stream_events():
            pass
        return result

    def run_turn(
        self,
        session_id: str,
        text: str,
        *,
        tool_call: ToolCall | None = None,
        incognito: bool = False,
        goal_turn: bool = False,
    ) -> None:
        self._agent(session_id)
        model = self._models[session_id]
        if tool_call is not None:
            model.enqueue([function_call(tool_call.name, tool_call.args, call_id=tool_call.call_id)])
            model.enqueue([assistant_message(f"answer after {kit_lookup(**tool_call.args)}")])
        else:
            model.enqueue([assistant_message("answer")])
        result = self._run(session_id, text, {"incognito": incognito, "goal_turn": goal_turn})
        assert not result.interruptions and model.remaining_steps == 0

    def pause_turn(self, session_id: str, text: str) -> None:
        self._agent(session_id)
        model = self._models[session_id]
        model.enqueue([function_call("kit_delete", {"branch": "old"}, call_id="kit-pause")])
        model.enqueue([assistant_message("deleted it")])
        result = self._run(session_id, text, {})
        assert result.interruptions, "the approval tool did not pause the run"
        self._paused[session_id] = result

    def resume(self, session_id: str) -> None:
        paused = self._paused.pop(session_id)
        state = paused.to_state()
        for interruption in paused.interruptions:
            state.approve(interruption)
        result = self._run(session_id, state, {})
        assert not result.interruptions and result.final_output == "deleted it"

    def model_calls(self, session_id: str) -> Sequence[ModelCall]:
        model = self._models.get(session_id)
        return [seen(call) for call in model.calls] if model is not None else []

    def stored(self, session_id: str) -> str:
        """The session's items and every byte of the sessions' SQLite file."""
        session = self._sessions.get(session_id)
        items = asyncio.run(session.get_items()) if session is not None else []
        raw = self.path.read_bytes().decode("utf-8", "replace") if self.path.exists() else ""
        return json.dumps(items) + raw


class TestRunnerRun(RuntimeConformance):
    capabilities: ClassVar[frozenset[str]] = frozenset({"tools", "incognito", "goal_turn", "resume"})
    how: ClassVar[str] = "run"

    @pytest.fixture
    def runtime_harness(self, runtime_kit: RuntimeKit, tmp_path: Path) -> Iterator[AgentsHarness]:
        with open_runtime(host=runtime_kit.host, backend=runtime_kit.backend) as runtime:
            yield AgentsHarness(runtime, tmp_path, how=self.how)


class TestRunnerRunSync(TestRunnerRun):
    how: ClassVar[str] = "run_sync"


class TestRunnerRunStreamed(TestRunnerRun):
    how: ClassVar[str] = "run_streamed"


# --- the harness tells a broken filter apart: the kit fails it by id on the same SDK runs ------


class PersistingFilter(ContextPlaneInputFilter):
    """Writes each call's projection into the SDK session too (context persisted, then piling up)."""

    def __init__(self, runtime: Runtime, session: SQLiteSession) -> None:
        super().__init__(runtime, session_id=session.session_id)
        self.store = session

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        out = await super().__call__(data)
        await self.store.add_items([out.input[-1]])
        return out


class ComposingTwiceFilter(ContextPlaneInputFilter):
    """Forgets the turn after each call, so every tool round composes again."""

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        out = await super().__call__(data)
        self._current = None
        return out


class SplittingFilter(ContextPlaneInputFilter):
    """Places the projection before a trailing tool result: between the call and its output."""

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        out = await super().__call__(data)
        *items, projection = out.input
        if items and items[-1].get("type") == "function_call_output":
            items.insert(len(items) - 1, projection)
            return ModelInputData(input=items, instructions=out.instructions)
        return out


class _Broken(AgentsHarness):
    filter: ClassVar[Callable[[Runtime, SQLiteSession], ContextPlaneInputFilter]]

    def config(self, session: SQLiteSession) -> RunConfig:
        return RunConfig(call_model_input_filter=type(self).filter(self.runtime, session))


def _broken(filter: Callable[[Runtime, SQLiteSession], ContextPlaneInputFilter]) -> type[AgentsHarness]:
    return type("Broken", (_Broken,), {"filter": staticmethod(filter)})


def _failures(harness: type[AgentsHarness], tmp_path: Path) -> set[str]:
    """The ids of the runtime requirements ``harness`` fails, each check on a fresh kit."""

    @contextmanager
    def fixtures(req: Requirement) -> Iterator[dict[str, Any]]:
        directory = tmp_path / req.id
        directory.mkdir()
        backend = SQLiteBackend(directory / "kit.sqlite3")
        try:
            kit = new_runtime_kit(backend)
            with open_runtime(host=kit.host, backend=backend) as runtime:
                yield {"runtime_harness": harness(runtime, directory), "runtime_kit": kit}
        finally:
            backend.close()

    return set(run_checks(TestRunnerRun, fixtures).failed_ids)


@pytest.mark.parametrize(
    ("harness", "broken"),
    [
        (
            _broken(PersistingFilter),
            # Stored, the earlier turns' projections come back in the history the model sees.
            {
                "RUNTIME-NEVER-STORED",
                "RUNTIME-INCOGNITO-WRITES-NOTHING",
                "RUNTIME-PROJECTION-SEEN",
                "RUNTIME-GOAL-TURN",
            },
        ),
        (
            _broken(lambda rt, s: ComposingTwiceFilter(rt, session_id=s.session_id)),
            {"RUNTIME-ONE-COMPOSE-PER-TURN"},
        ),
        (
            _broken(lambda rt, s: SplittingFilter(rt, session_id=s.session_id)),
            {"RUNTIME-TOOL-PAIRS-INTACT"},
        ),
    ],
    ids=["persists-the-projection", "composes-twice-per-turn", "splits-a-tool-pair"],
)
def test_the_kit_fails_a_broken_filter_on_the_sdk_by_id(
    harness: type[AgentsHarness], broken: set[str], tmp_path: Path
) -> None:
    assert _failures(harness, tmp_path) == broken
