"""The fitting's shortcuts give what its step-by-step paths give (ADR D6).

Most of a tight budget's shedding takes a shortcut: a section whose rows all go is dropped in
one step without ordering its rows, every short form is taken at once when together they do
not free the excess, a section with no floor that ends as its marker is decided without
ordering its rows, and the drops down to a floor stop early when each one shrinks the total.
Each shortcut is checked here against the path it stands for, on random sections.
"""

from __future__ import annotations

import copy
import threading
import warnings

import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import contextplane.fitting as fitting
from contextplane import ContextSection, Envelope, Row, Shed, compose_projected_context
from contextplane.fitting import Layout, SectionPlan

from .helpers import SectionPlugin, host_of

ENVELOPES = [Envelope("working_state"), Envelope("injected_memory", "Reference data.", untrusted=True)]
MARKERS = ["+{n} more", "({n} hidden, {n} in all)", "more"]
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def sections(draw: st.DrawFn) -> list[ContextSection]:
    """Sections whose rows mostly have short forms, under shed behaviours that take shortcuts."""
    made = []
    for i in range(draw(st.integers(1, 7))):
        n = draw(st.integers(0, 12))
        ranks = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
        rows = [
            Row(
                f"s{i}-{j}",
                rank,
                draw(st.text(alphabet="ab <&\n", max_size=90)),
                short=draw(st.one_of(st.none(), st.text(alphabet="xy&", max_size=14))) if draw(st.booleans())
                else draw(st.sampled_from([f"s{i}-{j}", f"the short form of row {j} in section {i}"])),
                trust_tier=draw(st.integers(0, 2)),
            )
            for j, rank in enumerate(ranks)
        ]
        made.append(
            ContextSection(
                f"s{i}",
                draw(st.integers(0, 40)),
                draw(st.sampled_from([Shed.DEGRADE, Shed.DEGRADE, Shed.DROP_ROWS, Shed.DROP_SECTION, Shed.NEVER])),
                lambda _request, rows=rows: list(rows),
                draw(st.sampled_from(ENVELOPES)),
                heading=draw(st.sampled_from(["", "Heading:"])),
                floor=draw(st.sampled_from([0, 0, 1, 3])),
                more_marker=draw(st.sampled_from(MARKERS)),
            )
        )
    return made


def outcome(host, budget_tokens: int) -> tuple:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = compose_projected_context("q", host=host, budget_tokens=budget_tokens, record=False)
    reports = [(s.name, s.item_ids, s.chars, s.truncated, s.offered_ids, s.rendered) for s in p.sections]
    return p.text, p.overflow, p.used_chars, reports


