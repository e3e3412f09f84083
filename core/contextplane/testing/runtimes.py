"""Conformance checks for runtime adapters: the projection reaches the model for one request and
is never stored (ADR D1, D2), one composition per turn, the records per composition and per call
(ADR D5, D8), incognito and goal turns, tool-call pairs, and a stable prefix.

The author subclasses ``RuntimeConformance`` and defines one fixture, ``runtime_harness``, that
builds their adapter on the kit's ``RuntimeKit`` (host, backend) and returns a
``RuntimeHarness`` (see ``runtime_harness``). Each check runs its own short conversation in a
fresh session and reads the results only through the harness and the backend's public record
protocols, so every adapter is held to the same contract whatever its framework.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import attrs
import pytest

from contextplane.records import Backend, TurnInputStore
from contextplane.testing._base import DeclaredCapabilities, KitUsageError, checks, required_fixture
from contextplane.testing.requirements import RUNTIME_CAPABILITIES, Requirement
from contextplane.testing.runtime_harness import (
    GOAL_MARK,
    KIT_TOOL,
    MEMORY_MARK,
    PREFIX_MARK,
    PROJECTION_MARKS,
    ROW_MARK,
    Composition,
    ModelCall,
    ResumableHarness,
    RuntimeHarness,
    RuntimeKit,
    SeenMessage,
    ToolCall,
    mark,
    new_runtime_kit,
)


@attrs.frozen
class TurnRun:
    """One turn the kit ran: what the user typed, and the model calls it made."""

    text: str
    calls: tuple[ModelCall, ...]
    stored: str
    #: The compositions the kit's sections saw during the turn (one, for a conforming adapter).
    composed: tuple[Composition, ...]

    @property
    def turn_index(self) -> int | None:
        return self.composed[0].turn_index if self.composed else None


def _tool_call(n: int) -> ToolCall:
    return ToolCall(KIT_TOOL, {"topic": f"topic-{n}"}, f"kit-call-{n}")


class _Conversation:
    """Runs turns on a harness in one session and slices its model calls per turn."""

    def __init__(self, harness: RuntimeHarness, kit: RuntimeKit, session_id: str) -> None:
        self.harness = harness
        self.kit = kit
        self.session_id = session_id
        self.turns: list[TurnRun] = []

    def calls(self) -> list[ModelCall]:
        found = list(self.harness.model_calls(self.session_id))
        for call in found:
            if not isinstance(call, ModelCall):
                raise KitUsageError(
                    f"model_calls() must return contextplane.testing.ModelCall objects, got "
                    f"{type(call).__name__}"
                )
        return found

    def turn(
        self, text: str, *, tool: bool = False, incognito: bool = False, goal_turn: bool = False
    ) -> TurnRun:
        before, composed = len(self.calls()), len(self.compositions())
        tool_call = _tool_call(len(self.turns)) if tool else None
        self.harness.run_turn(
            self.session_id, text, tool_call=tool_call, incognito=incognito, goal_turn=goal_turn
        )
        calls = tuple(self.calls()[before:])
        if not calls:
            raise KitUsageError(f"run_turn({text!r}) made no model call that model_calls() reports")
        stored = self.harness.stored(self.session_id)
        if not isinstance(stored, str):
            raise KitUsageError(f"stored() must return text, got {type(stored).__name__}")
        run = TurnRun(text, calls, stored, tuple(self.compositions()[composed:]))
        self.turns.append(run)
        return run

    def compositions(self) -> list[Composition]:
        return self.kit.sections.compositions(self.session_id)


def _leaks(text: str) -> list[str]:
    return [m for m in PROJECTION_MARKS if m in text]


def _excerpt(text: str, needle: str) -> str:
    at = text.find(needle)
    return repr(text[max(at - 60, 0) : at + 80])


class _RuntimeBase(DeclaredCapabilities):
    """The fixtures of the runtime kit, and the capability declaration."""

    known_capabilities: ClassVar[frozenset[str]] = RUNTIME_CAPABILITIES
    #: Optional capabilities this adapter has (see ``RUNTIME_CAPABILITIES``); undeclared ones skip.
    capabilities: ClassVar[frozenset[str]] = frozenset({"tools", "incognito", "goal_turn"})

    @pytest.fixture
    def runtime_backend(self, tmp_path: Path) -> Iterator[Backend]:
        """The backend the records go to. Default: the embedded SQLite backend in a new file."""
        from contextplane.backends.sqlite import SQLiteBackend

        backend = SQLiteBackend(tmp_path / "runtime-kit.sqlite3")
        yield backend
        backend.close()

    @pytest.fixture
    def runtime_kit(self, runtime_backend: Backend) -> RuntimeKit:
        """The kit's host (its marker sections and prompt sections) and backend."""
        return new_runtime_kit(runtime_backend)

    @pytest.fixture
    def runtime_harness(self, runtime_kit: RuntimeKit) -> RuntimeHarness:
        """Return a ``RuntimeHarness``: the framework's agent with your adapter built on
        ``runtime_kit.host`` (stable prefix from its prompt sections) and ``runtime_kit.backend``,
        driven by the framework's own test model, able to call the ``kit_lookup`` tool."""
        raise required_fixture(self, "runtime_harness", _RuntimeBase.runtime_harness.__doc__)

    def _conversation(self, harness: RuntimeHarness, kit: RuntimeKit, name: str) -> _Conversation:
        if not isinstance(harness, RuntimeHarness):
            raise KitUsageError(
                f"runtime_harness returned {type(harness).__name__}, which lacks run_turn, "
                "model_calls or stored (contextplane.testing.RuntimeHarness)"
            )
        return _Conversation(harness, kit, f"kit-{name}")


