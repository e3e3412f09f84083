"""The console's refusals: one exception that carries the HTTP status and the field it names.

Why one type: the JSON API and the HTML pages refuse the same inputs with the same words, and
the API's error body (``{"error": ..., "field": ...}``) is part of the interface, so it is
built in one place from one value.
"""

from __future__ import annotations

from typing import Any


class Refusal(Exception):
    """A request the console will not carry out. ``message`` starts with the field's name, the
    way the core's validation errors do (``state: 'maybe' is not one of ...``)."""

    def __init__(self, field: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.status = status

    def as_json(self) -> dict[str, Any]:
        return {"error": self.message, "field": self.field}


def refuse(field: str, problem: str, status: int = 400) -> Refusal:
    """A refusal whose message is ``<field>: <problem>``."""
    return Refusal(field, f"{field}: {problem}", status)
