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
the next and re-measuring after every step; rows are whole or absent. Three rules keep one
bad row or one floor from breaking the budget (ADR D6: only never-shed sections may exceed it):

* a row whose text is longer than ``context.max_row_chars`` is cut at a line boundary, with a
  visible marker, before anything is measured (``cut_row``);
* a row dropped to make room never takes smaller rows with it: once shedding is done, dropped
  rows are offered the room that is left again, best section and best rank first, and each
  one that fits comes back (``restore``);
* a ``DEGRADE`` floor yields when it does not fit: if every other sheddable row is gone and
  the projection is still over budget, the floor's rows are dropped too, lowest-ranked first,
  and then the section (``drop_below_floor``).
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

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


#: The marker that ends a row cut by ``context.max_row_chars``; ``{n}`` is the chars left out.
CUT_MARKER = "[… cut: {n} more chars]"


def cut_row(escaped: str, limit: int) -> str:
    """``escaped`` cut to at most ``limit`` chars, at the last line break (else the last space)
    in the second half of the room, never inside an entity, ending with a marker line that
    says how much was left out. Cutting escaped text keeps the bound exact."""
    if len(escaped) <= limit:
        return escaped
    marker = "\n" + CUT_MARKER.replace("{n}", str(len(escaped)))
    room = max(limit - len(marker), 0)
    head = escaped[:room]
    for sep in ("\n", " "):
        at = head.rfind(sep)
        if at > room // 2:
            head = head[:at]
            break
    amp = head.rfind("&", max(len(head) - 6, 0))
    if amp >= 0 and ";" not in head[amp:]:
        head = head[:amp]  # an entity (``&lt;``) is whole or absent
    head = head.rstrip()
    return head + "\n" + CUT_MARKER.replace("{n}", str(len(escaped) - len(head)))


_BY_RANK = operator.attrgetter("rank")
_TEXT = operator.attrgetter("text")
_LENGTH = operator.itemgetter(1)
#: The shared empty list of a plan with nothing cut or restored (replaced before any append).
_NONE: list[Any] = []
#: The shared empty map of a plan with no degraded row (replaced before any insert).
_NO_SHORT: dict[int, str] = {}


def _row_key(row: Row) -> tuple[float, int, str]:
    return (row.rank, -row.trust_tier, row.id)


@attrs.frozen
class ShedStep:
    """One kind of shedding applied to one section: how many items and how many chars it freed."""

    section: str
    action: str  # "drop_row" | "degrade_row" | "drop_to_floor" | "drop_below_floor" | "drop_section"
    items: int
    chars: int


