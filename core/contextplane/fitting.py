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
  one that fits comes back (``restore``). The ADR's order holds across sections: a section
  gets room back only while every section above it has all its rows back, so a retrieved
  row never comes back while a digest entry stays shed ("RAG hits first, then digest");
  the room a higher-priority row cannot use stays empty rather than break that order;
* a ``DEGRADE`` floor yields when it does not fit: if every other sheddable row is gone and
  the projection is still over budget, the floor's rows are dropped too, lowest-ranked first,
  and then the section (``drop_below_floor``).

Under a tight budget most sections are shed whole, so the common cases take shortcuts that
reach the same state as the step-by-step rules in fewer passes, most of them without putting
the section's rows in rank order: a section whose lines are no more than the excess is dropped
in one step, every short form is taken at once when together they do not free the excess, a
section with no floor that ends as its marker is decided from its lengths, and the drops to a
floor stop early when each one shrinks the total (tests/core/test_fitting_paths.py checks
each against the path it stands for).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Hashable, Mapping, Sequence
from itertools import compress
from typing import Any

from contextplane.escaping import escape_untrusted
from contextplane.memo import MEMO_LIMIT, new_memo
from contextplane.notices import log_failure
from contextplane.sections import ContextSection, Envelope, Row, Shed
from contextplane.types import ShedStep as ShedStep
from contextplane.types import Step as Step

log = logging.getLogger("contextplane.fitting")

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


#: The rendered line(s) of a row's text and their length, memoised like ``escape_untrusted``
#: (two maps filled together, so measuring a draft is one lookup per row, and rendering one).
_LINE: dict[str, str] = new_memo()
_LINE_LEN: dict[str, int] = new_memo()


def escape_measured(text: str) -> tuple[str, int]:
    """The escaped text and its rendered line length, memoised like ``escape_untrusted``."""
    length = _LINE_LEN.get(text)
    escaped = escape_untrusted(text)
    if length is None:
        line = _lines(escaped)
        length = len(line)
        if len(_LINE_LEN) >= MEMO_LIMIT or len(_LINE) >= MEMO_LIMIT:
            _LINE_LEN.clear()
            _LINE.clear()
        _LINE[text] = line
        _LINE_LEN[text] = length
    return escaped, length


def _line_of(text: str) -> str:
    """The rendered line(s) of a row's text: the memo's, or made again when the memo was cleared
    since the row was measured."""
    line = _LINE.get(text)
    return line if line is not None else _lines(escape_measured(text)[0])


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


_TEXT = operator.attrgetter("text")
_SHORT = operator.attrgetter("short")
_ROW_ID = operator.attrgetter("id")
#: Delivery order: priority, then name (a documented, registration-independent rule).
_DELIVERY_ORDER = operator.attrgetter("priority", "name")
_ENVELOPE_TAG = operator.attrgetter("section.envelope.tag")
_SIZE = operator.attrgetter("size")
_CUR = operator.attrgetter("cur")
#: The shared empty list of a plan with nothing cut or restored (replaced before any append).
_NONE: list[Any] = []
#: The shared empty map of a plan with no degraded or cut row (replaced before any insert).
_NO_LINES: dict[int, str] = {}


#: The shed behaviours, bound once (an enum member is a class attribute lookup away).
_NEVER, _DROP_ROWS, _DEGRADE, _DROP_SECTION = Shed.NEVER, Shed.DROP_ROWS, Shed.DEGRADE, Shed.DROP_SECTION


def _row_key(row: Row) -> tuple[float, int, str]:
    return (row.rank, -row.trust_tier, row.id)


def _rank_order(rows: Sequence[Row]) -> list[int] | None:
    """The indices of ``rows`` in rank order (ties: higher trust tier, then id), or None when
    they are in that order already (the usual draft)."""
    ranks = [row.rank for row in rows]
    if all(map(operator.lt, ranks, ranks[1:])):
        return None
    n = len(ranks)
    if len(set(ranks)) == n:  # distinct ranks need no tie-break
        index = sorted(range(n), key=ranks.__getitem__)
    else:
        index = sorted(range(n), key=lambda i: _row_key(rows[i]))
    return None if index == list(range(n)) else index


def _render_order(name: str, indices: Sequence[int], rows: Sequence[Row], key: Any) -> Sequence[int]:
    """``indices`` sorted by the draft's ``render_key``; rank order, logged once, when the key
    fails on a row (a plugin's key must not take the turn down: its rows are still delivered)."""
    try:
        return sorted(indices, key=lambda i: key(rows[i]))
    except Exception as exc:
        log_failure(
            log, ("render_key", name), "section %r: its render_key failed, rows kept in rank order: %s",
            name, exc, exc=exc,
        )
        return indices


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


