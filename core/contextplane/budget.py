"""The projected-context budget (ADR D6): a share of the model's context window, in chars.

Tokens are estimated as chars//4 (the ADR's non-goal: no tokenizer), so the budget is kept in
chars and every measurement is exact on the composed text.
"""

from __future__ import annotations

from contextplane.config import Config
from contextplane.notices import BudgetWarning, warn_once

CHARS_PER_TOKEN = 4
#: The share of a known context window the floored budget may take before it warns (once).
FLOOR_WINDOW_SHARE = 0.25


def approx_tokens(chars: int) -> int:
    """The ADR's estimate: chars // 4."""
    return chars // CHARS_PER_TOKEN


def budget_chars(
    config: Config,
    *,
    budget_tokens: int | None = None,
    context_window: int | None = None,
) -> int | None:
    """The budget in chars, or None for unbounded.

    An explicit ``budget_tokens`` is taken as given (0 = unbounded, no floor). Otherwise the
    budget is ``context.budget_pct`` percent of the context window, floored at
    ``context.budget_floor_chars``; ``budget_pct = 0`` means unbounded. An unknown window
    means unbounded too, with one warning per process: the origin project's budget silently
    did nothing in that case. The floor is kept even for a small model (ADR D6), but when it
    takes more than ``FLOOR_WINDOW_SHARE`` of the window it warns once, naming the key to lower.
    """
    if budget_tokens is not None:
        if budget_tokens < 0:
            raise ValueError(f"budget_tokens must be >= 0, got {budget_tokens}")
        return None if budget_tokens == 0 else budget_tokens * CHARS_PER_TOKEN
    pct = config.context.budget_pct
    if pct == 0:
        return None
    window = context_window if context_window is not None else config.context.context_window
    if window is None:
        warn_once(
            ("budget", "unknown-window"),
            "the model's context window is unknown, so the projected context is unbounded; "
            "set context.context_window (tokens) or pass budget_tokens",
            BudgetWarning,
        )
        return None
    chars = int(window * pct / 100) * CHARS_PER_TOKEN
    floor = config.context.budget_floor_chars
    if floor > chars and floor > FLOOR_WINDOW_SHARE * window * CHARS_PER_TOKEN:
        warn_once(
            ("budget", "floor-over-window", floor, window),
            f"the projected-context budget is floored at context.budget_floor_chars ({floor} chars, "
            f"~{approx_tokens(floor)} tokens), {100 * floor / (window * CHARS_PER_TOKEN):.0f}% of the "
            f"model's {window}-token context window (more than {FLOOR_WINDOW_SHARE:.0%}); lower "
            "context.budget_floor_chars for a model this small",
            BudgetWarning,
        )
    return max(chars, floor)
