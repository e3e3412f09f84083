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

from contextplane.testing import ConformanceFailure, RuntimeConformance, RuntimeKit, requirement
from tests.conformance.runtime_harnesses import (
    ComposingTwiceHarness,
    ExternalHarness,
    LangGraphHarness,
    PersistingHarness,
    SplittingHarness,
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


@pytest.mark.parametrize(
    ("harness", "broken"),
    [
        (PersistingHarness, {"RUNTIME-NEVER-STORED", "RUNTIME-INCOGNITO-WRITES-NOTHING"}),
        (ComposingTwiceHarness, {"RUNTIME-ONE-COMPOSE-PER-TURN", "RUNTIME-ONE-INJECTION-ROW"}),
        (SplittingHarness, {"RUNTIME-TOOL-PAIRS-INTACT"}),
    ],
    ids=["persists-the-projection", "composes-twice-per-turn", "splits-a-tool-pair"],
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
