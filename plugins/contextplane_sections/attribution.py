"""How a memory row is attributed to the model (ADR 0069 D6): id, kind, trust, date, scope.

The attribution is a prefix of the row text, so the core escapes it with the content and it
can never be forged by the content: the content follows the closing bracket.

A row with an event time (``occurred_at``) also says when what it describes happened
(``occurred 2023-05-08``), before when it was stored: a conversation imported today is dated
by when it was said, which is what a question about time needs. A row without one is labelled
exactly as before, so recorded turns replay byte for byte.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from contextplane import Row


def scope_label(namespace: str) -> str:
    """``global`` for the empty namespace, else the namespace itself (``project:a``)."""
    return namespace or "global"


def stored_date(value: datetime | str | None) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, datetime):
        return value.date().isoformat()
    return str(value)[:10]


def memory_row(chunk: Any, rank: float) -> Row:
    """A ``Row`` for one memory chunk, with its attribution."""
    kind = chunk.memory_kind or "legacy"
    occurred = getattr(chunk, "occurred_at", None)
    when = f"occurred {stored_date(occurred)} | " if occurred is not None else ""
    head = (
        f"[{chunk.id} | {kind} | {chunk.trust_label} | {when}stored {stored_date(chunk.created_at)} | "
        f"{scope_label(chunk.namespace)}]"
    )
    text = f"{head} {chunk.content}"
    return Row(chunk.id, rank, text, trust_tier=int(chunk.trust_tier), meta={"kind": kind})


def min_trust(config: Any) -> int:
    return int(config.context.inject_min_trust)
