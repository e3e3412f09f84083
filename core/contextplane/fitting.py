"""Fit drafts to the budget, then render them inside their envelopes (ADR D6).

Why measuring and rendering live together: the budget is a promise about the composed text,
so the size the shedding loop tracks must be exactly ``len()`` of what ``render`` returns.
Keeping the layout rules (tags, headings, row prefixes) in one module makes that checkable.

Layout, per envelope (envelopes are separated by one blank line)::

    <tag>
    preamble            (if any)
    heading             (per section, if any)
    <inner_tag>         (per section, if any)
    - first line of a row
      continuation lines are indented, so row text never starts a line
    +N more             (DEGRADE sections that dropped rows)
    </inner_tag>
    </tag>

Shedding goes from the lowest-priority section up, exhausting each section's behaviour before
the next and re-measuring after every step; rows are whole or absent, never cut.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import attrs

from contextplane.escaping import escape_untrusted
from contextplane.sections import ContextSection, Envelope, Row, Shed

ROW_PREFIX = "- "
CONTINUATION = "  "
ENVELOPE_SEPARATOR = "\n\n"


def format_row(text: str) -> str:
    """The escaped line(s) of one row, newline-terminated."""
    escaped = escape_untrusted(text)
    if "\n" in escaped:
        first, *rest = escaped.split("\n")
        return ROW_PREFIX + first + "\n" + "".join(CONTINUATION + line + "\n" for line in rest)
    return ROW_PREFIX + escaped + "\n"


@attrs.frozen
class ShedStep:
    """One kind of shedding applied to one section: how many items and how many chars it freed."""

    section: str
    action: str  # "drop_row" | "degrade_row" | "drop_to_floor" | "drop_section"
    items: int
    chars: int


class SectionPlan:
    """The mutable fitting state of one section's draft during one composition."""

    __slots__ = (
        "degraded",
        "envelope_index",
        "full",
        "hidden",
        "meta",
        "name",
        "overhead",
        "plugin",
        "rows",
        "rows_chars",
        "section",
        "short",
        "size",
        "visible",
    )

    def __init__(self, section: ContextSection, plugin: str, rows: Sequence[Row], meta: Mapping[str, Any]) -> None:
        self.section = section
        self.name = section.name
        self.plugin = plugin
        self.meta = meta
        self.rows = sorted(rows, key=lambda r: (r.rank, -r.trust_tier, r.id))
        self.full = [format_row(r.text) for r in self.rows]
        self.short = [format_row(r.short) if r.short is not None else None for r in self.rows]
        self.degraded = [False] * len(self.rows)
        self.visible = len(self.rows)
        self.hidden = 0
        self.rows_chars = sum(len(x) for x in self.full)
        overhead = 0
        if section.heading:
            overhead += len(section.heading) + 1
        if section.inner_tag:
            overhead += 2 * len(section.inner_tag) + 7  # "<t>\n" + "</t>\n"
        self.overhead = overhead
        self.envelope_index = -1
        self.size = 0
        self.resize()

    def marker(self) -> str:
        return self.section.more_marker.replace("{n}", str(self.hidden)) + "\n" if self.hidden else ""

    def resize(self) -> int:
        """Recompute ``size``; returns the change."""
        old = self.size
        if self.visible == 0 and self.hidden == 0:
            self.size = 0
        else:
            self.size = self.overhead + self.rows_chars + len(self.marker())
        return self.size - old

    def line(self, i: int) -> str:
        s = self.short[i]
        return s if self.degraded[i] and s is not None else self.full[i]

    def delivered_ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.rows[: self.visible])

    def render(self) -> str:
        if self.size == 0:
            return ""
        parts = []
        sec = self.section
        if sec.heading:
            parts.append(sec.heading + "\n")
        if sec.inner_tag:
            parts.append(f"<{sec.inner_tag}>\n")
        parts.extend(self.line(i) for i in range(self.visible))
        parts.append(self.marker())
        if sec.inner_tag:
            parts.append(f"</{sec.inner_tag}>\n")
        return "".join(parts)