def _drop_rows(layout: Layout, plan: SectionPlan, budget: int, steps: list[Step]) -> bool:
    # Equivalent to dropping one row at a time and re-measuring: every drop but the one that
    # empties the section frees exactly that row's line, so the stopping point is found in one
    # pass and the layout is re-measured once.
    excess = layout.total - budget
    plan.order()
    v = plan.visible
    freed = 0
    cur = plan.cur
    while v > 0 and freed < excess:
        v -= 1
        freed += cur[v]
    dropped = plan.visible - v
    if not dropped:
        return False
    plan.had = plan.visible  # what ``restore`` may give back
    plan.rows_chars -= freed
    plan.visible = v
    steps.append((plan.name, "drop_row", dropped, layout.changed(plan)))
    return True


def _degrade(layout: Layout, plan: SectionPlan, budget: int, steps: list[Step]) -> None:
    if not plan.section.floor and _degrade_away(layout, plan, budget, steps):
        return
    # 1. Short forms, lowest-ranked row first, only where the short form is actually shorter;
    # a row's short form is measured only when its turn comes.
    plan.order()
    degraded = _degrade_all(layout, plan, budget, steps)
    if degraded is None:
        _degrade_rows(layout, plan, budget, steps)
    # 2. Drop to the floor behind a "+N more" marker.
    _drop_to(layout, plan, budget, steps, plan.section.floor, "drop_to_floor")
    if degraded and plan.visible:  # the lines of the degraded rows still shown
        shorts, shorter = degraded
        keep = shorter[: plan.visible]
        try:
            lines = list(map(_LINE.__getitem__, compress(shorts, keep)))
        except KeyError:  # the memo was cleared since the short forms were measured
            lines = list(map(_line_of, compress(shorts, keep)))
        if lines:
            plan.short = dict(zip(compress(range(plan.visible), keep), lines, strict=True))


def _degrade_away(layout: Layout, plan: SectionPlan, budget: int, steps: list[Step]) -> bool:
    """``_degrade`` for a section with no floor that ends as its marker alone, decided without
    putting its rows in order: the case of ``_degrade_all`` (so every shorter short form is
    taken, whatever the order), after which every row is longer than the marker can grow by
    (so each drop shrinks the total) and even the last drop leaves the projection over budget
    (so all of them are made). Returns False, having done nothing, when that is not the case."""
    rows, cur, limit = plan.rows, plan.cur, plan._row_limit
    visible = plan.visible
    if not visible or visible != len(rows) or plan.hidden or plan.short:
        return False
    try:
        lengths = [_LINE_LEN[row.short] for row in rows]  # type: ignore[index]  # (None: KeyError)
    except KeyError:  # a row without a short form (None), or one not measured yet
        return False
    if limit and max(lengths) > limit + 3:
        return False  # a short form may need cutting
    degraded = [s if s < c else c for c, s in zip(cur, lengths, strict=True)]  # min(), inline
    kept = sum(degraded)
    saved = plan.rows_chars - kept
    total = layout.total - saved  # what degrading leaves (the section keeps rows, so no envelope goes)
    if total <= budget:
        return False  # some rows keep their full form: which ones depends on the order
    marker = plan.section.more_marker
    slots = marker.count("{n}")
    fixed = len(marker) - 3 * slots + 1
    if min(degraded) <= fixed + slots or total + fixed + slots * len(str(visible)) - kept <= budget:
        return False  # dropping stops before the last row: where depends on the order
    if saved:
        count = sum(map(operator.lt, lengths, cur))
        cur[:] = degraded
        plan.rows_chars = kept
        steps.append((plan.name, "degrade_row", count, layout.changed(plan)))
    plan.rows_chars = 0
    plan.hidden, plan.visible = visible, 0
    steps.append((plan.name, "drop_to_floor", visible, layout.changed(plan)))
    return True


