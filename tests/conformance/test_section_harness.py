"""The prompt and context kits share their harness helpers (duplicate-block report D2): one
unique-name check (``check_registered_once``, PROMPT-UNIQUE-NAME and CTX-UNIQUE-NAME) and one
way to choose the section under test (``choose_section``), each saying exactly what it said as
two copies.

Why direct tests: the kit's own runs (test_section_kit.py) never register a name twice nor
leave the section to check ambiguous, so neither kind's failure was exercised.
"""

from __future__ import annotations

import pytest

from contextplane import ContextSection, Envelope, PromptSection, Row, Shed, hookimpl, plugin_host_with
from contextplane.testing import ConformanceFailure, KitUsageError, requirement
from contextplane.testing.harness import check_registered_once, choose_section


class _Both:
    """Registers one prompt and one context section, under names it is given."""

    def __init__(self, plugin_name: str, prompt: str, context: str) -> None:
        self.plugin_name = plugin_name
        self._prompt, self._context = prompt, context

    @hookimpl
    def register_prompt_sections(self, register: object) -> None:
        register(PromptSection(self._prompt, render=lambda _ctx: "text"))  # type: ignore[operator]

    @hookimpl
    def register_context_sections(self, register: object) -> None:
        section = ContextSection(
            self._context, priority=50, shed=Shed.DROP_ROWS, envelope=Envelope("working_state"),
            draft=lambda _r: [Row("a", 1, "x")],
        )  # fmt: skip
        register(section)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("kind", "req_id"), [("prompt", "PROMPT-UNIQUE-NAME"), ("context", "CTX-UNIQUE-NAME")]
)
def test_a_name_two_plugins_register_fails_naming_both(kind: str, req_id: str) -> None:
    host = plugin_host_with([_Both("first", "house", "tickets"), _Both("second", "house", "tickets")])
    name = "house" if kind == "prompt" else "tickets"
    with pytest.raises(ConformanceFailure) as failed:
        check_registered_once(requirement(req_id), kind, name, host)  # type: ignore[arg-type]
    assert str(failed.value).startswith(f"[{req_id}] ")
    assert f"{kind} section {name!r} is registered 2 times, by plugins 'first', 'second'; rename it" in str(
        failed.value
    )


@pytest.mark.parametrize(
    ("kind", "req_id"), [("prompt", "PROMPT-UNIQUE-NAME"), ("context", "CTX-UNIQUE-NAME")]
)
def test_a_name_one_plugin_registers_passes(kind: str, req_id: str) -> None:
    host = plugin_host_with([_Both("first", "house", "tickets"), _Both("second", "other", "queue")])
    check_registered_once(requirement(req_id), kind, "house" if kind == "prompt" else "tickets", host)  # type: ignore[arg-type]


def test_both_kits_ask_through_the_one_helper() -> None:
    import inspect

    from contextplane.testing import context_checks, prompt_checks

    for module in (prompt_checks, context_checks.drafts):
        source = inspect.getsource(module)
        assert "check_registered_once(requirement," in source, module.__name__
        assert "is registered {len(owners)} times" not in source, module.__name__
    for module in (prompt_checks, context_checks.base):
        source = inspect.getsource(module)
        assert "return choose_section(" in source, module.__name__
        assert "the one this class checks (write one class per section)" not in source, module.__name__


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


@pytest.mark.parametrize(("kind", "other"), [("prompt", "Context"), ("context", "Prompt")])
def test_choosing_among_no_sections_says_which_kit_to_use(kind: str, other: str) -> None:
    with pytest.raises(KitUsageError) as error:
        choose_section(kind, None, [])  # type: ignore[arg-type]
    assert str(error.value) == (
        f"the plugin registers no {kind} section; use {other}SectionConformance for a plugin that "
        f"only contributes {other.lower()} sections"
    )


@pytest.mark.parametrize("kind", ["prompt", "context"])
def test_choosing_among_several_needs_the_class_attribute(kind: str) -> None:
    mine = [_Named("a"), _Named("b")]
    with pytest.raises(KitUsageError) as error:
        choose_section(kind, None, mine)  # type: ignore[arg-type]
    assert str(error.value) == (
        f"the plugin registers several {kind} sections (a, b); set the class attribute {kind}_section "
        "to the one this class checks (write one class per section)"
    )
    assert choose_section(kind, "b", mine) is mine[1]  # type: ignore[arg-type]
    with pytest.raises(KitUsageError, match=rf"^{kind}_section = 'c', but the plugin registers only a, b$"):
        choose_section(kind, "c", mine)  # type: ignore[arg-type]
    assert choose_section(kind, None, mine[:1]) is mine[0]  # type: ignore[arg-type]
