"""Conformance checks for section plugins: prompt sections (ADR D3) and context sections (D6).

Each check composes through the public functions a runtime calls (``compose_projected_context``,
``resolve_order``) on a private plugin host, so a plugin passes the kit exactly when it
behaves in a real turn. The standard sections the kit checks names and envelopes against are
the ``contextplane`` entry points of the ``contextplane`` distribution itself.

A check method takes the fixtures it needs plus ``requirement``; the base class parametrises
``requirement`` with the method's requirement id (see ``_base``).
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import math
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar

import attrs
import pytest

from contextplane.authority import resolve_order
from contextplane.config import Config
from contextplane.errors import ContextPlaneError
from contextplane.fitting import format_row
from contextplane.notices import ContextPlaneWarning
from contextplane.plugins import ENTRY_POINT_GROUP, PluginHost
from contextplane.projection import ProjectedContext, SectionReport, compose_projected_context
from contextplane.request import BuildContext
from contextplane.sections import ContextSection, Draft, PromptSection, Row, Shed
from contextplane.testing._base import (
    ConformanceBase,
    KitUsageError,
    PluginNotLoadable,
    checks,
    required_fixture,
)
from contextplane.testing.inputs import PAYLOAD_MARKER, SectionInput, hostile_payload
from contextplane.testing.requirements import Requirement

_ROLE_AT_LINE_START = re.compile(r"^(?:system|assistant|user|human|developer|tool)\s*:", re.I | re.M)
_INSTRUCTION_TOKEN = re.compile(r"\[/?(?:INST|SYS|SYSTEM|ASSISTANT|USER)\]", re.I)
_TAG = re.compile(r"<[^<>]*>")


@functools.cache
def standard_plugins() -> tuple[tuple[str, object], ...]:
    """The standard sections: ``contextplane`` entry points shipped by the contextplane
    distribution itself (name, plugin object), loaded once per process."""
    found: list[tuple[str, object]] = []
    for ep in sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = ep.dist.name if ep.dist is not None else ""
        if dist.replace("_", "-").lower() != "contextplane":
            continue
        try:
            found.append((ep.name, ep.load()))
        except Exception:  # a broken standard plugin is the core suite's business, not the kit's
            continue
    return tuple(found)


class _Quiet:
    def __enter__(self) -> None:
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", ContextPlaneWarning)

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(None, None, None)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Harness:
    """One plugin under test on private hosts: with only its companions, or beside the standard
    sections. Every host is new, so a check never sees state another check left in a host."""

    def __init__(self, plugin: object, companions: Sequence[object] = ()) -> None:
        self.plugin = plugin
        self.companions = tuple(companions)

    def host(self, config: Config, *, standard: bool = False) -> tuple[PluginHost, str]:
        """A fresh host and the name the plugin was registered under."""
        host = PluginHost(config, strict=False)
        if standard:
            mine = (self.plugin, *self.companions)
            for ep_name, obj in standard_plugins():
                if not any(obj is m for m in mine):
                    host.register(obj, ep_name)
        for companion in self.companions:
            if host.register(companion) is None:
                raise PluginNotLoadable(
                    "a companion plugin could not be registered: " + host.failures[-1].describe()
                )
        name = host.register(self.plugin)
        if name is None:
            raise PluginNotLoadable(
                "the plugin under test could not be registered: " + host.failures[-1].describe()
            )
        return host, name

    @staticmethod
    def _collect_failures(host: PluginHost, name: str) -> None:
        for failure in host.failures:
            if failure.plugin == name:
                raise PluginNotLoadable(
                    f"the plugin under test failed to register its sections: {failure.describe()}"
                )


class _SectionPluginBase(ConformanceBase):
    """Fixtures every section plugin supplies."""

    @pytest.fixture
    def plugin(self) -> object:
        """Return the plugin object exactly as your ``contextplane`` entry point loads it: usually
        your module (``import my_plugin; return my_plugin``), or the instance your entry point
        names. It must implement ``register_prompt_sections`` and/or ``register_context_sections``."""
        raise required_fixture(self, "plugin", _SectionPluginBase.plugin.__doc__)

    @pytest.fixture
    def companion_plugins(self) -> Sequence[object]:
        """Optional. Return other plugins your plugin needs beside the standard sections (for
        example the plugin that provides a section your ``after`` names). Default: none."""
        return ()

    @pytest.fixture
    def harness(self, plugin: object, companion_plugins: Sequence[object]) -> Harness:
        """Internal: the plugin under test on private hosts."""
        return Harness(plugin, companion_plugins)


# --------------------------------------------------------------------------- prompt sections


class PromptSectionHarness:
    """The one prompt section under test, rendered and ordered the way a runtime does it."""

    def __init__(self, harness: Harness, chosen: str | None) -> None:
        self.harness = harness
        self.chosen = chosen

    def section(self, config: Config, *, standard: bool = False) -> tuple[PromptSection, PluginHost]:
        host, name = self.harness.host(config, standard=standard)
        with _Quiet():
            mine = [r.section for r in host.prompt_sections() if r.plugin == name]
        Harness._collect_failures(host, name)
        if not mine:
            raise KitUsageError(
                "the plugin registers no prompt section; use ContextSectionConformance for a plugin "
                "that only contributes context sections"
            )
        if self.chosen is None:
            if len(mine) > 1:
                raise KitUsageError(
                    "the plugin registers several prompt sections "
                    f"({', '.join(s.name for s in mine)}); set the class attribute prompt_section to "
                    "the one this class checks (write one class per section)"
                )
            return mine[0], host
        for s in mine:
            if s.name == self.chosen:
                return s, host
        raise KitUsageError(
            f"prompt_section = {self.chosen!r}, but the plugin registers only "
            f"{', '.join(s.name for s in mine)}"
        )

    @staticmethod
    def render(section: PromptSection, ctx: BuildContext, req: Requirement) -> str:
        """Render, turning an exception or a non-str result into a failure of ``req``."""
        try:
            with _Quiet():
                text = section.render(ctx)
        except Exception as exc:
            req.fail(f"render of prompt section {section.name!r} raised {_describe(exc)}")
        if not isinstance(text, str):
            req.fail(f"render of prompt section {section.name!r} returned {type(text).__name__}, not str")
        return text


class PromptSectionChecks(_SectionPluginBase):
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
        with _Quiet():
            regs = host.prompt_sections()
        owners = [r.plugin for r in regs if r.section.name == section.name]
        requirement.check(
            len(owners) == 1,
            f"prompt section {section.name!r} is registered {len(owners)} times, by plugins "
            f"{', '.join(repr(o) for o in owners)}; rename it",
        )

    @checks("PROMPT-VALID-REFS")
    def test_prompt_valid_refs(
        self, prompt: PromptSectionHarness, build_context: BuildContext, requirement: Requirement
    ) -> None:
        section, host = prompt.section(build_context.config, standard=True)
        with _Quiet():
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
        with _Quiet():
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
        requirement.check(first == second, _diff("two renders in the same host differ", first, second))
        fresh, _ = prompt.section(build_context.config)
        third = prompt.render(fresh, build_context, requirement)
        requirement.check(first == third, _diff("a render in a fresh host differs", first, third))

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
        requirement.check(a1 == a2, _diff("rendering for another build context changed this one", a1, a2))
        fresh, _ = prompt.section(second_build_context.config)
        b0 = prompt.render(fresh, second_build_context, requirement)
        requirement.check(
            b0 == b1, _diff("the second build context renders differently after the first one", b0, b1)
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


def _diff(what: str, a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            lo = max(0, i - 30)
            return f"{what}: first difference at char {i}: {a[lo : i + 30]!r} vs {b[lo : i + 30]!r}"
    return f"{what}: lengths {len(a)} vs {len(b)}"


# --------------------------------------------------------------------------- context sections


class SpyStore:
    """Stands in for the knowledge store of a section that says it carries no memory: every
    attribute read is recorded, then forwarded (or refused when there is no store)."""

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "touched", [])

    def __getattr__(self, name: str) -> Any:
        self.touched.append(name)
        inner = object.__getattribute__(self, "_inner")
        if inner is None:
            raise AttributeError(f"conformance spy store: no store behind it ({name!r} was read)")
        return getattr(inner, name)


def _rows_of(result: Any) -> tuple[Row, ...]:
    if isinstance(result, Draft):
        return result.rows
    if isinstance(result, Iterable) and not isinstance(result, str | bytes):
        return tuple(result)
    raise TypeError(f"draft returned {type(result).__name__}; expected a Draft or an iterable of Row")


class ContextSectionHarness:
    """The one context section under test, drafted and composed the way a runtime does it."""

    def __init__(self, harness: Harness, chosen: str | None) -> None:
        self.harness = harness
        self.chosen = chosen

    def section(self, config: Config, *, standard: bool = False) -> tuple[ContextSection, PluginHost]:
        host, name = self.harness.host(config, standard=standard)
        with _Quiet():
            mine = [r.section for r in host.context_sections() if r.plugin == name]
        Harness._collect_failures(host, name)
        if not mine:
            raise KitUsageError(
                "the plugin registers no context section; use PromptSectionConformance for a plugin "
                "that only contributes prompt sections"
            )
        if self.chosen is None:
            if len(mine) > 1:
                raise KitUsageError(
                    "the plugin registers several context sections "
                    f"({', '.join(s.name for s in mine)}); set the class attribute context_section to "
                    "the one this class checks (write one class per section)"
                )
            return mine[0], host
        for s in mine:
            if s.name == self.chosen:
                return s, host
        raise KitUsageError(
            f"context_section = {self.chosen!r}, but the plugin registers only "
            f"{', '.join(s.name for s in mine)}"
        )

    def draft(
        self, section: ContextSection, inp: SectionInput, req: Requirement, *, store: Any = ...
    ) -> tuple[Row, ...]:
        """Call ``draft`` directly; an exception or a wrong result type fails ``req``."""
        request = inp.request()
        if store is not ...:
            request = attrs.evolve(request, knowledge_store=store)
        try:
            with _Quiet():
                return _rows_of(section.draft(request))
        except Exception as exc:
            req.fail(f"draft of context section {section.name!r} raised {_describe(exc)}")

    def compose(
        self,
        inp: SectionInput,
        *,
        host: PluginHost | None = None,
        budget_tokens: int = 0,
        incognito: bool = False,
        store: Any = ...,
    ) -> ProjectedContext:
        """Compose with the plugin and its companions only (0 tokens = unbounded)."""
        if host is None:
            host, _ = self.harness.host(inp.config)
        kwargs = inp.compose_kwargs()
        if store is not ...:
            kwargs["knowledge_store"] = store
        with _Quiet():
            return compose_projected_context(
                **kwargs,
                host=host,
                budget_tokens=budget_tokens,
                incognito=incognito,
                record=False,
                strict=False,
            )

    @staticmethod
    def report(projection: ProjectedContext, section: ContextSection, req: Requirement) -> SectionReport:
        found = projection.section(section.name)
        if found is None:
            req.fail(f"context section {section.name!r} is missing from the projection's reports")
        if found.error:
            req.fail(f"context section {section.name!r} failed while composing: {found.error}")
        return found


class _ContextSectionBase(_SectionPluginBase):
    """Fixtures of one context section under test."""

    #: The context section this class checks, when the plugin registers more than one.
    context_section: ClassVar[str | None] = None

    @pytest.fixture
    def section_input(self) -> SectionInput:
        """Return a ``contextplane.testing.SectionInput`` under which your section drafts at least
        two rows with different ranks: its query, knowledge store, state, skills index, config (the
        one your plugin is registered with, e.g. ``[plugin.<name>]`` pointing at test data) and
        extra. The kit composes it many times, so it must be reusable (no one-shot iterators)."""
        raise required_fixture(self, "section_input", _ContextSectionBase.section_input.__doc__)

    @pytest.fixture
    def hostile_input(self) -> Callable[[str], SectionInput]:
        """Return a function that takes a hostile text and returns a ``SectionInput`` under which
        that text reaches every piece of data your section shows the model: row text, short forms,
        and anything else you build from data (a heading, a marker). The kit calls it with text
        that tries to close envelopes, forge tags and inject role markers."""
        raise required_fixture(self, "hostile_input", _ContextSectionBase.hostile_input.__doc__)

    @pytest.fixture
    def second_session_input(self, section_input: SectionInput) -> SectionInput:
        """Optional. The input of a second session of the same runtime, for CTX-SESSION-ISOLATION:
        a different ``session_id``, the same ``config``, and whatever else differs between two
        sessions (project, state, query, store contents). When it differs in more than the session
        id, your section must deliver something different for it, so a leak of the first
        session's rows shows. Default: ``section_input`` with another session id."""
        return attrs.evolve(section_input, session_id=section_input.session_id + "-other")

    @pytest.fixture
    def context(self, harness: Harness) -> ContextSectionHarness:
        """Internal: the context section under test."""
        return ContextSectionHarness(harness, type(self).context_section)

    def _sample_rows(
        self, context: ContextSectionHarness, inp: SectionInput, req: Requirement
    ) -> tuple[ContextSection, tuple[Row, ...]]:
        section, _host = context.section(inp.config)
        rows = context.draft(section, inp, req)
        if len(rows) < 2:
            raise KitUsageError(
                f"section_input gives context section {section.name!r} {len(rows)} row(s); return an "
                "input under which it drafts at least two, or shedding and ordering cannot be checked"
            )
        return section, rows


