"""What one draft must be (ADR D6): valid rows with ids and ranks, within the time limit, a name
no other section uses, one envelope per tag, the same rows for the same request (sync, async,
a fresh host), and the async form drafting what the sync one does.

Why a group: each is a property of a single draft, checked before any budget is applied; the
budget checks (``budget``) build on a section that passes these.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any

from contextplane.aio import run_to_completion
from contextplane.errors import ContextPlaneError
from contextplane.projection import compose_projected_context
from contextplane.sections import Draft, Row
from contextplane.testing._base import (
    checks,
)
from contextplane.testing.context_checks.base import (
    ContextSectionHarness,
    _budgets,
    _ContextSectionBase,
    _row_diff,
    _rows_of,
    async_difference,
    drafted,
)
from contextplane.testing.harness import (
    Quiet,
    check_registered_once,
    describe_error,
    text_diff,
)
from contextplane.testing.inputs import SectionInput
from contextplane.testing.requirements import Requirement


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
        check_registered_once(requirement, "context", section.name, host)

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
