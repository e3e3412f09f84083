"""Shedding: fitting a layout to the budget, section by section, and giving room back (ADR D6).

Shedding goes from the lowest-priority section up, exhausting each section's behaviour before
the next and re-measuring after every step; rows are whole or absent. Two rules keep one bad
row or one floor from breaking the budget (ADR D6: only never-shed sections may exceed it);
a third, the row bound, is applied before anything is measured (``rows.cut_row``):

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

import operator
from collections.abc import Hashable, Sequence
from itertools import compress

from contextplane.fitting.plans import _NO_LINES, _NONE, Layout, SectionPlan
from contextplane.fitting.rows import _LINE, _LINE_LEN, ROW_PREFIX, _line_of, _lines, cut_row, escape_measured
from contextplane.sections import Shed
from contextplane.types import Step

_SHORT = operator.attrgetter("short")
_CUR = operator.attrgetter("cur")

#: The shed behaviours, bound once (an enum member is a class attribute lookup away).
_NEVER, _DROP_ROWS, _DEGRADE, _DROP_SECTION = Shed.NEVER, Shed.DROP_ROWS, Shed.DEGRADE, Shed.DROP_SECTION


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