class ContextDraftChecks(_ContextSectionBase):
    """What one draft is: valid, uniquely named, consistently enveloped, with ids and ranks,
    and the same for the same request."""

    @checks("CTX-DRAFT-VALID")
    def test_context_draft_valid(
        self, context: ContextSectionHarness, section_input: SectionInput, requirement: Requirement
    ) -> None:
        section, _host = context.section(section_input.config)
        started = time.perf_counter()
        try:
            with _Quiet():
                result = section.draft(section_input.request())
        except Exception as exc:
            requirement.fail(f"draft raised {_describe(exc)}")
        elapsed = time.perf_counter() - started
        if not isinstance(result, Draft):
            requirement.check(
                isinstance(result, Iterable) and not isinstance(result, str | bytes | dict),
                f"draft returned {type(result).__name__}; expected a Draft or an iterable of Row",
            )
        rows = _rows_of(result)
        for i, row in enumerate(rows):
            requirement.check(
                isinstance(row, Row), f"draft returned {type(row).__name__} at position {i}; expected Row"
            )
        limit_ms = section_input.config.context.provider_timeout_ms
        requirement.check(
            not limit_ms or elapsed * 1000 <= limit_ms,
            f"draft took {elapsed * 1000:.0f} ms, over context.provider_timeout_ms = {limit_ms}",
        )
        projection = context.compose(section_input)
        context.report(projection, section, requirement)

    @checks("CTX-UNIQUE-NAME")
    def test_context_unique_name(
        self, context: ContextSectionHarness, section_input: SectionInput, requirement: Requirement
    ) -> None:
        section, host = context.section(section_input.config, standard=True)
        with _Quiet():
            regs = host.context_sections()
        owners = [r.plugin for r in regs if r.section.name == section.name]
        requirement.check(
            len(owners) == 1,
            f"context section {section.name!r} is registered {len(owners)} times, by plugins "
            f"{', '.join(repr(o) for o in owners)}; rename it",
        )

    @checks("CTX-ENVELOPE-CONSISTENT")
    def test_context_envelope_consistent(
        self, context: ContextSectionHarness, section_input: SectionInput, requirement: Requirement
    ) -> None:
        section, host = context.section(section_input.config, standard=True)
        with _Quiet():
            regs = host.context_sections()
        for other in regs:
            if other.section.name == section.name or other.section.envelope.tag != section.envelope.tag:
                continue
            requirement.check(
                other.section.envelope == section.envelope,
                f"context section {section.name!r} declares {section.envelope!r}, but section "
                f"{other.section.name!r} (plugin {other.plugin!r}) declares {other.section.envelope!r} "
                "for the same tag; import and reuse that Envelope object",
            )
        try:
            projection = context.compose(section_input, host=host)
        except ContextPlaneError as exc:
            requirement.fail(f"the section does not compose beside the standard sections: {exc}")
        context.report(projection, section, requirement)

    @checks("CTX-ROW-IDS-RANKS")
    def test_context_row_ids_ranks(
        self, context: ContextSectionHarness, section_input: SectionInput, requirement: Requirement
    ) -> None:
        _section, rows = self._sample_rows(context, section_input, requirement)
        seen: set[str] = set()
        for row in rows:
            requirement.check(row.id.strip(), f"a row has an empty id (text {row.text[:40]!r})")
            requirement.check(row.id not in seen, f"row id {row.id!r} appears twice in one draft")
            seen.add(row.id)
            requirement.check(
                isinstance(row.rank, int | float) and math.isfinite(row.rank),
                f"row {row.id!r} has rank {row.rank!r}; ranks must be finite numbers",
            )

    @checks("CTX-DETERMINISTIC")
    def test_context_deterministic(
        self, context: ContextSectionHarness, section_input: SectionInput, requirement: Requirement
    ) -> None:
        section, rows = self._sample_rows(context, section_input, requirement)
        again = context.draft(section, section_input, requirement)
        requirement.check(rows == again, _row_diff("two drafts for one request differ", rows, again))
        fresh, _ = context.section(section_input.config)
        third = context.draft(fresh, section_input, requirement)
        requirement.check(rows == third, _row_diff("a draft in a fresh host differs", rows, third))
        first_text = context.compose(section_input).text
        second_text = context.compose(section_input).text
        requirement.check(
            first_text == second_text, _diff("two compositions differ", first_text, second_text)
        )