def _degrade_all(
    layout: Layout, plan: SectionPlan, budget: int, steps: list[Step]
) -> tuple[list[str], list[bool]] | None:
    """``_degrade_rows`` in a few passes in C for the usual case, where even every short form
    together does not free the excess, so every row whose short form is shorter is degraded
    whatever the order: every row has a short form already measured, none is over the row
    bound, and nothing was degraded before. Returns the visible rows' short forms and which
    of them were taken (their lines are made once it is known which rows stay shown), or
    None, having done nothing, when the case does not apply."""
    visible, cur, limit = plan.visible, plan.cur, plan._row_limit
    if plan.short or not visible:
        return None
    shorts = list(map(_SHORT, plan.rows[:visible]))
    try:
        lengths = list(map(_LINE_LEN.__getitem__, shorts))
    except KeyError:  # a row without a short form (None), or one not measured yet
        return None
    if limit and max(lengths) > limit + 3:
        return None  # a short form may need cutting
    shown = cur[:visible]
    degraded = [s if s < c else c for c, s in zip(shown, lengths, strict=True)]  # min(), inline
    saved = plan.rows_chars - sum(degraded) if visible == len(cur) else sum(shown) - sum(degraded)
    if saved >= layout.total - budget:
        return None  # some rows keep their full form: which ones depends on the order
    shorter = list(map(operator.lt, lengths, shown))
    if saved:
        cur[:visible] = degraded
        plan.rows_chars -= saved
        steps.append((plan.name, "degrade_row", shorter.count(True), layout.changed(plan)))
    return shorts, shorter


def _degrade_rows(layout: Layout, plan: SectionPlan, budget: int, steps: list[Step]) -> None:
    """Degrade row by row, lowest-ranked first, until the excess is freed."""
    short = plan.short
    rows, cur, limit = plan.rows, plan.cur, plan._row_limit
    excess = layout.total - budget
    count = saved = 0
    for i in range(plan.visible - 1, -1, -1):
        if saved >= excess:
            break
        text = rows[i].short
        if text is None or i in short:
            continue
        new_len = _LINE_LEN.get(text)
        if new_len is None:
            new_len = escape_measured(text)[1]
        line = None
        if limit and new_len > limit + 3:  # its escaped text may be over the row bound
            s = escape_measured(text)[0]
            if len(s) > limit:
                line = _lines(cut_row(s, limit))
                new_len = len(line)
        if new_len >= cur[i]:
            continue
        if short is _NO_LINES:
            short = plan.short = {}
        saved += cur[i] - new_len
        cur[i] = new_len
        short[i] = line if line is not None else _line_of(text)
        count += 1
    plan.rows_chars -= saved
    if count:
        steps.append((plan.name, "degrade_row", count, layout.changed(plan)))


def _drop_to(
    layout: Layout, plan: SectionPlan, budget: int, steps: list[Step], floor: int, action: str
) -> None:
    """Drop visible rows, lowest-ranked first, down to ``floor``, behind the "+N more" marker.
    The marker can outweigh a tiny row, so the smallest state seen is kept when nothing fits.
    Simulated on local counters (the section never empties here: it keeps the marker), then
    applied once."""
    start_visible = plan.visible
    if layout.total <= budget or start_visible <= floor:
        return
    plan.order()
    marker = plan.section.more_marker
    # The marker line's length is its text's, with each "{n}" replaced by the count, plus "\n".
    slots = marker.count("{n}")
    fixed = len(marker) - 3 * slots + 1
    v, hidden = start_visible, plan.hidden
    marker_len = len(plan.marker())
    total = layout.total
    best_total, best_v = total, v
    cur = plan.cur
    # When every line to drop is longer than the marker can grow by in one step, each drop
    # shrinks the total: if even the last one leaves it over budget, all of them are made.
    grows = slots if hidden else fixed + slots
    if min(cur[floor:v]) > grows:
        last = hidden + v - floor
        if total - marker_len + fixed + slots * len(str(last)) - sum(cur[floor:v]) > budget:
            v = best_v = floor
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
    steps.append((plan.name, action, dropped, layout.changed(plan)))


def _drop_section(layout: Layout, plan: SectionPlan, steps: list[Step], action: str = "drop_section") -> bool:
    items = plan.visible
    if not items and not plan.hidden:
        return False
    plan.had = items  # what ``restore`` may give back
    plan.visible = plan.hidden = plan.rows_chars = 0
    steps.append((plan.name, action, items, layout.emptied(plan)))
    return True


