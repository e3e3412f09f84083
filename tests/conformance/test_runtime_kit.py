"""The runtime conformance kit on the two adapters of this repository, and on three broken ones.

The LangGraph middleware (a real ``create_agent`` graph, a scripted chat model, an in-memory
checkpointer) and the external assembler (the loop an external runtime writes) pass every
requirement they have the capability for. Each broken adapter fails the requirement it breaks,
by id: the kit's checks are called directly, so the test sees the ``ConformanceFailure``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from contextplane.testing import (
    ConformanceFailure,
    KitUsageError,
    RuntimeConformance,
    RuntimeKit,
    requirement,
)
from tests.conformance.runtime_harnesses import (
    ComposingTwiceHarness,
    ComposingTwiceMiddleware,
    ExternalHarness,
    LangGraphHarness,
    PersistingHarness,
    PersistingMiddleware,
    SplittingHarness,
    SplittingMiddleware,
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


def _failures(harness: Callable[[RuntimeKit], Any], tmp_path: Any) -> dict[str, str]:
    """Every runtime check run on a fresh kit with ``harness``: the failing ids and messages."""
    from contextplane.backends.sqlite import SQLiteBackend
    from contextplane.testing import new_runtime_kit
    from contextplane.testing._base import requirement_of

    kit_class = type("Broken", (RuntimeConformance,), {})
    failed: dict[str, str] = {}
    for name in dir(kit_class):
        req = requirement_of(getattr(kit_class, name))
        if req is None or req.capability == "resume":
            continue
        backend = SQLiteBackend(tmp_path / f"{req.id}.sqlite3")
        try:
            kit = new_runtime_kit(backend)
            getattr(kit_class(), name)(runtime_harness=harness(kit), runtime_kit=kit, requirement=req)
        except ConformanceFailure as failure:
            failed[req.id] = str(failure)
        finally:
            backend.close()
    return failed


NEVER_STORED = {"RUNTIME-NEVER-STORED", "RUNTIME-INCOGNITO-WRITES-NOTHING"}


@pytest.mark.parametrize(
    ("harness", "broken"),
    [
        (PersistingHarness, NEVER_STORED),
        (ComposingTwiceHarness, {"RUNTIME-ONE-COMPOSE-PER-TURN"}),
        (SplittingHarness, {"RUNTIME-TOOL-PAIRS-INTACT"}),
        (langgraph_with(PersistingMiddleware), NEVER_STORED),
        (langgraph_with(ComposingTwiceMiddleware), {"RUNTIME-ONE-COMPOSE-PER-TURN"}),
        (langgraph_with(SplittingMiddleware), {"RUNTIME-TOOL-PAIRS-INTACT"}),
    ],
    ids=[
        "external-persists-the-projection",
        "external-composes-twice-per-turn",
        "external-splits-a-tool-pair",
        "langgraph-persists-the-projection",
        "langgraph-composes-twice-per-turn",
        "langgraph-splits-a-tool-pair",
    ],
)
def test_the_kit_fails_a_broken_adapter_by_requirement_id(
    harness: Callable[[RuntimeKit], Any], broken: set[str], tmp_path: Any
) -> None:
    failed = _failures(harness, tmp_path)
    assert set(failed) == broken, failed
    for req_id, message in failed.items():
        assert message.startswith(f"[{req_id}] {requirement(req_id).sentence}\n"), message


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
