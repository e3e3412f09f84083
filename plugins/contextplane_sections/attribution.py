"""How a memory row is attributed to the model (ADR 0069 D6): id, kind, trust, date, scope.

The attribution is a prefix of the row text, so the core escapes it with the content and it
can never be forged by the content: the content follows the closing bracket.

Two forms. ``memory_row`` gives every field on every row (the always-on section: a few rows).
``compact_row`` is the retrieved section's: the kind, trust and scope most of the turn's rows
share are said once, in the section's heading (``compact_heading``), and a row names only
what differs, then its date: ``[42 | 2023-05-08]``, ``[7 | fact | operator | 2023-05-08]``.
Why: the full label costs ~85 chars a row, as much as half a short memory; on LoCoMo at 2,000
tokens it let 35 rows in where the compact one lets 52 in, and evidence recall rose from 0.703
to 0.730 (full text; bench/locomo_bench.py). A row's date is when what it describes happened
(``occurred_at``), else ``stored`` and when it was written.

A row with an event time (``occurred_at``) also says when what it describes happened
(``occurred 2023-05-08``), before when it was stored: a conversation imported today is dated
by when it was said, which is what a question about time needs. A row without one is labelled
exactly as before, so recorded turns replay byte for byte.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import attrs

from contextplane.section import Row


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


@attrs.frozen
class Common:
    """The kind, trust label and scope most of a turn's rows share (said once, in the heading)."""

    kind: str
    trust: str
    scope: str


def _most(counts: Counter[str]) -> str:
    """The most frequent value; ties go to the smallest, so the heading is deterministic."""
    return min(counts, key=lambda v: (-counts[v], v)) if counts else ""


def common_attribution(chunks: Iterable[Any]) -> Common:
    kinds: Counter[str] = Counter()
    trusts: Counter[str] = Counter()
    scopes: Counter[str] = Counter()
    for c in chunks:  # one pass: a search's candidates are read once
        kinds[c.memory_kind or "legacy"] += 1
        trusts[str(c.trust_label)] += 1
        scopes[scope_label(c.namespace)] += 1
    return Common(kind=_most(kinds), trust=_most(trusts), scope=_most(scopes))


def when(chunk: Any) -> str:
    """The row's render key: when it happened, else when it was stored, then when it was
    stored and its id (so the turns of one conversation session, which share its date, keep the
    order they were written in). ISO stamps and length-prefixed ids, so the string sorts."""
    occurred = getattr(chunk, "occurred_at", None)
    stored = _iso(chunk.created_at)
    ident = str(chunk.id)
    return f"{_iso(occurred) if occurred is not None else stored} {stored} {len(ident):04d}{ident}"


def _iso(value: Any) -> str:
    if isinstance(value, datetime):  # in UTC, so stamps with different offsets sort by time
        return (value.astimezone(UTC) if value.tzinfo else value).isoformat()
    return str(value or "")


def compact_row(chunk: Any, rank: float, common: Common) -> Row:
    """A ``Row`` with only what differs from ``common`` in its attribution, then its date."""
    kind = chunk.memory_kind or "legacy"
    fields = [str(chunk.id)]
    if kind != common.kind:
        fields.append(kind)
    if str(chunk.trust_label) != common.trust:
        fields.append(str(chunk.trust_label))
    occurred = getattr(chunk, "occurred_at", None)
    date = stored_date(occurred) if occurred is not None else f"stored {stored_date(chunk.created_at)}"
    fields.append(date)
    scope = scope_label(chunk.namespace)
    if scope != common.scope:
        fields.append(scope)
    text = f"[{' | '.join(fields)}] {chunk.content}"
    meta = {"kind": kind, "when": when(chunk)}
    return Row(chunk.id, rank, text, trust_tier=int(chunk.trust_tier), meta=meta)


def compact_heading(common: Common, order: str) -> str:
    """The retrieved section's heading for this turn: the order, then what every row shares
    unless it says otherwise."""
    first = "oldest first" if order == "chronological" else "best match first"
    return (
        f"Retrieved memories, {first}. Each row: [id | date it happened, or when it was stored]; "
        f"unless a row says otherwise, its kind is {common.kind}, trust {common.trust}, "
        f"scope {common.scope}:"
    )


def min_trust(config: Any) -> int:
    return int(config.context.inject_min_trust)