class RuntimeConformance(_RuntimeBase):
    """Every runtime check. Subclass it, define ``runtime_harness``, set ``capabilities``."""

    @checks("RUNTIME-PROJECTION-SEEN")
    def test_projection_seen(
        self, runtime_harness: RuntimeHarness, runtime_kit: RuntimeKit, requirement: Requirement
    ) -> None:
        conv = self._conversation(runtime_harness, runtime_kit, "seen")
        runs = [conv.turn("what is the deploy window?"), conv.turn("and who owns it?")]
        indexes = [c.turn_index for c in conv.compositions()]
        for n, run in enumerate(runs):
            requirement.check(run.turn_index is not None, f"turn {n} was never composed")
            own = mark(ROW_MARK, conv.session_id, run.turn_index or 0)
            for i, call in enumerate(run.calls):
                requirement.check(
                    call.holds(own),
                    f"turn {n} call {i}: the model did not see the turn's projection ({own!r} in no "
                    f"non-system message); it saw {[m.role for m in call.messages]}",
                )
                requirement.check(
                    own not in call.system, f"turn {n} call {i}: the projection is in the system prompt"
                )
                for other in indexes:
                    stale = mark(ROW_MARK, conv.session_id, other)
                    requirement.check(
                        stale == own or not call.holds(stale),
                        f"turn {n} call {i}: the model saw another turn's projection ({stale!r})",
                    )

    @checks("RUNTIME-NEVER-STORED")
    def test_never_stored(
        self, runtime_harness: RuntimeHarness, runtime_kit: RuntimeKit, requirement: Requirement
    ) -> None:
        conv = self._conversation(runtime_harness, runtime_kit, "stored")
        texts = ["remember the kiwi plan", "what was the plan?"]
        runs = [conv.turn(texts[0]), conv.turn(texts[1], tool="tools" in type(self).capabilities)]
        for n, run in enumerate(runs):
            leaked = _leaks(run.stored)
            requirement.check(
                not leaked,
                f"after turn {n} the framework stores projected text: "
                f"{'; '.join(_excerpt(run.stored, m) for m in leaked)}",
            )
            missing = [t for t in texts[: n + 1] if t not in run.stored]
            requirement.check(
                not missing,
                f"after turn {n}, stored() does not hold the user's messages {missing}: the harness "
                "must return what the framework keeps, or this check proves nothing",
            )

    @checks("RUNTIME-ONE-COMPOSE-PER-TURN")
    def test_one_compose_per_turn(
        self, runtime_harness: RuntimeHarness, runtime_kit: RuntimeKit, requirement: Requirement
    ) -> None:
        conv = self._conversation(runtime_harness, runtime_kit, "compose")
        tools = "tools" in type(self).capabilities
        texts = ["first question", "second question, with a lookup", "third question"]
        for n, text in enumerate(texts):
            conv.turn(text, tool=tools and n == 1)
            composed = conv.compositions()
            requirement.check(
                len(composed) == n + 1,
                f"after {n + 1} turns ({sum(len(r.calls) for r in conv.turns)} model calls) the turn "
                f"was composed {len(composed)} times: {[(c.turn_index, c.query) for c in composed]}",
            )
            last = composed[-1]
            requirement.check(last.query == text, f"turn {n} was composed for {last.query!r}, not {text!r}")
            if n:
                requirement.check(
                    last.turn_index > composed[-2].turn_index,
                    f"turn {n} was composed with turn index {last.turn_index}, after "
                    f"{composed[-2].turn_index}",
                )

    @checks("RUNTIME-RECOMPOSE-ON-RESUME")
    def test_recompose_on_resume(
        self, runtime_harness: RuntimeHarness, runtime_kit: RuntimeKit, requirement: Requirement
    ) -> None:
        self._require(requirement)
        if not isinstance(runtime_harness, ResumableHarness):
            raise KitUsageError("the 'resume' capability needs pause_turn and resume on the harness")
        conv = self._conversation(runtime_harness, runtime_kit, "resume")
        conv.turn("an ordinary turn")
        text = "delete the old branch"
        runtime_harness.pause_turn(conv.session_id, text)
        paused = conv.compositions()
        requirement.check(len(paused) == 2, f"the paused turn left {len(paused)} compositions, not 2")
        before = len(conv.calls())
        runtime_harness.resume(conv.session_id)
        after = conv.compositions()
        requirement.check(
            len(after) == 3,
            f"resuming composed {len(after) - 2} times, not once: {[(c.turn_index, c.query) for c in after]}",
        )
        again = after[-1]
        requirement.check(
            (again.turn_index, again.query) == (paused[-1].turn_index, text),
            f"the resumed turn was composed as turn {again.turn_index} for {again.query!r}, not as "
            f"turn {paused[-1].turn_index} for {text!r}",
        )
        own = mark(ROW_MARK, conv.session_id, again.turn_index)
        resumed = conv.calls()[before:]
        requirement.check(resumed, "the resumed turn made no model call")
        for i, call in enumerate(resumed):
            requirement.check(call.holds(own), f"resumed call {i} did not see the turn's projection {own!r}")

    @checks("RUNTIME-ONE-INJECTION-ROW")
    def test_one_injection_row(
        self, runtime_harness: RuntimeHarness, runtime_kit: RuntimeKit, requirement: Requirement
    ) -> None:
        conv = self._conversation(runtime_harness, runtime_kit, "injections")
        backend = runtime_kit.backend
        tools = "tools" in type(self).capabilities
        for n, text in enumerate(["a question", "one with a lookup", "a last one"]):
            conv.turn(text, tool=tools and n == 1)
            rows = backend.injections.rows(conv.session_id)
            composed = conv.compositions()
            requirement.check(
                [r.turn_index for r in rows] == [c.turn_index for c in composed],
                f"after turn {n}: injection rows for turns {[r.turn_index for r in rows]}, "
                f"compositions for turns {[c.turn_index for c in composed]}",
            )
            requirement.check(
                rows[-1].delivered.get("kit_working") == ["kit-ws"],
                f"turn {n}'s row does not list the delivered row: {rows[-1].delivered}",
            )
        snapshots = backend.snapshots
        if isinstance(snapshots, TurnInputStore):
            inputs = snapshots.list_inputs(conv.session_id)
            keys = sorted({i.turn_index for i in inputs})
            want = sorted({c.turn_index for c in conv.compositions()})
            requirement.check(keys == want, f"turn inputs for turns {keys}, compositions for {want}")

    @checks("RUNTIME-SNAPSHOT-PER-CALL")
    def test_snapshot_per_call(
        self, runtime_harness: RuntimeHarness, runtime_kit: RuntimeKit, requirement: Requirement
    ) -> None:
        conv = self._conversation(runtime_harness, runtime_kit, "snapshots")
        tools = "tools" in type(self).capabilities
        for n, text in enumerate(["a question", "one with a lookup", "a last one"]):
            conv.turn(text, tool=tools and n == 1)
        store = runtime_kit.backend.snapshots
        store.flush()
        keys = [(s.turn_index, s.call_index) for s in store.list(conv.session_id)]
        want = [(run.turn_index, i) for run in conv.turns for i in range(len(run.calls))]
        requirement.check(
            sorted(keys) == sorted(want),
            f"snapshots (turn, call) {sorted(keys)}; the model was called at {sorted(want)}",
        )

    @checks("RUNTIME-INCOGNITO-WRITES-NOTHING")
    def test_incognito_writes_nothing(
        self, runtime_harness: RuntimeHarness, runtime_kit: RuntimeKit, requirement: Requirement
    ) -> None:
        self._require(requirement)
        conv = self._conversation(runtime_harness, runtime_kit, "incognito")
        backend = runtime_kit.backend
        first = conv.turn("an ordinary turn")
        requirement.check(
            all(c.holds(MEMORY_MARK) for c in first.calls),
            "an ordinary turn did not show the memory section, so incognito cannot be told apart",
        )
        rows = len(backend.injections.rows(conv.session_id))
        memories = len(backend.memories.list_chunks())
        snapshots = backend.snapshots
        inputs = len(snapshots.list_inputs(conv.session_id)) if isinstance(snapshots, TurnInputStore) else 0
        run = conv.turn("a private turn", incognito=True)
        last = conv.compositions()[-1]
        requirement.check(last.incognito, "the incognito turn was composed without incognito")
        for i, call in enumerate(run.calls):
            requirement.check(not call.holds(MEMORY_MARK), f"incognito call {i} showed a memory section")
        requirement.check(
            len(backend.injections.rows(conv.session_id)) == rows, "the incognito turn wrote an injection row"
        )
        requirement.check(len(backend.memories.list_chunks()) == memories, "the incognito turn wrote memory")
        if isinstance(snapshots, TurnInputStore):
            now = len(snapshots.list_inputs(conv.session_id))
            requirement.check(now == inputs, "the incognito turn wrote turn inputs")
        snapshots.flush()
        for snap in snapshots.list(conv.session_id):
            if snap.turn_index == last.turn_index:
                requirement.check(
                    snap.incognito and snap.projection_sha256 is None and snap.full_text is None,
                    f"the incognito turn's snapshot (call {snap.call_index}) carries the projection's "
                    "hash or text",
                )
        requirement.check(not _leaks(run.stored), "the incognito turn's projection is stored")

    @checks("RUNTIME-GOAL-TURN")
    def test_goal_turn(
        self, runtime_harness: RuntimeHarness, runtime_kit: RuntimeKit, requirement: Requirement
    ) -> None:
        self._require(requirement)
        conv = self._conversation(runtime_harness, runtime_kit, "goal")
        plain = conv.turn("an ordinary turn")
        goal = conv.turn("work toward the goal", goal_turn=True)
        requirement.check(conv.compositions()[-1].goal_turn, "the goal turn was composed as an ordinary turn")
        requirement.check(
            all(c.holds(GOAL_MARK) for c in plain.calls),
            "an ordinary turn did not show the goal-suppressed section",
        )
        for i, call in enumerate(goal.calls):
            requirement.check(not call.holds(GOAL_MARK), f"goal call {i} showed a goal-suppressed section")

    @checks("RUNTIME-TOOL-PAIRS-INTACT")
    def test_tool_pairs_intact(
        self, runtime_harness: RuntimeHarness, runtime_kit: RuntimeKit, requirement: Requirement
    ) -> None:
        self._require(requirement)
        conv = self._conversation(runtime_harness, runtime_kit, "tools")
        conv.turn("an ordinary turn")
        conv.turn("look something up", tool=True)
        conv.turn("and once more", tool=True)
        paired = 0
        for n, call in enumerate(conv.calls()):
            problem = _pair_problem(call.conversation)
            requirement.check(problem is None, f"model call {n}: {problem}")
            paired += sum(1 for m in call.conversation if m.tool_call_ids)
        requirement.check(
            paired >= 2,
            "no model call saw a tool call and its result: the harness must make the test model call "
            f"{KIT_TOOL} when run_turn is given tool_call",
        )

    @checks("RUNTIME-PREFIX-STABLE")
    def test_prefix_stable(
        self, runtime_harness: RuntimeHarness, runtime_kit: RuntimeKit, requirement: Requirement
    ) -> None:
        conv = self._conversation(runtime_harness, runtime_kit, "prefix")
        for text in ("first", "second", "third"):
            conv.turn(text)
        calls = conv.calls()
        system = calls[0].system
        requirement.check(
            PREFIX_MARK in system, f"the system prompt does not hold the stable prefix: {system!r}"
        )
        for n, call in enumerate(calls):
            requirement.check(call.system == system, f"call {n}'s system prompt differs from call 0's")
            requirement.check(not _leaks(call.system), f"call {n}'s system prompt holds projected text")
        history = [[m for m in c.conversation if not _leaks(m.text)] for c in calls]
        for n in range(1, len(history)):
            before, now = history[n - 1], history[n]
            requirement.check(
                now[: len(before)] == before,
                f"call {n - 1}'s history is not a prefix of call {n}'s: {[m.role for m in before]} vs "
                f"{[m.role for m in now]}",
            )
        store = runtime_kit.backend.snapshots
        store.flush()
        hashes = {s.prefix_sha256 for s in store.list(conv.session_id)}
        requirement.check(
            len(hashes) == 1 and None not in hashes,
            f"the snapshots record prefix hashes {sorted(map(str, hashes))}",
        )


def _pair_problem(messages: Sequence[object]) -> str | None:
    """Why ``messages`` split or reorder a tool-call/result pair, or None when every pair holds."""
    seq = [m for m in messages if isinstance(m, SeenMessage)]
    answered: set[str] = set()
    for at, message in enumerate(seq):
        if not message.tool_call_ids:
            if message.role == "tool" and message.tool_call_id not in answered:
                return f"tool result {message.tool_call_id!r} at {at} does not directly follow its call"
            continue
        results = seq[at + 1 : at + 1 + len(message.tool_call_ids)]
        got = tuple(r.tool_call_id if r.role == "tool" else f"<{r.role}>" for r in results)
        if got != message.tool_call_ids:
            return (
                f"the assistant's tool calls {list(message.tool_call_ids)} at {at} are followed by "
                f"{list(got)}, not their results in order"
            )
        answered.update(message.tool_call_ids)
    return None
