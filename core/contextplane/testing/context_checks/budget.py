"""How a section gives up space under a shrinking budget (ADR D6): in its declared shed order,
lowest rank first, short forms before drops, and never growing back while the budget shrinks.

Why its own module: these checks compose one input under many budgets and compare neighbours;
the helpers that decide whether a change between two budgets was the section's own shed
(``_shed_alone``, ``_room_freed``) are read only here.
"""

from __future__ import annotations

from collections.abc import Mapping

from contextplane.fitting import format_row
from contextplane.sections import ContextSection, Shed
from contextplane.testing._base import (
    checks,
)
from contextplane.testing.context_checks.base import ContextSectionHarness, _budgets, _ContextSectionBase
from contextplane.testing.inputs import SectionInput
from contextplane.testing.requirements import Requirement


def _shed_alone(
    section: ContextSection, level: Mapping[str, int], first: str, later: str, lines: Mapping[str, str]
) -> bool:
    """A row listed earlier may be shed while one listed later stays when it is longer: a row
    that does not fit in the room left never takes smaller rows with it (DROP_ROWS)."""
    return section.shed is Shed.DROP_ROWS and level[first] == 2 and len(lines[first]) > len(lines[later])


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