class ContextBudgetChecks(_ContextSectionBase):
    """How the section behaves under the D6 budget: its declared shed behaviour and size."""

    @checks("CTX-SHED-ORDER")
    def test_context_shed_order(
        self, context: ContextSectionHarness, section_input: SectionInput, requirement: Requirement
    ) -> None:
        section, rows = self._sample_rows(context, section_input, requirement)
        position = {row.id: i for i, row in enumerate(rows)}
        rank = {row.id: row.rank for row in rows}
        all_ids = set(position)
        host, _ = context.harness.host(section_input.config)
        full = context.compose(section_input, host=host)
        size = full.used_chars
        if section.shed is Shed.DEGRADE and not any(
            r.short is not None and len(r.short) < len(r.text) for r in rows
        ):
            requirement.fail(
                f"{section.name!r} declares Shed.DEGRADE, but no row has a short form shorter than its "
                "text, so under pressure it can only drop rows: give rows a `short` or declare DROP_ROWS"
            )
        # How much each row has given up: 0 shown in full, 1 shown in its short form, 2 shed.
        full_lines = {row.id: format_row(row.text) for row in rows}
        previous = dict.fromkeys(position, 0)
        word = ("in full", "in short form", "shed")
        for tokens in _budgets(size):
            budget = tokens * 4
            projection = context.compose(section_input, host=host, budget_tokens=tokens)
            kept_ids = context.report(projection, section, requirement).item_ids
            kept = set(kept_ids)
            where = f"at a budget of {budget} chars (full size {size})"
            requirement.check(
                kept <= all_ids,
                f"{where} the section delivered ids its draft does not have: {kept - all_ids}",
            )
            level = {
                rid: 2 if rid not in kept else 0 if full_lines[rid] in projection.text else 1
                for rid in position
            }
            if section.shed is Shed.NEVER:
                requirement.check(kept == all_ids, f"{where} a never-shed section lost {all_ids - kept}")
                continue
            if section.shed is Shed.DROP_SECTION:
                requirement.check(
                    kept in (all_ids, set()), f"{where} a DROP_SECTION section kept only part: {sorted(kept)}"
                )
            for first in position:
                for later in position:
                    if (
                        position[first] < position[later]
                        and rank[first] != rank[later]
                        and level[first] > level[later]
                    ):
                        requirement.fail(
                            f"{where} row {first!r} (listed {position[first] + 1} of {len(rows)}, rank "
                            f"{rank[first]}) is {word[level[first]]} while row {later!r} (listed "
                            f"{position[later] + 1}, rank {rank[later]}) is {word[level[later]]}: list rows "
                            "most important first and give the first rank 1, so the rows listed last "
                            "give up space first"
                        )
            if section.shed is Shed.DEGRADE:
                floor = min(section.floor, len(rows))
                requirement.check(
                    len(kept) >= floor, f"{where} {len(kept)} rows are left, under the floor of {floor}"
                )
                steps = [s.action for s in projection.overflow if s.section == section.name]
                if "drop_to_floor" in steps:
                    requirement.check(
                        "degrade_row" in steps
                        or not any(r.short is not None and len(r.short) < len(r.text) for r in rows),
                        f"{where} rows were dropped before any was shortened to its short form",
                    )
            for rid in position:
                requirement.check(
                    level[rid] >= previous[rid],
                    f"{where} row {rid!r} is {word[level[rid]]}, but a larger budget had it "
                    f"{word[previous[rid]]}",
                )
            previous = level
            if not projection.warnings:
                requirement.check(
                    projection.used_chars <= budget,
                    f"{where} the projection used {projection.used_chars} chars with nothing left to shed "
                    "reported",
                )

    @checks("CTX-MAX-CHARS")
    def test_context_max_chars(
        self, context: ContextSectionHarness, section_input: SectionInput, requirement: Requirement
    ) -> None:
        section, _ = context.section(section_input.config)
        self.require_capability(requirement, section.max_chars is not None, "set ContextSection.max_chars")
        assert section.max_chars is not None
        report = context.report(context.compose(section_input), section, requirement)
        requirement.check(
            report.chars <= section.max_chars,
            f"{section.name!r} rendered {report.chars} chars, over its declared max_chars = "
            f"{section.max_chars}",
        )


