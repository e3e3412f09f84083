"""The command line's whole-number parameters: turns, calls, limits, counts and days.

Why one type instead of ``type=int``: Python's ints have no ceiling, SQLite's and PostgreSQL's
do (signed 64 bits), so ``--turn 99999999999999999999999`` used to pass Click and die in the
driver with ``OverflowError`` and a traceback. Every whole-number flag and argument uses
``Whole``, which refuses such a value as a usage error naming it (one ``error:`` line).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

import click

if TYPE_CHECKING:
    _IntParam = click.ParamType[int]  # generic from click 8.2; a plain class before
else:
    _IntParam = click.ParamType

#: The largest whole number a store can hold or compare (signed 64 bits).
STORE_INT_MAX: Final[int] = 2**63 - 1

_DECIMAL: Final[re.Pattern[str]] = re.compile(r"[+-]?[0-9]+")


class Whole(_IntParam):
    """A decimal whole number in ``[lo, hi]`` (``hi`` defaults to the store's largest)."""

    name = "integer"

    def __init__(self, lo: int = 0, hi: int = STORE_INT_MAX) -> None:
        self.lo = lo
        self.hi = hi

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """Click's own wording for a value out of range, plus the store's ceiling by name."""
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip()
            # Digits only, and few enough that int() is cheap (Python refuses > 4300 digits).
            if not _DECIMAL.fullmatch(text) or len(text) > 40:
                self.fail(f"{_shown(value)} is not a valid integer.", param, ctx)
            number = int(text)
        if number > STORE_INT_MAX:
            ceiling = f"the largest whole number a store holds ({STORE_INT_MAX})"
            self.fail(f"{_shown(value)} is past {ceiling}.", param, ctx)
        if not self.lo <= number <= self.hi:
            span = f"x>={self.lo}" if self.hi == STORE_INT_MAX else f"{self.lo}<=x<={self.hi}"
            self.fail(f"{_shown(value, number)} is not in the range {span}.", param, ctx)
        return number

    def __repr__(self) -> str:
        return f"Whole({self.lo}, {self.hi})"


def _shown(value: Any, number: int | None = None) -> str:
    """The bad value (as Click shows it: a number bare, text quoted), shortened so a
    10,000-digit argument makes a short error line."""
    text = str(value) if number is None else str(number)
    text = text if len(text) <= 40 else text[:37] + "..."
    return text if number is not None else repr(text)