class Layout:
    """Sections grouped into envelopes, with an exact running total of the rendered size."""

    def __init__(self, plans: Sequence[SectionPlan]) -> None:
        # Delivery order: priority, then name (a documented, registration-independent rule).
        self.plans = sorted(plans, key=lambda p: (p.section.priority, p.name))
        self.envelopes: list[Envelope] = []
        self.members: list[list[SectionPlan]] = []
        index: dict[str, int] = {}
        for plan in self.plans:
            env = plan.section.envelope
            i = index.get(env.tag)
            if i is None:
                i = index[env.tag] = len(self.envelopes)
                self.envelopes.append(env)
                self.members.append([])
            plan.envelope_index = i
            self.members[i].append(plan)
        self.env_overhead = [
            len(f"<{e.tag}>\n") + (len(e.preamble) + 1 if e.preamble else 0) + len(f"</{e.tag}>")
            for e in self.envelopes
        ]
        self.env_content = [sum(p.size for p in m) for m in self.members]
        self.env_sizes = [self._env_size(i) for i in range(len(self.envelopes))]
        self.present = sum(1 for s in self.env_sizes if s)
        self.total = sum(self.env_sizes) + len(ENVELOPE_SEPARATOR) * max(self.present - 1, 0)

    def _env_size(self, i: int) -> int:
        return self.env_overhead[i] + self.env_content[i] if self.env_content[i] else 0

    def changed(self, plan: SectionPlan) -> int:
        """Re-measure after ``plan`` changed; returns chars freed (positive) or added (negative)."""
        delta = plan.resize()
        if not delta:
            return 0
        i = plan.envelope_index
        before_total = self.total
        old = self.env_sizes[i]
        self.env_content[i] += delta
        new = self._env_size(i)
        self.env_sizes[i] = new
        if bool(old) != bool(new):
            self.present += 1 if new else -1
        self.total = sum(self.env_sizes) + len(ENVELOPE_SEPARATOR) * max(self.present - 1, 0)
        return before_total - self.total

    def render(self) -> str:
        blocks = []
        for i, env in enumerate(self.envelopes):
            if not self.env_sizes[i]:
                continue
            body = "".join(p.render() for p in self.members[i])
            pre = env.preamble + "\n" if env.preamble else ""
            blocks.append(f"<{env.tag}>\n{pre}{body}</{env.tag}>")
        return ENVELOPE_SEPARATOR.join(blocks)


def _record(steps: list[ShedStep], section: str, action: str, chars: int) -> None:
    if steps and steps[-1].section == section and steps[-1].action == action:
        last = steps[-1]
        steps[-1] = ShedStep(section, action, last.items + 1, last.chars + chars)
    else:
        steps.append(ShedStep(section, action, 1, chars))


def _drop_rows(layout: Layout, plan: SectionPlan, budget: int, steps: list[ShedStep]) -> None:
    while layout.total > budget and plan.visible > 0:
        i = plan.visible - 1
        plan.rows_chars -= len(plan.line(i))
        plan.visible -= 1
        _record(steps, plan.name, "drop_row", layout.changed(plan))


def _degrade(layout: Layout, plan: SectionPlan, budget: int, steps: list[ShedStep]) -> None:
    # 1. Short forms, lowest-ranked row first, only where the short form is actually shorter.
    for i in range(plan.visible - 1, -1, -1):
        if layout.total <= budget:
            return
        s = plan.short[i]
        if s is None or plan.degraded[i] or len(s) >= len(plan.full[i]):
            continue
        plan.rows_chars += len(s) - len(plan.full[i])
        plan.degraded[i] = True
        _record(steps, plan.name, "degrade_row", layout.changed(plan))
    # 2. Drop to the floor behind a "+N more" marker. The marker can outweigh a tiny row, so
    #    keep the smallest state seen and fall back to it if nothing fits.
    start_total, start_visible = layout.total, plan.visible
    best = (layout.total, plan.visible)
    trail: list[ShedStep] = []
    while layout.total > budget and plan.visible > plan.section.floor:
        i = plan.visible - 1
        plan.rows_chars -= len(plan.line(i))
        plan.visible -= 1
        plan.hidden += 1
        _record(trail, plan.name, "drop_to_floor", layout.changed(plan))
        if layout.total < best[0]:
            best = (layout.total, plan.visible)
    if layout.total > budget and plan.visible != best[1]:
        while plan.visible < best[1]:
            plan.rows_chars += len(plan.line(plan.visible))
            plan.visible += 1
            plan.hidden -= 1
        layout.changed(plan)
        dropped = start_visible - plan.visible
        trail = [ShedStep(plan.name, "drop_to_floor", dropped, start_total - layout.total)] if dropped else []
    steps.extend(trail)


def _drop_section(layout: Layout, plan: SectionPlan, steps: list[ShedStep]) -> None:
    if plan.visible == 0 and plan.hidden == 0:
        return
    items = plan.visible
    plan.visible = 0
    plan.hidden = 0
    plan.rows_chars = 0
    steps.append(ShedStep(plan.name, "drop_section", items, layout.changed(plan)))


def fit(layout: Layout, budget: int | None) -> list[ShedStep]:
    """Shed until ``layout.total <= budget`` or nothing sheddable is left; returns the steps."""
    steps: list[ShedStep] = []
    if budget is None or layout.total <= budget:
        return steps
    for plan in reversed(layout.plans):
        if layout.total <= budget:
            break
        shed = plan.section.shed
        if shed is Shed.NEVER:
            continue
        if shed is Shed.DROP_SECTION:
            _drop_section(layout, plan, steps)
        elif shed is Shed.DROP_ROWS:
            _drop_rows(layout, plan, budget, steps)
        elif shed is Shed.DEGRADE:
            _degrade(layout, plan, budget, steps)
    return steps


def overflow_key(layout: Layout, budget: int) -> Hashable:
    """Identifies a never-shed overflow, so its warning fires once per distinct cause."""
    return ("never-shed-overflow", budget, tuple((p.name, p.size) for p in layout.plans if p.size))
