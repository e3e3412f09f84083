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

import operator
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import attrs

from contextplane.escaping import escape_untrusted
from contextplane.memo import MEMO_LIMIT, new_memo
from contextplane.sections import ContextSection, Envelope, Row, Shed

ROW_PREFIX = "- "
CONTINUATION = "  "
ENVELOPE_SEPARATOR = "\n\n"


def _lines(escaped: str) -> str:
    if "\n" in escaped:
        first, *rest = escaped.split("\n")
        return ROW_PREFIX + first + "\n" + "".join(CONTINUATION + line + "\n" for line in rest)
    return ROW_PREFIX + escaped + "\n"


def _line_len(escaped: str) -> int:
    # len(_lines(escaped)) without building it: prefix + newline, plus an indent per extra line.
    return len(escaped) + 3 + (2 * escaped.count("\n") if "\n" in escaped else 0)


_MEASURED: dict[str, tuple[str, int]] = new_memo()


def escape_measured(text: str) -> tuple[str, int]:
    """The escaped text and its rendered line length, memoised like ``escape_untrusted``."""
    hit = _MEASURED.get(text)
    if hit is None:
        escaped = escape_untrusted(text)
        hit = (escaped, _line_len(escaped))
        if len(_MEASURED) >= MEMO_LIMIT:
            _MEASURED.clear()
        _MEASURED[text] = hit
    return hit


def format_row(text: str) -> str:
    """The escaped line(s) of one row, newline-terminated."""
    return _lines(escape_untrusted(text))


_BY_RANK = operator.attrgetter("rank")


def _row_key(row: Row) -> tuple[float, int, str]:
    return (row.rank, -row.trust_tier, row.id)


@attrs.frozen
class ShedStep:
    """One kind of shedding applied to one section: how many items and how many chars it freed."""

    section: str
    action: str  # "drop_row" | "degrade_row" | "drop_to_floor" | "drop_section"
    items: int
    chars: int


class SectionPlan:
    """The mutable fitting state of one section's draft during one composition.

    Row text is escaped once, up front, because its escaped length is what the budget counts;
    the short forms are escaped only if the section actually degrades.
    """

    __slots__ = (
        "cur",
        "degraded",
        "envelope_index",
        "escaped",
        "hidden",
        "meta",
        "name",
        "overhead",
        "plugin",
        "rendered",
        "rows",
        "rows_chars",
        "section",
        "short",
        "size",
        "visible",
    )

    def __init__(
        self, section: ContextSection, plugin: str, rows: Sequence[Row], meta: Mapping[str, Any]
    ) -> None:
        self.section = section
        self.name = section.name
        self.plugin = plugin
        self.meta = meta
        ordered = list(rows)
        ranks = {r.rank for r in ordered}
        # Distinct ranks need no tie-break; otherwise trust tier, then id, decide.
        ordered.sort(key=_BY_RANK if len(ranks) == len(ordered) else _row_key)
        self.rows = ordered
        measured = [escape_measured(r.text) for r in ordered]
        self.escaped = [m[0] for m in measured]
        self.cur = [m[1] for m in measured]
        self.short: list[str | None] | None = None
        self.degraded: list[bool] | None = None
        self.visible = len(ordered)
        self.hidden = 0
        self.rows_chars = sum(self.cur)
        overhead = 0
        if section.heading:
            overhead += len(section.heading) + 1
        if section.inner_tag:
            overhead += 2 * len(section.inner_tag) + 7  # "<t>\n" + "</t>\n"
        self.overhead = overhead
        self.envelope_index = -1
        self.size = 0
        self.rendered = ""
        self.resize()

    def marker(self) -> str:
        return self.section.more_marker.replace("{n}", str(self.hidden)) + "\n" if self.hidden else ""

    def resize(self) -> int:
        """Recompute ``size``; returns the change."""
        old = self.size
        if self.visible == 0 and self.hidden == 0:
            self.size = 0
        else:
            self.size = self.overhead + self.rows_chars + (len(self.marker()) if self.hidden else 0)
        return self.size - old

    def shorts(self) -> list[str | None]:
        if self.short is None:
            self.short = [escape_untrusted(r.short) if r.short is not None else None for r in self.rows]
            self.degraded = [False] * len(self.rows)
        return self.short

    def delivered_ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.rows[: self.visible])

    @property
    def truncated(self) -> bool:
        return self.visible < len(self.rows) or (self.degraded is not None and any(self.degraded))

    def render(self) -> str:
        """Render the section's part of its envelope (kept in ``rendered`` for hashing)."""
        if self.size == 0:
            self.rendered = ""
            return ""
        parts = []
        sec = self.section
        if sec.heading:
            parts.append(sec.heading + "\n")
        if sec.inner_tag:
            parts.append(f"<{sec.inner_tag}>\n")
        short, degraded = self.short, self.degraded
        for i in range(self.visible):
            if degraded is not None and degraded[i] and short is not None:
                parts.append(_lines(short[i] or ""))
            else:
                parts.append(_lines(self.escaped[i]))
        parts.append(self.marker())
        if sec.inner_tag:
            parts.append(f"</{sec.inner_tag}>\n")
        self.rendered = "".join(parts)
        return self.rendered


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