class SectionPlan:
    """The mutable fitting state of one section's draft during one composition.

    Row text is escaped once, up front, because its escaped length is what the budget counts;
    the short forms are escaped only if the section actually degrades.
    """

    __slots__ = (
        "_row_limit",
        "cur",
        "cut",
        "envelope_index",
        "had",
        "hidden",
        "measured",
        "meta",
        "name",
        "overhead",
        "plugin",
        "rendered",
        "restored",
        "rows",
        "rows_chars",
        "section",
        "short",
        "size",
        "visible",
    )

    #: How many rows were visible before ``_drop_rows`` / ``_drop_section`` shed them (set only
    #: on a section that shed, and read only by ``restore``).
    had: int

    def __init__(
        self,
        section: ContextSection,
        plugin: str,
        rows: Sequence[Row],
        meta: Mapping[str, Any],
        row_limit: int | None = None,
    ) -> None:
        self.section = section
        self.name = section.name
        self.plugin = plugin
        self.meta = meta
        ordered = list(rows)
        # Distinct ranks need no tie-break; otherwise trust tier, then id, decide.
        ordered.sort(key=_BY_RANK if len(set(map(_BY_RANK, ordered))) == len(ordered) else _row_key)
        self.rows = ordered
        # The memo answers for recurring texts in one pass in C; only a miss is escaped here.
        texts = list(map(_TEXT, ordered))
        hits: list[tuple[str, int] | None] = list(map(_MEASURED.get, texts))
        measured = cast(list[tuple[str, int]], hits)
        if None in hits:
            measured = [m or escape_measured(t) for m, t in zip(hits, texts, strict=True)]
        #: Each row's escaped text and line length, as measured (``cur`` tracks degrading).
        self.measured = measured
        self.cur = list(map(_LENGTH, measured))
        self.rows_chars = sum(self.cur)
        #: Ids of the rows cut to ``row_limit`` chars (a line is never shorter than its text,
        #: so a section whose lines all fit skips the check).
        self.cut: list[str] = _NONE
        if row_limit and self.rows_chars > row_limit and max(self.cur) > row_limit:
            self._cut_rows(ordered, row_limit)
        self._row_limit = row_limit
        #: Rows past ``visible`` given back by ``restore``, in rank order.
        self.restored: list[int] = _NONE
        #: Escaped short forms of the degraded rows only, by index (the others never need one).
        self.short: dict[int, str] = _NO_SHORT
        self.visible = len(ordered)
        self.hidden = 0
        overhead = 0
        if section.heading:
            overhead += len(section.heading) + 1
        if section.inner_tag:
            overhead += 2 * len(section.inner_tag) + 7  # "<t>\n" + "</t>\n"
        self.overhead = overhead
        self.envelope_index = -1
        # What ``resize`` would compute for a plan nothing was shed from yet.
        self.size = overhead + self.rows_chars if ordered else 0
        self.rendered = ""

    def _cut_rows(self, ordered: Sequence[Row], limit: int) -> None:
        self.cut = []
        measured = self.measured  # a list of its own: the memo's tuples are replaced, not changed
        for i, (text, _length) in enumerate(measured):
            if len(text) > limit:
                cut = cut_row(text, limit)
                measured[i] = (cut, _line_len(cut))
                self.cur[i] = measured[i][1]
                self.cut.append(ordered[i].id)
        self.rows_chars = sum(self.cur)

    def marker(self) -> str:
        return self.section.more_marker.replace("{n}", str(self.hidden)) + "\n" if self.hidden else ""

    def resize(self) -> int:
        """Recompute ``size``; returns the change."""
        old = self.size
        if self.visible == 0 and self.hidden == 0 and not self.restored:
            self.size = 0
        else:
            self.size = self.overhead + self.rows_chars + (len(self.marker()) if self.hidden else 0)
        return self.size - old

    def kept(self) -> list[int]:
        """Indices of the delivered rows, in rank order."""
        return [*range(self.visible), *self.restored]

    def delivered_ids(self) -> tuple[str, ...]:
        if not self.size:
            return ()
        rows = self.rows
        if not self.restored:
            return tuple(r.id for r in rows[: self.visible])
        return tuple(rows[i].id for i in self.kept())

    @property
    def truncated(self) -> bool:
        return (
            self.visible + len(self.restored) < len(self.rows)
            or bool(self.cut)
            or bool(self.short)
        )

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
        short, measured = self.short, self.measured
        if short:
            indices: Sequence[int] = self.kept() if self.restored else range(self.visible)
            parts.extend(_lines(short[i] if i in short else measured[i][0]) for i in indices)
        elif self.restored:
            parts.extend(_lines(measured[i][0]) for i in self.kept())
        else:
            parts.extend(_lines(m[0]) for m in measured[: self.visible])
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
        content = self.env_content[i] = self.env_content[i] + delta
        new = self.env_overhead[i] + content if content else 0
        self.env_sizes[i] = new
        if bool(old) != bool(new):
            self.present += 1 if new else -1
            self.total = sum(self.env_sizes) + len(ENVELOPE_SEPARATOR) * max(self.present - 1, 0)
        else:
            self.total = before_total + new - old
        return before_total - self.total

    def render(self) -> str:
        blocks = []
        for i, env in enumerate(self.envelopes):
            if not self.env_sizes[i]:
                continue
            body = "".join([p.render() for p in self.members[i] if p.size])
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
    plan.had = plan.visible  # what ``restore`` may give back
    plan.rows_chars -= sum(cur[v : plan.visible])
    plan.visible = v
    steps.append(ShedStep(plan.name, "drop_row", dropped, layout.changed(plan)))


def _degrade(layout: Layout, plan: SectionPlan, budget: int, steps: list[ShedStep]) -> None:
    # 1. Short forms, lowest-ranked row first, only where the short form is actually shorter;
    # a row's short form is escaped only when its turn comes.
    short = plan.short
    rows, cur, limit, measured = plan.rows, plan.cur, plan._row_limit, _MEASURED.get
    excess = layout.total - budget
    count = saved = 0
    for i in range(plan.visible - 1, -1, -1):
        if saved >= excess:
            break
        text = rows[i].short
        if text is None or i in short:
            continue
        s, new_len = measured(text) or escape_measured(text)
        if limit and len(s) > limit:
            s = cut_row(s, limit)
            new_len = _line_len(s)
        if new_len >= cur[i]:
            continue
        if short is _NO_SHORT:
            short = plan.short = {}
        saved += cur[i] - new_len
        cur[i] = new_len
        short[i] = s
        count += 1
    plan.rows_chars -= saved
    if count:
        steps.append(ShedStep(plan.name, "degrade_row", count, layout.changed(plan)))
    # 2. Drop to the floor behind a "+N more" marker.
    _drop_to(layout, plan, budget, steps, plan.section.floor, "drop_to_floor")


