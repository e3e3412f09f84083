"""How an injection-log row is written and read back, for every backend: its cells in insert
order, the columns a listing selects and the ``InjectionRow`` built from them (the session id
encoded and decoded as the backend stores text).

Why shared: the embedded and PostgreSQL backends each wrote the select list and the nine-field
row out, and a field added to the log in one was a field the other's ``rows`` dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from contextplane.records.injections import InjectionRow

#: The columns an insert writes, in ``injection_cells`` order (the id is the table's).
INJECTION_INSERT_COLUMNS: Final[str] = (
    "session_id, turn_index, at, mode, approx_tokens, used_chars, budget_chars, delivered"
)
#: The injection log's columns as ``injection_row`` reads them.
INJECTION_SELECT: Final[str] = (
    "SELECT id, session_id, turn_index, at, mode, approx_tokens, used_chars, budget_chars, delivered "
    "FROM injection_log"
)


def _same(text: str) -> str:
    return text


def injection_cells(row: InjectionRow, text: Callable[[str], str] = _same) -> tuple[Any, ...]:
    """The cells of ``row`` in ``INJECTION_INSERT_COLUMNS`` order (``delivered`` as sorted JSON)."""
    delivered = json.dumps(row.delivered, sort_keys=True)
    return (
        text(row.session_id),
        row.turn_index,
        row.at,
        row.mode,
        row.approx_tokens,
        row.used_chars,
        row.budget_chars,
        delivered,
    )


def injection_row(cells: Sequence[Any], text: Callable[[str], str] = _same) -> InjectionRow:
    """An ``InjectionRow`` from the cells of ``INJECTION_SELECT`` (``text`` decodes the session
    id as the backend stores text)."""
    return InjectionRow(
        id=int(cells[0]),
        session_id=text(cells[1]),
        turn_index=cells[2],
        at=cells[3],
        mode=cells[4],
        approx_tokens=cells[5],
        used_chars=cells[6],
        budget_chars=cells[7],
        delivered=json.loads(cells[8]),
    )
