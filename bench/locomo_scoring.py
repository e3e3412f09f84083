"""Scoring for bench/locomo_bench.py, kept apart so it can be tested on made-up rows.

Evidence recall of one question is the share of its evidence turns delivered; a question is
"all evidence" when every one of them was. Figures over a set of questions are means over the
questions (each question weighs the same, whatever its evidence count).

A baseline is packed the way the retrieved section is: its ranked rows are taken in order while
they fit, and the first that does not fit ends the list (D6 sheds the lowest-ranked rows first,
so what our section delivers is also a prefix of its ranking). A row costs what our renderer
charges for it: its text plus a per-row overhead (attribution label, bullet, escaping, line
break), and the projection a fixed overhead (envelope, heading); both are fitted on our own
composed projections of the same run (``fit_overhead``), so a baseline row pays what ours pays.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence

import attrs
import numpy as np


def evidence_recall(delivered: Iterable[str], evidence: Sequence[str]) -> tuple[float, bool]:
    """(share of ``evidence`` in ``delivered``, whether all of it is)."""
    if not evidence:
        raise ValueError("a question without evidence cannot be scored; drop it before scoring")
    got = set(delivered)
    found = sum(e in got for e in evidence)
    return found / len(evidence), found == len(evidence)


def delivered_turns(ids: Iterable[str], id_map: Mapping[str, Sequence[str]]) -> set[str]:
    """The turns (``dia_id``s) a list of delivered memory ids stands for. A memory may stand for
    several turns: the store keeps one row for turns with the same text (deduplication)."""
    return {dia for i in ids for dia in id_map.get(i, ())}


@attrs.frozen
class Overhead:
    """What the rendered projection costs beyond the rows' own text, in chars."""

    fixed: float
    per_row: float
    #: How many projections the fit used, and how well it explains them (R^2; 1 = exactly).
    samples: int = 0
    r2: float = 1.0

    def row_cost(self, text_chars: int) -> float:
        return text_chars + self.per_row

    def pack(self, texts_chars: Sequence[int], budget_chars: int | None) -> int:
        """How many of the ranked rows (their text lengths, best first) fit the budget."""
        if budget_chars is None:
            return len(texts_chars)
        room = budget_chars - self.fixed
        taken = 0
        for chars in texts_chars:
            room -= self.row_cost(chars)
            if room < 0:
                break
            taken += 1
        return taken

    def used_chars(self, texts_chars: Sequence[int]) -> int:
        """What a projection of these rows would measure (0 for no rows: nothing is rendered)."""
        if not texts_chars:
            return 0
        return round(self.fixed + sum(self.row_cost(c) for c in texts_chars))


def fit_overhead(samples: Iterable[tuple[int, int, int]]) -> Overhead:
    """Fit ``used = fixed + per_row * rows + text`` on ``(rows, text_chars, used_chars)`` of
    composed projections that delivered rows. With a single row count seen (no slope to fit),
    all of the overhead is charged per row (the dearer choice for the baseline)."""
    data = [(n, used - text) for n, text, used in samples if n > 0]
    if not data:
        raise ValueError("no composed projection delivered a row: nothing to measure the overhead on")
    rows = np.array([d[0] for d in data], dtype=float)
    extra = np.array([d[1] for d in data], dtype=float)
    if len(set(rows.tolist())) < 2:
        return Overhead(0.0, float(statistics.fmean((extra / rows).tolist())), len(data), 1.0)
    per_row, fixed = np.polyfit(rows, extra, 1)
    predicted = fixed + per_row * rows
    total = float(((extra - extra.mean()) ** 2).sum())
    r2 = 1.0 - float(((extra - predicted) ** 2).sum()) / total if total else 1.0
    return Overhead(float(fixed), float(per_row), len(data), r2)


def recall_at(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Share of ``evidence`` among the first ``k`` of ``ranked`` (turn ids)."""
    return evidence_recall(ranked[:k], evidence)[0]


#: Why a row the section's own search returned was not offered (``unoffered_verdict``).
GATED = "cut by min_relevance (the question's gate)"
UNDER_ROW_FLOOR = "cut by min_row_relevance"
UNDER_TRUST = "dropped by inject_min_trust"
PAST_BUDGET = "ranked past the budget (never offered)"


def unoffered_verdict(
    relevance: float, best: float, trust: int, *, floor: float, row_floor: float, min_trust: int
) -> str:
    """Why the retrieved section did not offer a row its search returned, by the section's own
    rules (``contextplane_sections.retrieved._draft_of``): the gate cuts every row of a question
    whose ``best`` hit is under ``floor``; ``row_floor`` (when above 0) each row under it; then
    the trust floor; anything else came after the rows that filled the budget. Why not "its
    relevance is under the floor": the floor gates the question, not the row, so a low row of an
    answered question was cut by the budget (the diagnosis had counted those as the floor's)."""
    if best < floor:
        return GATED
    if row_floor > 0 and relevance < row_floor:
        return UNDER_ROW_FLOOR
    if trust < min_trust:
        return UNDER_TRUST
    return PAST_BUDGET


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


def control_limit(chance: float) -> float:
    """The most a shuffled id map may score before the control counts as not collapsed: near 0
    (0.1), or a little above chance (the share of the scope delivered) when that is higher."""
    return max(0.1, chance + 0.05)


@attrs.frozen
class OrderMeasure:
    """Where a layout puts the delivered evidence, over a set of composed questions.

    The retrieved section keeps rows by rank and then lays the kept rows out (``context.
    retrieved_order``); which rows are delivered does not depend on the layout, so both layouts
    are measured on the same deliveries. ``position``: mean place of an evidence row in the
    section, 0 the first row and 1 the last (a reader that attends to the start and end of its
    input, "lost in the middle", prefers it low). ``in_time_order``: over questions with two or
    more evidence rows delivered, the share of their pairs shown in the order they were said
    (what a question about before/after or how long needs)."""

    position: float
    in_time_order: float
    questions: int
    pairs: int


def order_measure(
    deliveries: Iterable[tuple[Sequence[str], Sequence[str]]], said: Mapping[str, int]
) -> OrderMeasure:
    """``deliveries``: (the delivered ids in the layout's order, the question's evidence ids);
    ``said``: each id's place in its conversation (the order things were said)."""
    positions: list[float] = []
    ordered = pairs = questions = 0
    for shown, evidence in deliveries:
        wanted = set(evidence)
        at = [i for i, row in enumerate(shown) if row in wanted]
        if not at:
            continue
        questions += 1
        span = max(len(shown) - 1, 1)
        positions.extend(i / span for i in at)
        times = [said[shown[i]] for i in at]
        for a in range(len(times)):
            for b in range(a + 1, len(times)):
                pairs += 1
                ordered += times[a] < times[b]
    return OrderMeasure(
        position=statistics.fmean(positions) if positions else float("nan"),
        in_time_order=ordered / pairs if pairs else float("nan"),
        questions=questions,
        pairs=pairs,
    )