class ContextIsolationChecks(_ContextSectionBase):
    """What must never cross a boundary: memory into incognito, data out of its envelope, one
    session's rows into another's."""

    @checks("CTX-MEMORY-FLAG")
    def test_context_memory_flag(
        self, context: ContextSectionHarness, section_input: SectionInput, requirement: Requirement
    ) -> None:
        section, _host = context.section(section_input.config)
        if section.carries_memory:
            projection = context.compose(section_input, incognito=True)
            found = projection.section(section.name)
            requirement.check(
                found is not None and found.suppressed == "incognito" and not found.item_ids,
                f"{section.name!r} carries memory but delivered {found.item_ids if found else ()} under "
                "incognito",
            )
            return
        spy = SpyStore(section_input.knowledge_store)
        context.compose(section_input, store=spy)
        requirement.check(
            not spy.touched,
            f"{section.name!r} declares carries_memory=False but its draft read knowledge_store."
            f"{', knowledge_store.'.join(dict.fromkeys(spy.touched))}; an incognito turn would still "
            "deliver memory: declare carries_memory=True",
        )

    @checks("CTX-NO-BREAKOUT")
    def test_context_no_breakout(
        self,
        context: ContextSectionHarness,
        hostile_input: Callable[[str], SectionInput],
        section_input: SectionInput,
        requirement: Requirement,
    ) -> None:
        section, _host = context.section(section_input.config)
        tags = [section.envelope.tag] + ([section.inner_tag] if section.inner_tag else [])
        inp = hostile_input(hostile_payload(tags))
        # The hostile input may change the config (and so the registered section): use its host.
        section, host = context.section(inp.config)
        projection = context.compose(inp, host=host)
        report = context.report(projection, section, requirement)
        text = projection.text
        if not report.item_ids or PAYLOAD_MARKER not in text:
            raise KitUsageError(
                "hostile_input's text never reached the composed projection "
                f"(rows delivered: {len(report.item_ids)}); return an input that puts the given text into "
                "your section's rows, or this check proves nothing"
            )
        expected: Counter[str] = Counter()
        by_name = {r.section.name: r.section for r in host.context_sections()}
        for rep in projection.sections:
            sec = by_name.get(rep.name)
            if sec is None or not rep.chars:
                continue
            expected[f"<{sec.envelope.tag}>"] = 1
            expected[f"</{sec.envelope.tag}>"] = 1
            if sec.inner_tag:
                expected[f"<{sec.inner_tag}>"] += 1
                expected[f"</{sec.inner_tag}>"] += 1
        found = Counter(_TAG.findall(text))
        extra = found - expected
        requirement.check(
            not extra and found == expected and text.count("<") == sum(expected.values()),
            f"tags in the composed text that the layout did not put there: {sorted(extra)} "
            f"(expected exactly {sorted(expected)}); data reached trusted text (a heading, marker or "
            f"envelope built from data) unescaped. Composed text:\n{text}",
        )
        role = _ROLE_AT_LINE_START.search(text)
        requirement.check(
            role is None,
            f"a line of the composed text starts with the role marker {role.group(0) if role else ''!r}",
        )
        token = _INSTRUCTION_TOKEN.search(text)
        requirement.check(
            token is None,
            f"the composed text carries the chat-template token {token.group(0) if token else ''!r}",
        )

    @checks("CTX-SESSION-ISOLATION")
    def test_context_session_isolation(
        self,
        context: ContextSectionHarness,
        section_input: SectionInput,
        second_session_input: SectionInput,
        requirement: Requirement,
    ) -> None:
        if section_input.session_id == second_session_input.session_id:
            raise KitUsageError("second_session_input must use a different session_id from section_input")
        if second_session_input.config != section_input.config:
            raise KitUsageError(
                "second_session_input must use section_input's config: two sessions of one runtime share "
                "their configuration (vary the project, state, query or store contents instead)"
            )
        section, _ = context.section(section_input.config)
        host, _ = context.harness.host(section_input.config)
        a_name, b_name = section_input.session_id, second_session_input.session_id

        def seen(p: ProjectedContext) -> tuple[tuple[str, ...], str | None]:
            r = context.report(p, section, requirement)
            return r.item_ids, r.sha256

        a1 = seen(context.compose(section_input, host=host))
        b1 = seen(context.compose(second_session_input, host=host))
        a2 = seen(context.compose(section_input, host=host))
        requirement.check(
            a1 == a2,
            f"session {a_name!r} delivered {a1[0]} first and {a2[0]} after session {b_name!r} ran in "
            "between (same ids means the text changed)",
        )
        differs = attrs.evolve(second_session_input, session_id=a_name) != section_input
        requirement.check(
            not differs or a1 != b1,
            f"session {b_name!r} delivered exactly what session {a_name!r} did ({a1[0]}), though its input "
            "differs in more than the session id: the first session's rows leaked into the second (or "
            "second_session_input makes no difference to this section; make it one that does)",
        )
        b0 = seen(context.compose(second_session_input, host=context.harness.host(section_input.config)[0]))
        requirement.check(
            b0 == b1,
            f"session {b_name!r} delivered {b0[0]} in a fresh host but {b1[0]} after session {a_name!r} "
            "(same ids means the text changed)",
        )


