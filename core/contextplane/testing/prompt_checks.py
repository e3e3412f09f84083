"""Conformance checks of prompt sections (ADR D3): rendering, naming, ordering, determinism, size.

Each check renders and orders through the functions a runtime calls (``resolve_order``) on a
private plugin host. A check method takes the fixtures it needs plus ``requirement``; the base
class parametrises ``requirement`` with the method's requirement id (see ``_base``).
"""

from __future__ import annotations

from typing import ClassVar

import attrs
import pytest

from contextplane.authority import resolve_order
from contextplane.config import Config
from contextplane.errors import ContextPlaneError
from contextplane.plugins import PluginHost
from contextplane.request import BuildContext
from contextplane.sections import PromptSection
from contextplane.testing._base import (
    KitUsageError,
    checks,
    required_fixture,
)
from contextplane.testing.harness import (
    Harness,
    Quiet,
    SectionPluginBase,
    check_registered_once,
    choose_section,
    describe_error,
    text_diff,
)
from contextplane.testing.requirements import Requirement


class PromptSectionHarness:
    """The one prompt section under test, rendered and ordered the way a runtime does it."""

    def __init__(self, harness: Harness, chosen: str | None) -> None:
        self.harness = harness
        self.chosen = chosen

    def section(self, config: Config, *, standard: bool = False) -> tuple[PromptSection, PluginHost]:
        host, name = self.harness.host(config, standard=standard)
        with Quiet():
            mine = [r.section for r in host.prompt_sections() if r.plugin == name]
        Harness._collect_failures(host, name)
        return choose_section("prompt", self.chosen, mine), host

    @staticmethod
    def render(section: PromptSection, ctx: BuildContext, req: Requirement) -> str:
        """Render, turning an exception or a non-str result into a failure of ``req``."""
        try:
            with Quiet():
                text = section.render(ctx)
        except Exception as exc:
            req.fail(f"render of prompt section {section.name!r} raised {describe_error(exc)}")
        if not isinstance(text, str):
            req.fail(f"render of prompt section {section.name!r} returned {type(text).__name__}, not str")
        return text