def _drop_rows(layout: Layout, plan: SectionPlan, budget: int, steps: list[ShedStep]) -> None:
    # Equivalent to dropping one row at a time and re-measuring: every drop but the one that
    # empties the section frees exactly that row's line, so the stopping point is found in one
    # pass and the layout is re-measured once.
    excess = layout.total - budget
    v = plan.visible
    freed = 0
    cur = plan.cur
    while v > 0 and freed < excess:
        v -= 1
        freed += cur[v]
    dropped = plan.visible - v
    if not dropped:
        return
    plan.rows_chars -= sum(cur[v : plan.visible])
    plan.visible = v
    steps.append(ShedStep(plan.name, "drop_row", dropped, layout.changed(plan)))


def _degrade(layout: Layout, plan: SectionPlan, budget: int, steps: list[ShedStep]) -> None:
    # 1. Short forms, lowest-ranked row first, only where the short form is actually shorter.
    short = plan.shorts()
    degraded = plan.degraded
    assert degraded is not None
    excess = layout.total - budget
    count = saved = 0
    for i in range(plan.visible - 1, -1, -1):
        if saved >= excess:
            break
        s = short[i]
        if s is None or degraded[i]:
            continue
        new_len = _line_len(s)
        if new_len >= plan.cur[i]:
            continue
        saved += plan.cur[i] - new_len
        plan.rows_chars -= plan.cur[i] - new_len
        plan.cur[i] = new_len
        degraded[i] = True
        count += 1
    if count:
        steps.append(ShedStep(plan.name, "degrade_row", count, layout.changed(plan)))
    # 2. Drop to the floor behind a "+N more" marker. The marker can outweigh a tiny row, so
    #    the smallest state seen is kept when nothing fits. Simulated on local counters (the
    #    section never empties here: it keeps the marker), then applied once.
    start_visible = plan.visible
    floor = plan.section.floor
    if layout.total <= budget or start_visible <= floor:
        return
    marker = plan.section.more_marker
    v, hidden = start_visible, plan.hidden
    marker_len = len(plan.marker())
    total = layout.total
    best_total, best_v = total, v
    cur = plan.cur
    while total > budget and v > floor:
        v -= 1
        hidden += 1
        new_marker_len = len(marker.replace("{n}", str(hidden))) + 1
        total += new_marker_len - marker_len - cur[v]
        marker_len = new_marker_len
        if total < best_total:
            best_total, best_v = total, v
    final_v = v if total <= budget else best_v
    dropped = start_visible - final_v
    if not dropped:
        return
    plan.rows_chars -= sum(cur[final_v:start_visible])
    plan.hidden += dropped
    plan.visible = final_v
    steps.append(ShedStep(plan.name, "drop_to_floor", dropped, layout.changed(plan)))


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