def _drop_to(
    layout: Layout, plan: SectionPlan, budget: int, steps: list[ShedStep], floor: int, action: str
) -> None:
    """Drop visible rows, lowest-ranked first, down to ``floor``, behind the "+N more" marker.
    The marker can outweigh a tiny row, so the smallest state seen is kept when nothing fits.
    Simulated on local counters (the section never empties here: it keeps the marker), then
    applied once."""
    start_visible = plan.visible
    if layout.total <= budget or start_visible <= floor:
        return
    marker = plan.section.more_marker
    # The marker line's length is its text's, with each "{n}" replaced by the count, plus "\n".
    slots = marker.count("{n}")
    fixed = len(marker) - 3 * slots + 1
    v, hidden = start_visible, plan.hidden
    marker_len = len(plan.marker())
    total = layout.total
    best_total, best_v = total, v
    cur = plan.cur
    while total > budget and v > floor:
        v -= 1
        hidden += 1
        new_marker_len = fixed + slots * len(str(hidden))
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
    steps.append(ShedStep(plan.name, action, dropped, layout.changed(plan)))


def _drop_section(layout: Layout, plan: SectionPlan, steps: list[ShedStep]) -> None:
    if plan.visible == 0 and plan.hidden == 0:
        return
    items = plan.visible
    plan.had = items
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
    # Floors yield (ADR D6: only never-shed sections are never dropped), lowest priority first.
    for plan in reversed(layout.plans):
        if layout.total <= budget:
            break
        if plan.section.shed is Shed.DEGRADE and (plan.visible or plan.hidden):
            _drop_to(layout, plan, budget, steps, 0, "drop_below_floor")
            if layout.total > budget:
                _drop_section(layout, plan, steps)
    if layout.total < budget and steps:
        restore(layout, budget, steps)
    return steps


def restore(layout: Layout, budget: int, steps: list[ShedStep]) -> None:
    """Give the room left back to dropped rows, best section and best rank first, so a row that
    did not fit never takes smaller rows with it. Only whole rows of ``DROP_ROWS`` sections and
    whole ``DROP_SECTION`` sections come back, each only if the projection still fits; the
    shedding steps are rewritten to what was dropped in the end."""
    dropped = {s.section for s in steps if s.action in ("drop_row", "drop_section")}
    for plan in layout.plans:
        if plan.name not in dropped:
            continue
        shed = plan.section.shed
        had = plan.had
        if shed is Shed.DROP_SECTION and plan.size == 0:
            rows_chars = sum(plan.cur[:had])
            if budget - layout.total < rows_chars:
                continue  # the section alone is larger than the room left
            plan.visible = had
            plan.rows_chars = rows_chars
            added = -layout.changed(plan)
            if layout.total > budget:  # its heading or envelope did not fit
                plan.visible = 0
                plan.rows_chars = 0
                layout.changed(plan)
                continue
            _give_back(steps, plan.name, had, added)
        elif shed is Shed.DROP_ROWS and plan.visible < had:
            if min(plan.cur[plan.visible : had]) > budget - layout.total:
                continue  # not one of its dropped rows fits (the usual case): skip the loop
            for i in range(plan.visible, had):
                if budget - layout.total < plan.cur[i]:
                    continue  # its line alone is larger than the room left
                if plan.restored is _NONE:
                    plan.restored = []
                plan.restored.append(i)
                plan.rows_chars += plan.cur[i]
                added = -layout.changed(plan)
                if layout.total > budget:  # its section's heading or envelope did not fit
                    plan.restored.pop()
                    plan.rows_chars -= plan.cur[i]
                    layout.changed(plan)
                    continue
                _give_back(steps, plan.name, 1, added)


def _give_back(steps: list[ShedStep], section: str, items: int, chars: int) -> None:
    """Take ``items`` rows and ``chars`` chars off the section's last dropping step."""
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        if step.section == section and step.action in ("drop_row", "drop_section"):
            if step.items <= items:
                del steps[index]
            else:
                steps[index] = ShedStep(section, step.action, step.items - items, step.chars - chars)
            return


def overflow_key(layout: Layout, budget: int) -> Hashable:
    """Identifies a never-shed overflow, so its warning fires once per distinct cause."""
    return ("never-shed-overflow", budget, tuple((p.name, p.size) for p in layout.plans if p.size))