def _budgets(size: int, most: int = 60) -> Iterator[int]:
    """Budgets in tokens from just under ``size`` chars down to one token, at most ``most`` of
    them, denser near the top (where shedding starts) and always including the smallest."""
    top = max((size - 1) // 4, 1)
    if top <= most:
        yield from range(top, 0, -1)
        return
    step = top / most
    seen: set[int] = set()
    for i in range(most):
        t = max(1, round(top - i * step))
        if t not in seen:
            seen.add(t)
            yield t
    if 1 not in seen:
        yield 1


def _row_diff(what: str, a: Sequence[Row], b: Sequence[Row]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"{what}: row {i + 1} is {x!r} then {y!r}"
    return f"{what}: {len(a)} rows then {len(b)}"


# --------------------------------------------------------------------------- aggregates


class ContextSectionChecks(ContextIsolationChecks, ContextBudgetChecks, ContextDraftChecks):
    """Every context-section check (the building block of the aggregates below). Bases are
    listed last-first because pytest collects the most basic class's checks first."""


class PromptSectionConformance(PromptSectionChecks):
    """Every prompt-section check. Subclass it, define ``plugin`` and ``build_context``."""


class ContextSectionConformance(ContextSectionChecks):
    """Every context-section check. Subclass it, define ``plugin``, ``section_input`` and
    ``hostile_input``."""


class SectionPluginConformance(ContextSectionChecks, PromptSectionChecks):
    """Every section check, for a plugin with one prompt section and one context section."""