def step_by_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn the degrading shortcuts off: every section degrades row by row, in rank order."""
    monkeypatch.setattr(fitting, "_degrade_away", lambda *_a: False)
    monkeypatch.setattr(fitting, "_degrade_all", lambda *_a: None)


@SETTINGS
@given(sections(), st.integers(1, 600))
def test_the_degrading_shortcuts_give_what_degrading_row_by_row_gives(specs, budget_tokens) -> None:
    host = host_of(*[SectionPlugin(context=[s], name=f"p_{s.name}") for s in specs])
    outcome(host, budget_tokens)  # every short form measured once, as in a session's later turns
    fast = outcome(host, budget_tokens)
    with pytest.MonkeyPatch.context() as mp:
        step_by_step(mp)
        slow = outcome(host, budget_tokens)
    assert fast == slow


def bench_shaped_host():
    """50 sections of 10 rows (the shape of bench/core_bench.py): most of them shed whole."""
    sheds = [Shed.DROP_ROWS, Shed.DROP_ROWS, Shed.DEGRADE, Shed.DROP_SECTION, Shed.DROP_ROWS]
    made = []
    for i in range(50):
        rows = [Row(f"s{i}-r{j}", j, f"[m:s{i}-r{j}] Memory row {j} of section {i}: deploys & <fail>.",
                    short=f"s{i}-r{j}") for j in range(10)]
        # One row whose short form is the longer: it keeps its full form when the others degrade.
        rows[3] = Row(f"s{i}-r3", 3, f"row 3 of {i}", short=f"the short form of row 3 in section {i}")
        made.append(ContextSection(f"section_{i:02d}", 10 + i, Shed.NEVER if i == 0 else sheds[i % 5],
                                   lambda _r, rows=rows: list(rows), ENVELOPES[i % 2], heading=f"Section {i}:"))
    return host_of(*[SectionPlugin(context=[s], name=f"p_{s.name}") for s in made])


def test_the_shortcuts_are_taken_on_a_tight_budget_and_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    host = bench_shaped_host()
    outcome(host, 4000)
    taken: list[bool] = []
    real = fitting._degrade_away

    def spy(*args):
        taken.append(real(*args))
        return taken[-1]

    monkeypatch.setattr(fitting, "_degrade_away", spy)
    fast = outcome(host, 4000)
    # Every degraded section went the shortcut (the last one shed may meet the budget part way).
    assert len(taken) >= 5 and all(taken[:-1])
    actions = {step.action for step in fast[1]}
    assert actions == {"drop_row", "drop_section", "degrade_row", "drop_to_floor"}
    assert {step.items for step in fast[1] if step.action == "degrade_row"} == {9}
    step_by_step(monkeypatch)
    assert outcome(host, 4000) == fast


def reference_drop_to(total: int, budget: int, cur: list[int], visible: int, hidden: int, floor: int,
                      marker: str) -> int:
    """How many rows ``_drop_to`` drops, one at a time with the marker re-measured each time
    (the loop it had before its shortcut): the first count that fits, else the smallest."""
    def marker_len(h: int) -> int:
        return len(marker.replace("{n}", str(h))) + 1 if h else 0

    best_total, best_v, v, h = total, visible, visible, hidden
    while total > budget and v > floor:
        v -= 1
        h += 1
        total += marker_len(h) - marker_len(h - 1) - cur[v]
        if total < best_total:
            best_total, best_v = total, v
    return visible - (v if total <= budget else best_v)


@SETTINGS
@given(st.lists(st.integers(3, 40), min_size=1, max_size=14), st.integers(0, 3), st.integers(0, 12),
       st.sampled_from(MARKERS), st.integers(0, 400))
# A row as long as the marker line it would bring: dropping it frees nothing, so it stays.
@example(cur=[8], floor=0, hidden=0, marker="+{n} more", budget=0)
@example(cur=[9, 8], floor=0, hidden=0, marker="+{n} more", budget=0)
@example(cur=[5, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9], floor=0, hidden=8, marker="+{n} more", budget=0)
def test_dropping_to_the_floor_stops_where_one_drop_at_a_time_would(cur, floor, hidden, marker, budget) -> None:
    rows = [Row(f"r{j}", j, "x" * (n - 3)) for j, n in enumerate(cur)]
    section = ContextSection("s", 1, Shed.DEGRADE, lambda _r: rows, ENVELOPES[0], floor=floor, more_marker=marker)
    plan = SectionPlan(section, "p", tuple(rows), {})
    assert plan.cur == cur
    layout = Layout([plan])
    if hidden:  # rows hidden by an earlier step, behind the marker
        plan.hidden = hidden
        layout.changed(plan)
    expected = reference_drop_to(layout.total, budget, cur, plan.visible, hidden, floor, marker)
    steps: list = []
    fitting._drop_to(layout, plan, budget, steps, floor, "drop_to_floor")
    assert len(cur) - plan.visible == expected
    assert [s[2] for s in steps] == ([expected] if expected else [])
    assert layout.total == len(layout.render())


def state(layout: Layout) -> list[tuple]:
    """What a section's report and rendering read (a hidden row's short form is neither)."""
    return [
        (p.visible, p.hidden, list(p.restored), sorted(i for i in p.short if i < p.visible), p.size, p.truncated)
        for p in layout.plans
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(3, 40), min_size=1, max_size=10), st.sampled_from(["", "Shed:"]))
def test_dropping_rows_whole_or_in_part_is_what_row_by_row_dropping_gives(cur, heading) -> None:
    # Every budget from nothing to everything: the shortcut's edge (the rows' lines against the
    # excess) is crossed, and what is given back after is the same.
    def build() -> tuple[Layout, SectionPlan]:
        keep = ContextSection("keep", 1, Shed.NEVER, list, ENVELOPES[0])
        rows = [Row(f"r{j}", (j * 7) % len(cur), "x" * (n - 3)) for j, n in enumerate(cur)]
        shed = ContextSection("shed", 2, Shed.DROP_ROWS, list, ENVELOPES[1], heading=heading)
        plans = [SectionPlan(keep, "p", (Row("k", 1, "y" * 20),), {}), SectionPlan(shed, "p", tuple(rows), {})]
        return Layout(plans), plans[1]

    for budget in range(build()[0].total + 1):
        layout, _plan = build()
        steps = fitting.fit(layout, budget)
        twin_layout, twin = build()
        twin_steps: list = []
        if twin_layout.total > budget:
            fitting._drop_rows(twin_layout, twin, budget, twin_steps)
            if twin_layout.total < budget and twin_steps:
                fitting.restore(twin_layout, budget, twin_steps, [twin])
        assert steps == twin_steps, budget
        assert state(layout) == state(twin_layout) and layout.render() == twin_layout.render(), budget


#: Lengths of a text or a short form: mostly short, some past a 200-char row bound.
LENGTHS = st.one_of(st.integers(0, 30), st.integers(0, 30), st.integers(190, 260))
#: Short forms of those lengths; spaced ones are cut at a space, well inside the bound.
SHORTS = st.builds(lambda n, spaced: ("s " * n)[:n] if spaced else "s" * n, LENGTHS, st.booleans())


@st.composite
def degrading(draw: st.DrawFn) -> list[SectionPlan]:
    """A never-shed section and a few degrading ones, every row with a measured short form."""
    limit = draw(st.sampled_from([None, 200]))
    plans = [SectionPlan(ContextSection("keep", 0, Shed.NEVER, list, ENVELOPES[0]), "p", (Row("k", 1, "k" * 9),), {})]
    for i in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 6))
        rows = tuple(
            Row(f"s{i}-{j}", draw(st.integers(0, 4)), "t" * draw(LENGTHS), short=draw(SHORTS),
                trust_tier=draw(st.integers(0, 1)))
            for j in range(n)
        )
        for row in rows:
            fitting.escape_measured(row.text)
            fitting.escape_measured(row.short or "")
        section = ContextSection(f"s{i}", 1 + i, Shed.DEGRADE, list, draw(st.sampled_from(ENVELOPES)),
                                 heading=draw(st.sampled_from(["", "H:"])), floor=draw(st.integers(0, 2)),
                                 more_marker=draw(st.sampled_from(MARKERS)))
        plans.append(SectionPlan(section, "p", rows, {}, limit))
    return plans


@settings(max_examples=60, deadline=None)
@given(degrading())
def test_degrading_at_every_budget_is_what_degrading_row_by_row_gives(plans) -> None:
    def fitted(budget: int) -> tuple:
        layout = Layout([copy.copy(p) for p in plans])
        for p in layout.plans:  # each copy its own mutable state
            p.cur = list(p.cur)
        steps = fitting.fit(layout, budget)
        return steps, state(layout), layout.render()

    for budget in range(Layout(plans).total + 1):
        fast = fitted(budget)
        with pytest.MonkeyPatch.context() as mp:
            step_by_step(mp)
            slow = fitted(budget)
        assert fast == slow, budget


@pytest.mark.parametrize("short", ["abcd", "abcde", "abcdef"])  # lines of 7, 8 and 9 chars
def test_a_degraded_row_no_longer_than_the_marker_line_is_not_swapped_for_it(short, monkeypatch) -> None:
    # "+1 more" and its newline are 8 chars: a degraded row of 8 frees nothing when it goes.
    def fitted() -> tuple:
        keep = SectionPlan(ContextSection("keep", 0, Shed.NEVER, list, ENVELOPES[0]), "p", (Row("k", 1, "k"),), {})
        section = ContextSection("d", 1, Shed.DEGRADE, list, ENVELOPES[0])
        plan = SectionPlan(section, "p", (Row("r", 1, "a long row " * 4, short=short),), {})
        layout = Layout([keep, plan])
        return fitting.fit(layout, 0), state(layout), layout.render()

    fitting.escape_measured(short)
    fast = fitted()
    step_by_step(monkeypatch)
    assert fitted() == fast
    swapped = ["drop_to_floor"] if len(short) > 5 else []  # only a longer row makes way for the marker
    assert [s[1] for s in fast[0]] == ["degrade_row", *swapped, "drop_section"]


def test_reports_and_steps_read_late_are_those_of_the_composition() -> None:
    # Reports and shed steps are made when first read; every way of reading them agrees.
    host = bench_shaped_host()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = compose_projected_context("q", host=host, budget_tokens=4000, record=False)
        second = compose_projected_context("q", host=host, budget_tokens=4000, record=False)
        third = compose_projected_context("q", host=host, budget_tokens=4000, record=False)
    assert first.as_dict() == second.as_dict()  # as_dict reads both before anything else did
    assert first == second and repr(first) == repr(second)
    evolved = attrs.evolve(third, text="other")
    assert evolved.sections == third.sections and evolved.overflow == third.overflow
    assert copy.copy(third).sections is third.sections
    assert len(first.sections) == 50 and {s.action for s in first.overflow} >= {"drop_row", "drop_section"}
    assert first.delivered_ids == {s.name: s.item_ids for s in first.sections if s.item_ids}
    assert first.section("section_49").offered_ids == tuple(f"s49-r{j}" for j in range(10))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shared = compose_projected_context("q", host=host, budget_tokens=4000, record=False)
    read: list[tuple] = []
    threads = [threading.Thread(target=lambda: read.append((shared.sections, shared.overflow))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(read) == 8 and all(r == (first.sections, first.overflow) for r in read)
    with pytest.raises(AttributeError, match="'ProjectedContext' object has no attribute 'nope'"):
        shared.nope  # noqa: B018
