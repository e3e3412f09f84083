"""How an injection-log row is read back, for every backend: the columns a listing selects and the
``InjectionRow`` built from them (the session id decoded as the backend stores text).

Why shared: the embedded and PostgreSQL backends each wrote the select list and the nine-field
row out, and a field added to the log in one was a field the other's ``rows`` dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from contextplane.records.injections import InjectionRow

#: The injection log's columns as ``injection_row`` reads them.
INJECTION_SELECT: Final[str] = (
    "SELECT id, session_id, turn_index, at, mode, approx_tokens, used_chars, budget_chars, delivered "
    "FROM injection_log"
)


def _same(text: str) -> str:
    return text


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
