"""What every context-section check shares: the section under test on a private host
(``ContextSectionHarness``), the fixtures an author provides (``_ContextSectionBase``), and the
sync/async comparison every composition goes through (CTX-ASYNC-PARITY).

Why one place: a check composes only through ``ContextSectionHarness.compose``, which makes every
composition on both paths and fails on a difference; a check that composed on its own would
test one path and let the other drift.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar

import attrs
import pytest

from contextplane.aio import run_to_completion
from contextplane.aprojection import acompose_projected_context, per_read
from contextplane.config import Config
from contextplane.plugins import PluginHost
from contextplane.projection import ProjectedContext, SectionReport, compose_projected_context
from contextplane.sections import ContextSection, Draft, Row
from contextplane.testing._base import (
    KitUsageError,
    required_fixture,
)
from contextplane.testing.harness import (
    Harness,
    Quiet,
    SectionPluginBase,
    choose_section,
    describe_error,
    text_diff,
)
from contextplane.testing.inputs import SectionInput
from contextplane.testing.requirements import Requirement, requirement


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


def drafted(section: ContextSection, request: Any) -> Any:
    """``section.draft(request)``, run to completion when the draft is async."""
    result = section.draft(request)
    return run_to_completion(result) if inspect.isawaitable(result) else result


def _error_kind(error: str | None) -> str | None:
    # A time limit is reported in each path's own words (the sync path measures after the call,
    # the async one cancels at the limit): the same failure, different text.
    if error is not None and error.startswith("TimeoutError:"):
        return "TimeoutError"
    return error


def parity_difference(sync: ProjectedContext, asynchronous: ProjectedContext) -> str | None:
    """How the async composition's projection differs from the sync one's, or None."""
    if sync.text != asynchronous.text:
        return text_diff("the projected text differs (sync vs async)", sync.text, asynchronous.text)
    for name in ("budget_chars", "used_chars", "overflow", "warnings"):
        a, b = getattr(sync, name), getattr(asynchronous, name)
        if a != b:
            return f"{name} differs: {a!r} (sync) vs {b!r} (async)"
    names = [r.name for r in sync.sections], [r.name for r in asynchronous.sections]
    if names[0] != names[1]:
        return f"the sections differ: {names[0]} (sync) vs {names[1]} (async)"
    for a, b in zip(sync.sections, asynchronous.sections, strict=True):
        for name in ("chars", "item_ids", "offered", "truncated", "suppressed", "meta"):
            x, y = getattr(a, name), getattr(b, name)
            if x != y:
                return f"section {a.name!r}: {name} is {x!r} (sync) but {y!r} (async)"
        if _error_kind(a.error) != _error_kind(b.error):
            return f"section {a.name!r}: error is {a.error!r} (sync) but {b.error!r} (async)"
    return None


def async_difference(
    projection: ProjectedContext, kwargs: dict[str, Any], options: dict[str, Any]
) -> str | None:
    """How ``acompose_projected_context`` composes the inputs that gave ``projection`` through
    the sync path differently, or None. A sync path that differs from itself is
    CTX-DETERMINISTIC's business: the async path cannot be held to an answer the section does
    not give twice, so that is None too."""
    other = run_to_completion(acompose_projected_context(**kwargs, **options))
    difference = parity_difference(projection, other)
    if difference is None:
        # On a store that reads in worker threads acompose drafts the sync forms in one thread,
        # so the async forms (adraft) are checked on the per-read route too.
        with per_read():
            other = run_to_completion(acompose_projected_context(**kwargs, **options))
        difference = parity_difference(projection, other)
        if difference is not None:
            difference += " (on the per-read route: each section's adraft awaited)"
    if difference is None or parity_difference(projection, compose_projected_context(**kwargs, **options)):
        return None
    return difference


def _rows_of(result: Any) -> tuple[Row, ...]:
    if isinstance(result, Draft):
        return result.rows
    if isinstance(result, Iterable) and not isinstance(result, str | bytes):
        return tuple(result)
    raise TypeError(f"draft returned {type(result).__name__}; expected a Draft or an iterable of Row")


class ContextSectionHarness:
    """The one context section under test, drafted and composed the way a runtime does it."""

    def __init__(self, harness: Harness, chosen: str | None, *, parity: bool = True) -> None:
        self.harness = harness
        self.chosen = chosen
        #: Compose through both paths and fail CTX-ASYNC-PARITY on a difference.
        self.parity = parity

    def section(self, config: Config, *, standard: bool = False) -> tuple[ContextSection, PluginHost]:
        host, name = self.harness.host(config, standard=standard)
        with Quiet():
            mine = [r.section for r in host.context_sections() if r.plugin == name]
        Harness._collect_failures(host, name)
        return choose_section("context", self.chosen, mine), host

    def draft(
        self, section: ContextSection, inp: SectionInput, req: Requirement, *, store: Any = ...
    ) -> tuple[Row, ...]:
        """Call ``draft`` directly; an exception or a wrong result type fails ``req``."""
        request = inp.request()
        if store is not ...:
            request = attrs.evolve(request, knowledge_store=store)
        try:
            with Quiet():
                return _rows_of(drafted(section, request))
        except Exception as exc:
            req.fail(f"draft of context section {section.name!r} raised {describe_error(exc)}")

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
        options: dict[str, Any] = {
            "host": host,
            "budget_tokens": budget_tokens,
            "incognito": incognito,
            "record": False,
            "strict": False,
        }
        with Quiet():
            projection = compose_projected_context(**kwargs, **options)
            if self.parity:
                difference = async_difference(projection, kwargs, options)
                if difference is not None:
                    where = f"budget {budget_tokens} tokens" if budget_tokens else "unbounded"
                    requirement("CTX-ASYNC-PARITY").fail(
                        f"composed through acompose_projected_context ({where}"
                        f"{', incognito' if incognito else ''}), {difference}"
                    )
        return projection

    @staticmethod
    def report(projection: ProjectedContext, section: ContextSection, req: Requirement) -> SectionReport:
        found = projection.section(section.name)
        if found is None:
            req.fail(f"context section {section.name!r} is missing from the projection's reports")
        if found.error:
            req.fail(f"context section {section.name!r} failed while composing: {found.error}")
        return found


class _ContextSectionBase(SectionPluginBase):
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
        parity = "CTX-ASYNC-PARITY" not in type(self).known_gaps
        return ContextSectionHarness(harness, type(self).context_section, parity=parity)

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
