"""One request in: the request is immutable all the way down, and the mode rules are derived
from it in one place, so every flag combination calls exactly the providers the ADR allows and
records only what it allows (issue 9)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from contextplane import (
    ContextSection,
    Envelope,
    ProjectionRequest,
    Row,
    Shed,
    Surface,
    compose,
    compose_projected_context,
    hookimpl,
)
from contextplane.config import Config
from contextplane.request import FrozenDict, deep_freeze, thaw
from contextplane.subagents import SubagentContract, compose_subagent_context
from contextplane.testing.memory import InMemoryBackend

from .helpers import host_of

ENV = Envelope("probe")


class Probe:
    """Four sections shaped like the standard ones: working state, always-on memory, skills,
    digest (memory, goal-suppressed), each recording that it was called."""

    plugin_name = "probe"

    def __init__(self) -> None:
        self.called: list[str] = []

    @hookimpl
    def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
        def make(name: str) -> Callable[[Any], list[Row]]:
            def draft(request: Any) -> list[Row]:
                self.called.append(name)
                return [Row(f"{name}-1", 1, f"{name} row")]

            return draft

        register(ContextSection("working", 10, Shed.NEVER, make("working"), ENV))
        register(ContextSection("always", 20, Shed.NEVER, make("always"), ENV, carries_memory=True))
        register(ContextSection("skills", 30, Shed.DROP_ROWS, make("skills"), ENV))
        register(
            ContextSection(
                "digest", 40, Shed.DROP_ROWS, make("digest"), ENV, carries_memory=True, goal_suppressed=True
            )
        )


# (flags, subagent subset, the sections the ADR allows to be called, the injection rows written)
CASES = [
    ({}, None, ["working", "always", "skills", "digest"], 1),
    ({"incognito": True}, None, ["working", "skills"], 0),
    ({"goal_turn": True}, None, ["working", "always", "skills"], 1),
    ({"incognito": True, "goal_turn": True}, None, ["working", "skills"], 0),
    ({}, ("skills", "digest"), ["skills", "digest"], 1),
    ({"incognito": True}, ("skills", "digest"), ["skills"], 0),
    ({"goal_turn": True}, ("skills", "digest"), ["skills"], 1),
]


@pytest.mark.parametrize(("flags", "subset", "allowed", "rows"), CASES)
def test_each_flag_combination_calls_exactly_the_allowed_providers(
    flags: dict[str, bool], subset: tuple[str, ...] | None, allowed: list[str], rows: int
) -> None:
    probe = Probe()
    host = host_of(probe)
    backend = InMemoryBackend()
    request = ProjectionRequest(query="q", config=Config(), session_id="s", backend=backend, **flags)
    if subset is None:
        p = compose(request, host=host)
    else:
        sub = compose_subagent_context(SubagentContract("helper", sections=subset), request, host=host)
        assert sub is not None
        p = sub
        assert p.surface is Surface.SUBAGENT
    assert probe.called == allowed
    assert sorted(p.delivered_ids) == sorted(allowed)
    assert len(backend.injections.rows("s")) == rows
    expected_why = {
        name: (
            "not_selected"
            if subset is not None and name not in subset
            else "incognito"
            if flags.get("incognito") and name in ("always", "digest")
            else "goal_turn"
            if flags.get("goal_turn") and name == "digest"
            else None
        )
        for name in ("working", "always", "skills", "digest")
    }
    assert {s.name: s.suppressed for s in p.sections} == expected_why
    # The label is derived, never passed: incognito wins, then goal turn, then the surface.
    label = "incognito" if flags.get("incognito") else "goal_turn" if flags.get("goal_turn") else None
    assert p.mode == (label or ("subagent" if subset is not None else "native"))
    if rows:
        assert backend.injections.rows("s")[0].mode == p.mode


def test_incognito_is_one_flag_not_a_mode_that_can_disagree_with_it() -> None:
    """The fault: ``mode=Mode.INCOGNITO`` alone delivered memory and logged a row. Now there is
    one way to say incognito, and an external incognito goal turn is one legal request."""
    probe = Probe()
    backend = InMemoryBackend()
    p = compose_projected_context(
        "q", backend, surface="external", incognito=True, goal_turn=True, host=host_of(probe), session_id="s"
    )
    assert probe.called == ["working", "skills"] and p.surface is Surface.EXTERNAL
    assert backend.injections.rows() == [] and p.injection is None
    with pytest.raises(TypeError):
        compose_projected_context("q", mode="incognito")  # type: ignore[call-arg]


def test_a_provider_that_mutates_the_state_cannot_change_what_the_next_one_sees() -> None:
    seen: list[Any] = []

    class Vandal:
        plugin_name = "vandal"

        @hookimpl
        def register_context_sections(self, register: Callable[[ContextSection], None]) -> None:
            def first(request: Any) -> list[Row]:
                attempts = [
                    lambda: request.state.__setitem__("goal", "hijacked"),
                    lambda: request.state["tasks"].append("rm -rf /"),
                    lambda: request.state["plan"]["steps"].append("evil"),
                    lambda: request.state["plan"].update(owner="mallory"),
                    lambda: request.extra.__setitem__("reason", "hijacked"),
                    lambda: setattr(request, "query", "hijacked"),
                    lambda: request.state["tags"].add("evil"),
                ]
                failures = 0
                for attempt in attempts:
                    try:
                        attempt()
                    except (TypeError, AttributeError, attrs.exceptions.FrozenInstanceError):
                        failures += 1
                seen.append(("first", failures))
                return [Row("a", 1, "a")]

            def second(request: Any) -> list[Row]:
                seen.append(("second", thaw(request.state), dict(request.extra), request.query))
                return [Row("b", 1, "b")]

            register(ContextSection("first", 10, Shed.NEVER, first, ENV))
            register(ContextSection("second", 20, Shed.NEVER, second, ENV))

    state = {"goal": "Ship", "tasks": ["Ask Priya"], "plan": {"steps": ["freeze"]}, "tags": {"x"}}
    compose_projected_context("q", None, None, state, host=host_of(Vandal()), extra={"reason": "turn"})
    assert seen[0] == ("first", 7)  # every mutation was refused
    assert seen[1] == (
        "second",
        {"goal": "Ship", "tasks": ["Ask Priya"], "plan": {"steps": ["freeze"]}, "tags": {"x"}},
        {"reason": "turn"},
        "q",
    )
    assert state == {"goal": "Ship", "tasks": ["Ask Priya"], "plan": {"steps": ["freeze"]}, "tags": {"x"}}


def test_deep_freeze_round_trip() -> None:
    value = {"a": [1, {"b": (2, 3)}], "c": {"d"}}
    frozen = deep_freeze(value)
    assert isinstance(frozen, FrozenDict) and isinstance(frozen["a"], tuple)
    assert isinstance(frozen["a"][1], FrozenDict) and frozen == {
        "a": (1, {"b": (2, 3)}),
        "c": frozenset({"d"}),
    }
    assert thaw(frozen) == {"a": [1, {"b": [2, 3]}], "c": {"d"}}
    assert hash(deep_freeze({"x": [1, 2]})) == hash(deep_freeze({"x": (1, 2)}))


def test_subagent_request_carries_every_field_of_the_turn() -> None:
    """The fault: the subagent path dropped context_window, project and config."""
    from contextplane.subagents import subagent_request

    cfg = Config()
    turn = ProjectionRequest(
        query="q", config=cfg, session_id="s", project="web", context_window=32_000, goal_turn=True
    )
    sub = subagent_request(SubagentContract("helper", sections=("skills",), budget_tokens=500), turn)
    assert (sub.config, sub.project, sub.context_window, sub.goal_turn, sub.session_id) == (
        cfg,
        "web",
        32_000,
        True,
        "s",
    )
    assert (
        sub.surface is Surface.SUBAGENT
        and sub.only_sections == frozenset({"skills"})
        and sub.budget_tokens == 500
    )