def fit(layout: Layout, budget: int | None) -> list[Step]:
    """Shed until ``layout.total <= budget`` or nothing sheddable is left; returns the steps."""
    steps: list[Step] = []
    if budget is None or layout.total <= budget:
        return steps
    dropped: list[SectionPlan] = []  # what ``restore`` may give back to, lowest priority first
    for plan in reversed(layout.plans):
        if layout.total <= budget:
            break
        shed = plan.section.shed
        if shed is _NEVER:
            continue
        if shed is _DEGRADE:
            _degrade(layout, plan, budget, steps)
            continue
        if shed is _DROP_ROWS and plan.rows_chars > layout.total - budget:
            if _drop_rows(layout, plan, budget, steps):
                dropped.append(plan)
            continue
        # The whole section goes: a DROP_SECTION one, or a DROP_ROWS one whose lines are no
        # more than the excess (every row goes, whatever their order: each frees its line).
        # ``_drop_section``, inline: most sections a tight budget sheds go this way.
        items = plan.visible
        if items:
            plan.had = items
            plan.visible = plan.rows_chars = 0
            action = "drop_section" if shed is _DROP_SECTION else "drop_row"
            steps.append((plan.name, action, items, layout.emptied(plan)))
            dropped.append(plan)
    # Floors yield (ADR D6: only never-shed sections are never dropped), lowest priority first.
    for plan in reversed(layout.plans):
        if layout.total <= budget:
            break
        if plan.section.shed is _DEGRADE and (plan.visible or plan.hidden):
            _drop_to(layout, plan, budget, steps, 0, "drop_below_floor")
            if layout.total > budget:
                _drop_section(layout, plan, steps)
    if layout.total < budget and dropped:
        restore(layout, budget, steps, _above_the_first_kept_shed(layout, steps, dropped[::-1]))
    return steps


def _above_the_first_kept_shed(
    layout: Layout, steps: list[Step], dropped: Sequence[SectionPlan]
) -> Sequence[SectionPlan]:
    """The dropped sections ``restore`` may give room to: those above the best section whose
    shedding ``restore`` cannot undo (a ``DEGRADE`` section that degraded or hid rows). Every
    section below it was emptied before it shed anything, and stays so (ADR D6 order)."""
    degraded = {name for name, *_ in steps} - {plan.name for plan in dropped}
    if not degraded:
        return dropped
    first = next(p.priority for p in layout.plans if p.name in degraded)
    return [plan for plan in dropped if plan.priority < first]


#: The shortest line a row can have (an empty text: "- " and the newline).
_MIN_LINE = len(ROW_PREFIX) + 1


def restore(
    layout: Layout, budget: int, steps: list[Step], dropped: Sequence[SectionPlan] | None = None
) -> None:
    """Give the room left back to dropped rows, best section and best rank first, so a row that
    did not fit never takes smaller rows with it. Only whole rows of ``DROP_ROWS`` sections and
    whole ``DROP_SECTION`` sections come back, each only if the projection still fits; the
    shedding steps are rewritten to what was dropped in the end. A section that still misses
    rows once offered the room ends the pass: the sections below it stay as shed (ADR D6:
    a lower-priority section loses everything before a higher one loses anything).
    ``dropped``: the sections that dropped rows or themselves, in delivery order (``fit``
    knows them; else read off the steps)."""
    if dropped is None:
        names = {name for name, action, _items, _chars in steps if action in ("drop_row", "drop_section")}
        dropped = [plan for plan in layout.plans if plan.name in names]
    room = budget - layout.total
    if room < min(map(min, map(_CUR, dropped)), default=_MIN_LINE):
        return  # not even the shortest of their lines fits (the usual case under a tight budget)
    for plan in dropped:  # best section first; the first that stays short ends the pass
        if room < _MIN_LINE:
            return  # not even the shortest line fits any more
        shed = plan.section.shed
        had = plan.had
        if shed is _DROP_SECTION and plan.size == 0:
            rows_chars = sum(plan.cur[:had])
            if room < rows_chars:
                return  # the section alone is larger than the room left: those below stay shed
            plan.visible = had
            plan.rows_chars = rows_chars
            added = -layout.changed(plan)
            if layout.total > budget:  # its heading or envelope did not fit
                plan.visible = 0
                plan.rows_chars = 0
                layout.changed(plan)
                return
            _give_back(steps, plan.name, had, added)
            room = budget - layout.total
        elif shed is _DROP_ROWS and plan.visible < had:
            if min(plan.cur[plan.visible : had]) > room:
                return  # not one of its dropped rows fits (the usual case): skip the loop
            plan.order()  # (a section dropped whole was never ordered; nothing of it is kept now)
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
            if plan.visible + len(plan.restored) < had:
                return  # a row of it stays shed, so every section below stays as shed too
            room = budget - layout.total


def _give_back(steps: list[Step], section: str, items: int, chars: int) -> None:
    """Take ``items`` rows and ``chars`` chars off the section's last dropping step."""
    for index in range(len(steps) - 1, -1, -1):
        name, action, had, freed = steps[index]
        if name == section and action in ("drop_row", "drop_section"):
            if had <= items:
                del steps[index]
            else:
                steps[index] = (section, action, had - items, freed - chars)
            return


def overflow_key(layout: Layout, budget: int) -> Hashable:
    """Identifies a never-shed overflow, so its warning fires once per distinct cause."""
    return ("never-shed-overflow", budget, tuple((p.name, p.size) for p in layout.plans if p.size))
