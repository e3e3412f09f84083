"""The fitting state of one composition: a ``SectionPlan`` per section's draft, and the ``Layout``
that groups them into envelopes with an exact running total of the rendered size (ADR D6).

Why the layout rules live with the sizes: the budget is a promise about the composed text, so
``Layout.total`` must be exactly ``len()`` of what ``Layout.render`` returns. Keeping the tags,
headings and markers in one module with the arithmetic that counts them makes that checkable.

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
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

from contextplane.fitting.rows import (
    _LINE,
    _LINE_LEN,
    _line_of,
    _lines,
    _rank_order,
    _render_order,
    cut_row,
    escape_measured,
)
from contextplane.sections import ContextSection, Envelope, Row

ENVELOPE_SEPARATOR = "\n\n"

_TEXT = operator.attrgetter("text")
_ROW_ID = operator.attrgetter("id")
#: Delivery order: priority, then name (a documented, registration-independent rule).
_DELIVERY_ORDER = operator.attrgetter("priority", "name")
_ENVELOPE_TAG = operator.attrgetter("section.envelope.tag")
_SIZE = operator.attrgetter("size")
#: The shared empty list of a plan with nothing cut or restored (replaced before any append).
_NONE: list[Any] = []
#: The shared empty map of a plan with no degraded or cut row (replaced before any insert).
_NO_LINES: dict[int, str] = {}


class SectionPlan:
    """The mutable fitting state of one section's draft during one composition.

    What the budget counts is each row's rendered line length, so every row is measured up
    front: one memo lookup per row (a recurring row is escaped once per process). The rest is
    done only for the rows that need it. Rows are put in rank order (``order``) only when a
    decision depends on the order or the section is rendered: a section kept whole or dropped
    whole never needs it (its report sorts a copy, if it is ever read). Short forms are
    measured only for the rows a section degrades.
    """

    __slots__ = (
        "_row_limit",
        "cur",
        "cut",
        "envelope_index",
        "had",
        "heading",
        "hidden",
        "lines",
        "meta",
        "name",
        "ordered",
        "overhead",
        "plugin",
        "priority",
        "render_key",
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
    #: Which of the layout's envelopes the section is in (set by ``Layout``).
    envelope_index: int

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
        self.priority = section.priority
        self.plugin = plugin
        self.meta = meta
        #: The rows as drafted, until ``order`` puts them (and ``cur``) in rank order.
        self.rows: Sequence[Row] = rows
        self.visible = n = len(rows)
        self.ordered = n < 2
        # The memo answers for recurring texts in one pass (a comprehension: cheaper than
        # mapping ``__getitem__`` over ``attrgetter``); only on a miss is each row escaped here.
        try:
            cur = [_LINE_LEN[row.text] for row in rows]
        except KeyError:
            cur = [_LINE_LEN.get(r.text) or escape_measured(r.text)[1] for r in rows]
        #: Each row's line length as it stands (degrading and cutting shorten it).
        self.cur = cur
        self.rows_chars = rows_chars = sum(cur)
        #: Ids of the rows cut to ``row_limit`` chars (a line is never shorter than its text,
        #: so a section whose lines all fit skips the check).
        self.cut: list[str] = _NONE
        #: The rendered lines of the cut rows, by index (the others are the memo's).
        self.lines: dict[int, str] = _NO_LINES
        self._row_limit = row_limit
        if row_limit and rows_chars > row_limit and max(cur) > row_limit:
            self._cut_rows(row_limit)
        #: Rows past ``visible`` given back by ``restore``, in rank order.
        self.restored: list[int] = _NONE
        #: The rendered lines of the degraded rows' short forms only, by index.
        self.short: dict[int, str] = _NO_LINES
        self.hidden = 0
        inner_tag = section.inner_tag
        heading = getattr(meta, "heading", None)  # a draft's own heading (``Draft.heading``)
        #: The heading line as rendered: the draft's (escaped: it is built from stored values)
        #: or the section's (trusted text).
        self.heading = heading = section.heading if heading is None else escape_measured(heading)[0]
        #: The delivered rows' render order when it is not rank order (``Draft.render_key``).
        self.render_key = getattr(meta, "render_key", None)
        overhead = len(heading) + 1 if heading else 0
        if inner_tag:
            overhead += 2 * len(inner_tag) + 7  # "<t>\n" + "</t>\n"
        self.overhead = overhead
        # What ``Layout.changed`` would compute for a plan nothing was shed from yet.
        self.size = overhead + self.rows_chars if n else 0
        self.rendered = ""

    def order(self) -> None:
        """Put the rows in rank order, once. Called before any state that names a row by its
        index exists (cut, short, restored rows, a partial drop), so nothing else needs moving."""
        if self.ordered:
            return
        self.ordered = True
        index = _rank_order(self.rows)
        if index is not None:
            pick = operator.itemgetter(*index)
            self.rows = pick(self.rows)
            self.cur = list(pick(self.cur))

    def offered(self) -> list[Row]:
        """Every row the draft offered, in rank order, without changing the plan (a report reads
        it after the composition, possibly from another thread)."""
        if self.ordered:
            return list(self.rows)
        index = _rank_order(self.rows)
        return list(self.rows) if index is None else [self.rows[i] for i in index]

    def _cut_rows(self, limit: int) -> None:
        self.order()
        self.cut, self.lines = [], {}
        cur, rows = self.cur, self.rows
        for i, length in enumerate(cur):
            if length <= limit:
                continue  # its escaped text is shorter than its line
            text = escape_measured(rows[i].text)[0]
            if len(text) > limit:
                cut = self.lines[i] = _lines(cut_row(text, limit))
                cur[i] = len(cut)
                self.cut.append(self.rows[i].id)
        self.rows_chars = sum(cur)

    def marker(self) -> str:
        return self.section.more_marker.replace("{n}", str(self.hidden)) + "\n" if self.hidden else ""

    def kept(self) -> list[int]:
        """Indices of the delivered rows, in rank order."""
        return [*range(self.visible), *self.restored]

    def delivered_ids(self) -> tuple[str, ...]:
        if not self.size or not (self.visible or self.restored):
            return ()
        self.order()  # a no-op once rendered
        rows = self.rows
        if not self.restored:
            return tuple(map(_ROW_ID, rows[: self.visible]))
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
        if self.visible or self.restored:  # (a section shown as its marker alone needs no order)
            self.order()
        sec = self.section
        head = self.heading + "\n" if self.heading else ""
        if sec.inner_tag:
            head += f"<{sec.inner_tag}>\n"
        short, lines, rows = self.short, self.lines, self.rows
        key = self.render_key
        if short or lines or self.restored or (key is not None and self.visible > 1):
            indices: Sequence[int] = self.kept() if self.restored else range(self.visible)
            if key is not None:  # rendered in the draft's order; shed (above) by rank
                indices = _render_order(self.name, indices, rows, key)
            body = "".join(
                [
                    short[i] if i in short else lines[i] if i in lines else _line_of(rows[i].text)
                    for i in indices
                ]
            )
        elif not self.visible:  # the marker alone
            body = ""
        else:
            shown = rows if self.visible == len(rows) else rows[: self.visible]
            try:
                body = "".join([_LINE[row.text] for row in shown])
            except KeyError:  # the memo was cleared since the rows were measured
                body = "".join(map(_line_of, map(_TEXT, shown)))
        tail = self.marker() if self.hidden else ""
        if sec.inner_tag:
            tail += f"</{sec.inner_tag}>\n"
        self.rendered = head + body + tail
        return self.rendered


class Layout:
    """Sections grouped into envelopes, with an exact running total of the rendered size."""

    def __init__(self, plans: Sequence[SectionPlan]) -> None:
        # Delivery order: priority, then name (a documented, registration-independent rule).
        # Composition hands them over in draft order, which is that order already.
        priorities = [plan.priority for plan in plans]
        if all(map(operator.lt, priorities, priorities[1:])):
            self.plans = list(plans)
        else:
            self.plans = sorted(plans, key=_DELIVERY_ORDER)
        self.envelopes: list[Envelope] = []
        self.members: list[list[SectionPlan]] = []
        envelopes, members = self.envelopes, self.members
        index: dict[str, int] = {}
        for plan, tag in zip(self.plans, map(_ENVELOPE_TAG, self.plans), strict=True):
            i = index.get(tag)
            if i is None:
                i = index[tag] = len(envelopes)
                envelopes.append(plan.section.envelope)
                members.append([])
            plan.envelope_index = i
            members[i].append(plan)
        self.env_overhead = [
            len(f"<{e.tag}>\n") + (len(e.preamble) + 1 if e.preamble else 0) + len(f"</{e.tag}>")
            for e in self.envelopes
        ]
        #: The sections' sizes summed by envelope: an envelope with none is left out whole.
        self.env_content: list[int] = [sum(map(_SIZE, m)) for m in self.members]
        self.total = self._measure()

    def _measure(self) -> int:
        sizes = [o + c for o, c in zip(self.env_overhead, self.env_content, strict=True) if c]
        return sum(sizes) + len(ENVELOPE_SEPARATOR) * max(len(sizes) - 1, 0)

    def changed(self, plan: SectionPlan) -> int:
        """Re-measure after ``plan`` changed; returns chars freed (positive) or added (negative)."""
        if plan.visible or plan.hidden or plan.restored:
            size = plan.overhead + plan.rows_chars + (len(plan.marker()) if plan.hidden else 0)
        else:
            size = 0
        delta = size - plan.size
        if not delta:
            return 0
        plan.size = size
        content = self.env_content
        i = plan.envelope_index
        old = content[i]
        content[i] = old + delta
        if old and content[i]:  # the envelope stays: only this section's size changed
            self.total += delta
            return -delta
        before = self.total  # the envelope appears or goes, with its tags and a separator
        self.total = self._measure()
        return before - self.total

    def emptied(self, plan: SectionPlan) -> int:
        """``changed`` for a section left with nothing to show (so it is left out whole)."""
        size = plan.size
        plan.size = 0
        i = plan.envelope_index
        left = self.env_content[i] = self.env_content[i] - size
        if left or not size:
            self.total -= size
            return size
        before = self.total  # the envelope goes, with its tags and a separator
        self.total = self._measure()
        return before - self.total

    def render(self) -> str:
        blocks = []
        for i, env in enumerate(self.envelopes):
            if not self.env_content[i]:
                continue
            body = "".join([p.render() for p in self.members[i] if p.size])
            pre = env.preamble + "\n" if env.preamble else ""
            blocks.append(f"<{env.tag}>\n{pre}{body}</{env.tag}>")
        return ENVELOPE_SEPARATOR.join(blocks)
