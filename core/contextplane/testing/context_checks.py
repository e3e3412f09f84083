"""Conformance checks of context sections (ADR D6): the draft, the budget, the boundaries.

Each check composes through ``compose_projected_context`` on a private plugin host, so a
section passes exactly when it behaves in a real turn. Three groups: what one draft is
(``ContextDraftChecks``), how the section sheds under the budget (``ContextBudgetChecks``),
and what must never cross a boundary (``ContextIsolationChecks``).

Every composition a check makes is made through both paths, ``compose_projected_context`` and
``acompose_projected_context``, and a difference fails the check as CTX-ASYNC-PARITY: a
runtime may take either path, so every scenario a check sets up must hold on both. (Declaring
CTX-ASYNC-PARITY a known gap checks the sync path alone.)
"""

from __future__ import annotations

import inspect
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import pytest

from contextplane.aio import run_to_completion
from contextplane.aprojection import acompose_projected_context, per_read
from contextplane.config import Config
from contextplane.errors import ContextPlaneError
from contextplane.fitting import format_row
from contextplane.plugins import PluginHost
from contextplane.projection import ProjectedContext, SectionReport, compose_projected_context
from contextplane.sections import ContextSection, Draft, Row, Shed
from contextplane.testing._base import (
    KitUsageError,
    checks,
    required_fixture,
)
from contextplane.testing.harness import Harness, Quiet, SectionPluginBase, describe_error, text_diff
from contextplane.testing.inputs import PAYLOAD_MARKER, SectionInput, hostile_payload
from contextplane.testing.requirements import Requirement, requirement

_ROLE_AT_LINE_START = re.compile(r"^(?:system|assistant|user|human|developer|tool)\s*:", re.I | re.M)
_INSTRUCTION_TOKEN = re.compile(r"\[/?(?:INST|SYS|SYSTEM|ASSISTANT|USER)\]", re.I)
_TAG = re.compile(r"<[^<>]*>")


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
            with Quiet():
                result = drafted(section, section_input.request())
        except Exception as exc:
            requirement.fail(f"draft raised {describe_error(exc)}")
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
        with Quiet():
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
        with Quiet():
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
            first_text == second_text, text_diff("two compositions differ", first_text, second_text)
        )

    @checks("CTX-ASYNC-PARITY")
    def test_context_async_parity(
        self,
        context: ContextSectionHarness,
        section_input: SectionInput,
        second_session_input: SectionInput,
        requirement: Requirement,
    ) -> None:
        section, rows = self._sample_rows(context, section_input, requirement)
        if section.adraft is not None:
            request = section_input.request()
            try:
                with Quiet():
                    twin = _rows_of(run_to_completion(section.adraft(request)))
            except Exception as exc:
                requirement.fail(f"adraft of context section {section.name!r} raised {describe_error(exc)}")
            if rows != twin and rows == context.draft(section, section_input, requirement):
                requirement.fail(_row_diff("adraft drafts differently from draft", rows, twin))
        probe = ContextSectionHarness(context.harness, context.chosen, parity=False)
        host, _ = context.harness.host(section_input.config)
        full = probe.compose(section_input, host=host).used_chars
        scenarios: list[tuple[str, SectionInput, dict[str, Any]]] = [
            ("the section input", section_input, {}),
            ("the second session's input", second_session_input, {}),
            ("an incognito turn", section_input, {"incognito": True}),
            *(("a shrinking budget", section_input, {"budget_tokens": t}) for t in _budgets(full, most=8)),
        ]
        for what, inp, options in scenarios:
            kwargs = inp.compose_kwargs()
            settings = {"host": host, "record": False, "strict": False, **options}
            with Quiet():
                sync = compose_projected_context(**kwargs, **settings)
                difference = async_difference(sync, kwargs, settings)
            requirement.check(difference is None, f"for {what} {options or ''}: {difference}")


def _shed_alone(
    section: ContextSection, level: Mapping[str, int], first: str, later: str, lines: Mapping[str, str]
) -> bool:
    """A row listed earlier may be shed while one listed later stays when it is longer: a row
    that does not fit in the room left never takes smaller rows with it (DROP_ROWS)."""
    return (
        section.shed is Shed.DROP_ROWS and level[first] == 2 and len(lines[first]) > len(lines[later])
    )


def _room_freed(
    section: ContextSection,
    previous: Mapping[str, int],
    level: Mapping[str, int],
    rid: str,
    position: Mapping[str, int],
    lines: Mapping[str, str],
) -> bool:
    """A shed row may come back at a smaller budget only in a DROP_ROWS section, when a longer
    row listed before it was shed at this budget and so left the room it takes."""
    return section.shed is Shed.DROP_ROWS and any(
        position[other] < position[rid]
        and previous[other] < 2 <= level[other]
        and len(lines[other]) > len(lines[rid])
        for other in position
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
        # What the section costs beyond its rows' lines: its envelope, heading and inner tag.
        opening = size - sum(len(format_row(r.text)) for r in rows)
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
                        and not _shed_alone(section, level, first, later, full_lines)
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
                # The floor yields only when it does not fit: the floor rows it gave up would
                # not have fitted in the room left.
                missing = [r for r in rows[:floor] if r.id not in kept]
                room = budget - projection.used_chars
                need = sum(len(format_row(r.short if r.short is not None else r.text)) for r in missing)
                if missing and not kept:  # the section, its envelope and its marker come back too
                    need += opening + len(section.more_marker.replace("{n}", str(len(rows) - floor))) + 1
                requirement.check(
                    len(kept) >= floor or need > room,
                    f"{where} {len(kept)} rows are left, under the floor of {floor}, although the "
                    f"{len(missing)} floor rows it gave up ({need} chars) fit in the {room} chars left",
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
                    level[rid] >= previous[rid]
                    or _room_freed(section, previous, level, rid, position, full_lines),
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
