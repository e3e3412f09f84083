"""The runtime conformance kit on the two adapters of this repository, and on three broken ones.

The LangGraph middleware (a real ``create_agent`` graph, a scripted chat model, an in-memory
checkpointer) and the external assembler (the loop an external runtime writes) pass every
requirement they have the capability for. Each broken adapter fails the requirement it breaks,
by id: the kit's checks are run by ``contextplane.testing.run_checks``, which says which
requirements failed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import pytest

from contextplane.testing import (
    KitUsageError,
    Requirement,
    RuntimeConformance,
    RuntimeKit,
    requirement,
    requirements_of,
    run_checks,
)
from tests.conformance.runtime_harnesses import (
    BlindHarness,
    ComposingTwiceHarness,
    ComposingTwiceMiddleware,
    ExternalHarness,
    FlagBlindHarness,
    LangGraphHarness,
    PersistingHarness,
    PersistingMiddleware,
    ResumeBlindMiddleware,
    SplittingHarness,
    SplittingMiddleware,
    StampedPrefixHarness,
    UnrecordedHarness,
    langgraph_with,
)


class TestLangGraphMiddleware(RuntimeConformance):
    capabilities: ClassVar[frozenset[str]] = frozenset({"tools", "incognito", "goal_turn", "resume"})

    @pytest.fixture
    def runtime_harness(self, runtime_kit: RuntimeKit) -> LangGraphHarness:
        return LangGraphHarness(runtime_kit)


class TestExternalAssembler(RuntimeConformance):
    # An external runtime owns its loop; the assembler has no pause to resume (the runtime calls
    # assemble again on a retry, which is a new turn to the assembler).
    capabilities: ClassVar[frozenset[str]] = frozenset({"tools", "incognito", "goal_turn"})

    @pytest.fixture
    def runtime_harness(self, runtime_kit: RuntimeKit) -> ExternalHarness:
        return ExternalHarness(runtime_kit)


# The async paths: the same kit, the harnesses driving ``ainvoke`` and ``aassemble``/``adeliver``.


class TestLangGraphMiddlewareAsync(TestLangGraphMiddleware):
    @pytest.fixture
    def runtime_harness(self, runtime_kit: RuntimeKit) -> LangGraphHarness:
        return LangGraphHarness(runtime_kit, asynchronous=True)


class TestExternalAssemblerAsync(TestExternalAssembler):
    @pytest.fixture
    def runtime_harness(self, runtime_kit: RuntimeKit) -> ExternalHarness:
        return ExternalHarness(runtime_kit, asynchronous=True)


def _failures(harness: Callable[[RuntimeKit], Any], tmp_path: Any, *, resume: bool = False) -> dict[str, str]:
    """Every runtime check run on a fresh kit with ``harness``: the failing ids and messages
    (``resume``: with the "resume" capability declared; its checks skip without it)."""
    from contextplane.backends.sqlite import SQLiteBackend
    from contextplane.testing import new_runtime_kit

    capabilities = frozenset({"tools", "incognito", "goal_turn", *(["resume"] if resume else [])})
    kit_class = type("Broken", (RuntimeConformance,), {"capabilities": capabilities})

    @contextmanager
    def fixtures(req: Requirement) -> Iterator[dict[str, Any]]:
        backend = SQLiteBackend(tmp_path / f"{req.id}.sqlite3")
        try:
            kit = new_runtime_kit(backend)
            yield {"runtime_harness": harness(kit), "runtime_kit": kit}
        finally:
            backend.close()

    run = run_checks(kit_class, fixtures)
    skipped = {r.requirement.id for r in run.results if r.status == "skipped"}
    assert skipped == (
        set() if resume else {r.id for r in requirements_of("runtime") if r.capability == "resume"}
    )
    return run.failed


NEVER_STORED = {"RUNTIME-NEVER-STORED", "RUNTIME-INCOGNITO-WRITES-NOTHING"}
UNRECORDED = {"RUNTIME-ONE-INJECTION-ROW", "RUNTIME-SNAPSHOT-PER-CALL", "RUNTIME-PREFIX-STABLE"}
#: A model that never sees the projection cannot see the memory or goal sections either, so
#: the incognito and goal checks (which need an ordinary turn to show them) fail with it.
UNSEEN = {"RUNTIME-PROJECTION-SEEN", "RUNTIME-INCOGNITO-WRITES-NOTHING", "RUNTIME-GOAL-TURN"}

#: (id, harness factory, "resume" declared, the requirements the kit must fail). The first six
#: are the issue's three bugs on both adapters; the rest show every other check can fail.
BROKEN: list[tuple[str, Callable[[RuntimeKit], Any], bool, set[str]]] = [
    ("external-persists-the-projection", PersistingHarness, False, NEVER_STORED),
    ("external-composes-twice-per-turn", ComposingTwiceHarness, False, {"RUNTIME-ONE-COMPOSE-PER-TURN"}),
    ("external-splits-a-tool-pair", SplittingHarness, False, {"RUNTIME-TOOL-PAIRS-INTACT"}),
    ("langgraph-persists-the-projection", langgraph_with(PersistingMiddleware), True, NEVER_STORED),
    (
        "langgraph-composes-twice-per-turn",
        langgraph_with(ComposingTwiceMiddleware),
        True,
        {"RUNTIME-ONE-COMPOSE-PER-TURN", "RUNTIME-RECOMPOSE-ON-RESUME"},
    ),
    (
        "langgraph-splits-a-tool-pair",
        langgraph_with(SplittingMiddleware),
        True,
        {"RUNTIME-TOOL-PAIRS-INTACT"},
    ),
    (
        "langgraph-skips-the-resume",
        langgraph_with(ResumeBlindMiddleware),
        True,
        {"RUNTIME-RECOMPOSE-ON-RESUME"},
    ),
    ("external-hides-the-projection", BlindHarness, False, UNSEEN),
    ("external-records-nothing", UnrecordedHarness, False, UNRECORDED),
    (
        "external-drops-the-flags",
        FlagBlindHarness,
        False,
        {"RUNTIME-INCOGNITO-WRITES-NOTHING", "RUNTIME-GOAL-TURN"},
    ),
    ("external-stamps-the-prefix", StampedPrefixHarness, False, {"RUNTIME-PREFIX-STABLE"}),
]


@pytest.mark.parametrize(("harness", "resume", "broken"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_the_kit_fails_a_broken_adapter_by_requirement_id(
    harness: Callable[[RuntimeKit], Any], resume: bool, broken: set[str], tmp_path: Any
) -> None:
    failed = _failures(harness, tmp_path, resume=resume)
    assert set(failed) == broken, failed
    for req_id, message in failed.items():
        assert message.startswith(f"[{req_id}] {requirement(req_id).sentence}\n"), message


def test_every_requirement_fails_on_some_broken_adapter() -> None:
    assert set().union(*(b[3] for b in BROKEN)) == {r.id for r in requirements_of("runtime")}


def test_the_working_external_harness_fails_nothing(tmp_path: Any) -> None:
    # The control for the test above: the same direct calls on the unbroken loop.
    assert _failures(ExternalHarness, tmp_path) == {}


# --- usage errors: a harness set up wrongly is the test's fault, said so, never a pass ---------


class _Silent(ExternalHarness):
    """Runs the turn but reports no model call."""

    def model_calls(self, session_id: str) -> list[Any]:
        return []


@pytest.fixture
def kit(tmp_path: Any) -> Any:
    from contextplane.backends.sqlite import SQLiteBackend
    from contextplane.testing import new_runtime_kit

    backend = SQLiteBackend(tmp_path / "kit.sqlite3")
    yield new_runtime_kit(backend)
    backend.close()


def test_a_harness_without_the_protocol_is_a_usage_error(kit: RuntimeKit) -> None:
    req = requirement("RUNTIME-PROJECTION-SEEN")
    with pytest.raises(KitUsageError, match="lacks run_turn, model_calls or stored"):
        RuntimeConformance().test_projection_seen(runtime_harness=object(), runtime_kit=kit, requirement=req)
    with pytest.raises(KitUsageError, match="made no model call"):
        RuntimeConformance().test_projection_seen(
            runtime_harness=_Silent(kit), runtime_kit=kit, requirement=req
        )


def test_an_undeclared_capability_skips_naming_it(kit: RuntimeKit) -> None:
    plain = type("TestPlain", (RuntimeConformance,), {"capabilities": frozenset()})
    req = requirement("RUNTIME-TOOL-PAIRS-INTACT")
    with pytest.raises(
        pytest.skip.Exception, match=r"capability 'tools' not declared \(add \"tools\" to TestPlain"
    ):
        plain().test_tool_pairs_intact(runtime_harness=ExternalHarness(kit), runtime_kit=kit, requirement=req)


def test_an_unknown_capability_is_a_usage_error() -> None:
    odd = type("TestOdd", (RuntimeConformance,), {"capabilities": frozenset({"time_travel"})})
    with pytest.raises(KitUsageError, match=r"names \['time_travel'\]; known capabilities: \['goal_turn'"):
        odd().pytest_generate_tests(None)
