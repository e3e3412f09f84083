"""The write spec every memory store shares: ``add_chunk``'s keywords and their defaults, and how a
written row is checked and stamped (ADR D7), written once. Backend authors import it from
``contextplane.backends.spec`` (the toolkit); it lives here, beside the ``KnowledgeStore``
protocol whose write contract it is, because the embedded store's writes need it while the
``contextplane.backends`` package is still being imported.

Why: the 13-keyword signature and its validation were written out in each store (the embedded
one, the PostgreSQL one, the in-memory reference backend), and a keyword or a check added to one
and forgotten in another is a store that accepts what the others refuse. A store inherits
``ChunkWrites`` for ``add_chunk``/``add_chunks`` and implements ``_write``; it validates each row
with ``validate_write`` (or, where it memoises the stamps of a batch, with ``check_fields`` and
``stamped``), in one order, so a row with several bad values names the same one first on every
store. The ``KnowledgeStore`` protocol states the same signature as the contract; a test keeps
the two equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

import attrs

from contextplane.errors import ValidationError
from contextplane.memory.consolidation import WriteOutcome
from contextplane.memory.model import parse_occurred_at, validate_namespace, validate_text
from contextplane.memory.stamps import CreationStamp, creation_stamps

#: ``add_chunk``'s keywords after ``content``, in its order, with the value each takes when not
#: given. ``domain`` and ``source_type`` may be passed positionally, as old-style callers do.
KEYWORDS: Final[tuple[tuple[str, Any], ...]] = (
    ("domain", "general"),
    ("source_type", ""),
    ("memory_kind", None),
    ("delivery_policy", None),
    ("review_state", None),
    ("namespace", ""),
    ("heading", ""),
    ("source", ""),
    ("subject", ""),
    ("epoch", ""),
    ("expires_at", None),
    ("expires_in_days", None),
    ("occurred_at", None),
)
#: Every field a written row may hold (``add_chunks`` rows are checked against it).
WRITE_FIELDS: Final[frozenset[str]] = frozenset({"content", *(name for name, _ in KEYWORDS)})
#: The plain text fields after the stamps, in the order they are validated.
TEXT_FIELDS: Final[tuple[str, ...]] = ("heading", "source", "subject")


def check_fields(row: Mapping[str, Any], index: int) -> None:
    """Refuse a row with a field no store knows, or without its content, naming the row."""
    if not row.keys() <= WRITE_FIELDS:
        unknown = sorted(set(row) - WRITE_FIELDS)
        raise ValidationError(
            f"{unknown[0]}: not a memory attribute (row {index}); known: {', '.join(sorted(WRITE_FIELDS))}"
        )
    if "content" not in row:
        raise ValidationError(f"content: missing (row {index})")


def stamped(row: Mapping[str, Any], now: datetime) -> tuple[str, str, CreationStamp]:
    """The row's domain and provenance, validated, and its D7 creation stamps (kind, delivery
    policy, review state, expiry) as of ``now``."""
    domain = validate_text(row.get("domain", "general"), "domain")
    source_type = validate_text(row.get("source_type", ""), "source_type")
    stamp = creation_stamps(
        domain=domain,
        source_type=source_type,
        memory_kind=row.get("memory_kind"),
        delivery_policy=row.get("delivery_policy"),
        review_state=row.get("review_state"),
        expires_at=row.get("expires_at"),
        expires_in_days=row.get("expires_in_days"),
        now=now,
    )
    return domain, source_type, stamp


@attrs.frozen
class ValidWrite:
    """One written row, checked and stamped: what a store lays out in its own columns."""

    content: str
    occurred_at: datetime | None
    domain: str
    source_type: str
    stamp: CreationStamp
    heading: str
    source: str
    subject: str
    namespace: str
    epoch: str


def validate_write(row: Mapping[str, Any], index: int, now: datetime) -> ValidWrite:
    """Check and stamp row ``index`` of a write, in the one order every store follows: its
    fields, the content, the event time, domain and provenance with the stamps, the text fields,
    the scope, the epoch."""
    check_fields(row, index)
    content = validate_text(row["content"], "content", allow_empty=False)
    occurred_at = parse_occurred_at(row.get("occurred_at"))
    domain, source_type, stamp = stamped(row, now)
    heading, source, subject = (validate_text(row.get(name, ""), name) for name in TEXT_FIELDS)
    namespace = validate_namespace(row.get("namespace", ""))
    epoch = validate_text(row.get("epoch", ""), "epoch")
    return ValidWrite(
        content, occurred_at, domain, source_type, stamp, heading, source, subject, namespace, epoch
    )


class ChunkWrites:
    """``add_chunk`` and ``add_chunks`` for a store that implements ``_write``: the signature,
    written once. ``_write(rows, single=...)`` writes the rows all or none and returns one
    ``WriteOutcome`` per row; ``single`` is true for ``add_chunk`` (near duplicates are looked
    for on single writes only: a full-text search per row would make bulk ingest a search
    workload)."""

    def add_chunk(
        self,
        content: str,
        domain: str = "general",
        source_type: str = "",
        *,
        memory_kind: str | None = None,
        delivery_policy: str | None = None,
        review_state: str | None = None,
        namespace: str = "",
        heading: str = "",
        source: str = "",
        subject: str = "",
        epoch: str = "",
        expires_at: datetime | str | None = None,
        expires_in_days: int | None = None,
        occurred_at: datetime | str | None = None,
    ) -> WriteOutcome:
        """Store one row stamped per D7 (kind, delivery policy, review state, expiry), consolidated
        per ``memory.consolidation``; return its id as a ``WriteOutcome`` (a ``str`` that also
        says whether it was stored, a duplicate, superseded rows or has near duplicates).
        ``domain`` and ``source_type`` may be positional, as old-style callers pass them.
        ``occurred_at`` (aware datetime or ISO-8601 text with an offset) is the event time:
        when what the memory describes happened, kept apart from ``created_at``."""
        row = {
            "content": content,
            "domain": domain,
            "source_type": source_type,
            "memory_kind": memory_kind,
            "delivery_policy": delivery_policy,
            "review_state": review_state,
            "namespace": namespace,
            "heading": heading,
            "source": source,
            "subject": subject,
            "epoch": epoch,
            "expires_at": expires_at,
            "expires_in_days": expires_in_days,
            "occurred_at": occurred_at,
        }
        return self._write([row], single=True)[0]

    def add_chunks(self, rows: Iterable[Mapping[str, Any]]) -> list[str]:
        """Bulk insert in one transaction (all rows or none); each mapping holds ``add_chunk``
        keywords (``content`` required). Exact duplicates and same-subject rows are consolidated
        as for ``add_chunk``; near duplicates are looked for on single writes only. Each
        returned id is a ``WriteOutcome``."""
        return list(self._write(rows, single=False))

    def _write(self, rows: Iterable[Mapping[str, Any]], *, single: bool) -> list[WriteOutcome]:
        raise NotImplementedError(f"{type(self).__name__} inherits ChunkWrites but does not implement _write")