class PromptSectionChecks(SectionPluginBase):
    """Checks of one prompt section: rendering, naming, ordering, determinism, size."""

    #: The prompt section this class checks, when the plugin registers more than one.
    prompt_section: ClassVar[str | None] = None
    #: Declared upper bound on the rendered size for ``build_context``; None skips PROMPT-MAX-CHARS.
    prompt_max_chars: ClassVar[int | None] = None

    @pytest.fixture
    def build_context(self) -> BuildContext:
        """Return the ``BuildContext`` (config, bound tools) under which your prompt section renders
        its typical, non-empty text: e.g. ``BuildContext(config=my_config, tools=("deploy",))``."""
        raise required_fixture(self, "build_context", PromptSectionChecks.build_context.__doc__)

    @pytest.fixture
    def second_build_context(self, build_context: BuildContext) -> BuildContext:
        """Optional. A different build context, for PROMPT-NO-STATE-LEAK. Default: ``build_context``
        with one more bound tool and an extra marker, so a section that caches by accident shows it."""
        return attrs.evolve(
            build_context,
            tools=(*build_context.tools, "conformance_other_tool"),
            extra={**build_context.extra, "conformance": "second"},
        )

    @pytest.fixture
    def prompt(self, harness: Harness) -> PromptSectionHarness:
        """Internal: the prompt section under test."""
        return PromptSectionHarness(harness, type(self).prompt_section)

    def _rendered(self, prompt: PromptSectionHarness, ctx: BuildContext, req: Requirement) -> str:
        section, _host = prompt.section(ctx.config)
        text = prompt.render(section, ctx, req)
        if not text.strip():
            raise KitUsageError(
                f"prompt section {section.name!r} rendered empty text for build_context; return a build "
                "context under which it has something to say, or the checks prove nothing"
            )
        return text

    @checks("PROMPT-RENDERS")
    def test_prompt_renders(
        self, prompt: PromptSectionHarness, build_context: BuildContext, requirement: Requirement
    ) -> None:
        self._rendered(prompt, build_context, requirement)

    @checks("PROMPT-UNIQUE-NAME")
    def test_prompt_unique_name(
        self, prompt: PromptSectionHarness, build_context: BuildContext, requirement: Requirement
    ) -> None:
        section, host = prompt.section(build_context.config, standard=True)
        check_registered_once(requirement, "prompt", section.name, host)

    @checks("PROMPT-VALID-REFS")
    def test_prompt_valid_refs(
        self, prompt: PromptSectionHarness, build_context: BuildContext, requirement: Requirement
    ) -> None:
        section, host = prompt.section(build_context.config, standard=True)
        with Quiet():
            regs = host.prompt_sections()
        known = {r.section.name for r in regs}
        for kind, targets in (("after", section.after), ("before", section.before)):
            for target in targets:
                requirement.check(
                    target != section.name,
                    f"prompt section {section.name!r} declares {kind}={target!r}: itself",
                )
                requirement.check(
                    target in known,
                    f"prompt section {section.name!r} declares {kind}={target!r}, but no section of that "
                    f"name is registered (known: {', '.join(sorted(known))}); add the plugin that provides "
                    "it to companion_plugins or fix the name",
                )
        try:
            resolve_order(regs)
        except ContextPlaneError as exc:
            requirement.fail(f"the stable prefix cannot be ordered: {exc}")

    @checks("PROMPT-POSITION")
    def test_prompt_position(
        self, prompt: PromptSectionHarness, build_context: BuildContext, requirement: Requirement
    ) -> None:
        section, host = prompt.section(build_context.config, standard=True)
        with Quiet():
            regs = host.prompt_sections()
        try:
            order = [r.section.name for r in resolve_order(regs)]
        except ContextPlaneError as exc:
            requirement.fail(f"the stable prefix cannot be ordered: {exc}")
        at = order.index(section.name)
        for target in section.after:
            requirement.check(
                target in order and order.index(target) < at,
                f"{section.name!r} declares after={target!r} but the prefix order is {' > '.join(order)}",
            )
        for target in section.before:
            requirement.check(
                target in order and at < order.index(target),
                f"{section.name!r} declares before={target!r} but the prefix order is {' > '.join(order)}",
            )

    @checks("PROMPT-DETERMINISTIC")
    def test_prompt_deterministic(
        self, prompt: PromptSectionHarness, build_context: BuildContext, requirement: Requirement
    ) -> None:
        section, _host = prompt.section(build_context.config)
        first = prompt.render(section, build_context, requirement)
        second = prompt.render(section, build_context, requirement)
        requirement.check(first == second, text_diff("two renders in the same host differ", first, second))
        fresh, _ = prompt.section(build_context.config)
        third = prompt.render(fresh, build_context, requirement)
        requirement.check(first == third, text_diff("a render in a fresh host differs", first, third))

    @checks("PROMPT-NO-STATE-LEAK")
    def test_prompt_no_state_leak(
        self,
        prompt: PromptSectionHarness,
        build_context: BuildContext,
        second_build_context: BuildContext,
        requirement: Requirement,
    ) -> None:
        section, _host = prompt.section(build_context.config)
        a1 = prompt.render(section, build_context, requirement)
        b1 = prompt.render(section, second_build_context, requirement)
        a2 = prompt.render(section, build_context, requirement)
        requirement.check(a1 == a2, text_diff("rendering for another build context changed this one", a1, a2))
        fresh, _ = prompt.section(second_build_context.config)
        b0 = prompt.render(fresh, second_build_context, requirement)
        requirement.check(
            b0 == b1, text_diff("the second build context renders differently after the first one", b0, b1)
        )

    @checks("PROMPT-MAX-CHARS")
    def test_prompt_max_chars(
        self, prompt: PromptSectionHarness, build_context: BuildContext, requirement: Requirement
    ) -> None:
        limit = type(self).prompt_max_chars
        self.require_capability(requirement, limit is not None, "set the class attribute prompt_max_chars")
        assert limit is not None
        text = self._rendered(prompt, build_context, requirement)
        requirement.check(
            len(text.strip("\n")) <= limit,
            f"rendered {len(text.strip(chr(10)))} chars, over the declared prompt_max_chars = {limit}",
        )
