"""PROMPT-UNIQUE-NAME and CTX-UNIQUE-NAME ask one question through one helper
(``contextplane.testing.harness.check_registered_once``): was the duplicate check of the prompt
and context kits (duplicate-block report D2) made one without changing what either reports?

Why a direct test: the kit's own runs (test_section_kit.py) never register a name twice, so
neither kind's failure was exercised; here two plugins claim one name, for each kind.
"""

from __future__ import annotations

import pytest

from contextplane import ContextSection, Envelope, PromptSection, Row, Shed, hookimpl, plugin_host_with
from contextplane.testing import ConformanceFailure, requirement
from contextplane.testing.harness import check_registered_once


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
