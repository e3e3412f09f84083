"""The injection log (ADR 0069 D6, required on every surface by ADR D8).

One row per recorded projection: session, turn, time, mode, the ids actually delivered after
shedding (per section), the approximate tokens and the budget. Incognito turns write none.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import attrs


def _lists(value: Mapping[str, Any]) -> dict[str, list[str]]:
    return {str(k): [str(i) for i in v] for k, v in value.items()}


@attrs.frozen
class InjectionRow:
    """One logged projection. ``id`` is assigned by the backend (0 before it is stored)."""

    session_id: str
    turn_index: int
    at: str
    mode: str
    approx_tokens: int
    used_chars: int
    budget_chars: int | None
    delivered: dict[str, list[str]] = attrs.field(converter=_lists)
    id: int = 0

    @property
    def ids(self) -> builtins.list[str]:
        return [i for ids in self.delivered.values() for i in ids]


@runtime_checkable
class InjectionLog(Protocol):
    """Append-only log of what each projection delivered."""

    def record(self, row: InjectionRow) -> int:
        """Append one row; return its id."""
        ...

    def rows(self, session_id: str | None = None, limit: int | None = None) -> builtins.list[InjectionRow]:
        """Rows in the order they were recorded, optionally one session's."""
        ...


@runtime_checkable
class AsyncInjectionLog(InjectionLog, Protocol):
    """An ``InjectionLog`` that also answers an event loop (see ``AsyncSessionSummaries``)."""

    async def arecord(self, row: InjectionRow) -> int: ...

    async def arows(
        self, session_id: str | None = None, limit: int | None = None
    ) -> builtins.list[InjectionRow]: ...
