"""A row's text as it is delivered: escaped, measured, cut to the row bound, and the order rows
are rendered in.

Why measuring lives with escaping and the row line: the budget is a promise about the composed
text, so the size the shedding loop tracks must be exactly ``len()`` of what is rendered. A row
renders as ``- first line`` with continuation lines indented (row text never starts a line), and
``escape_measured`` answers its escaped text and that line's length from one memo.

A row whose text is longer than ``context.max_row_chars`` is cut at a line boundary, with a
visible marker, before anything is measured (``cut_row``): one bad row cannot break the budget.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Sequence
from typing import Any

from contextplane.escaping import escape_untrusted
from contextplane.memo import MEMO_LIMIT, new_memo
from contextplane.notices import log_failure
from contextplane.sections import Row

#: The logger of the fitting package (its name predates the split).
log = logging.getLogger("contextplane.fitting")

ROW_PREFIX = "- "
CONTINUATION = "  "

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
