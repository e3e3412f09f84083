"""Exact restore: putting exported rows back into a store as they were (``memory import``).

Why a path of its own and not ``add_chunks``: a write is a *new* memory, so the store stamps
it (a new id, the write's time, a fresh review state) and consolidates it. A row read back from
an export is not new: its id is what other rows' ``superseded_by:<id>`` and every recorded turn
name, and its times and lifecycle state are the record. ``restore_chunks(rows)`` (the optional
``ExactRestore`` protocol) inserts each row with every attribute of ``MemoryChunk`` as given.

What every store that offers it shares (this module is the shared half):

- **every attribute kept**: id, content, every D4 attribute, ``created_at``, ``updated_at``,
  ``invalidated_at``, ``invalidation_reason`` (so a supersession chain keeps its links),
  ``expires_at`` and ``occurred_at``; nothing is consolidated, stamped or inherited.
- **derived structures as a write leaves them**: the full-text index, the vector of each row
  (embedded through the store's embedder, as a write would), the corpus caches.
- **history starts at the restore**: each row gets one ``created`` event at the restore's
  time, in the restore's transaction, whose detail says so (``RESTORED_NOTE``, ``restored_at``,
  and ``supersedes`` when rows of the batch name it as their successor). The state after it is
  the row as restored. An as-of read before the restore does not see the row (the store did
  not hold it then); the events before the export are not carried.
- **all or nothing**: every row is checked first (``restored_chunks``); an id the store already
  holds (or held: a purged row's history keeps its id) is refused by name, and a failure
  writes nothing (one transaction).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs

from contextplane.errors import StoreError, ValidationError
from contextplane.memory.model import (
    SUPERSEDED_PREFIX,
    MemoryChunk,
    format_timestamp,
    parse_timestamp,
    validate_delivery_policy,
    validate_memory_kind,
    validate_namespace,
    validate_review_state,
    validate_text,
)
from contextplane.store.columns import as_id

#: What a restored row's ``created`` event says (its detail's ``note``).
RESTORED_NOTE: Final[str] = (
    "restored from an export with its id, times and state; its history before the export was not carried"
)
#: Every attribute a restored row carries: the model's own field list.
ATTRIBUTES: Final[tuple[str, ...]] = tuple(f.name for f in attrs.fields(MemoryChunk))
#: The attributes a row must give (the rest take the model's defaults).
REQUIRED: Final[tuple[str, ...]] = ("id", "content", "created_at", "updated_at")
_TEXT: Final[tuple[str, ...]] = ("domain", "source_type", "heading", "source", "subject", "epoch")
_OPTIONAL_TIMES: Final[tuple[str, ...]] = ("invalidated_at", "expires_at", "occurred_at")


def _chunk(row: Mapping[str, Any]) -> MemoryChunk:
    """One row as a ``MemoryChunk``, every value checked as a write checks it (ValidationError
    naming the attribute)."""
    if not isinstance(row, Mapping):
        raise ValidationError(f"expected a mapping of memory attributes, got {type(row).__name__}")
    unknown = sorted(set(row) - set(ATTRIBUTES))
    if unknown:
        raise ValidationError(f"{unknown[0]}: not a memory attribute (a memory has: {', '.join(ATTRIBUTES)})")
    for name in REQUIRED:
        if row.get(name) is None:
            raise ValidationError(f"{name}: missing (an exact restore needs {', '.join(REQUIRED)})")
    key = as_id(row["id"])
    if key is None:
        raise ValidationError(f"id: {row['id']!r} is not a memory id (a whole number, as stores hand out)")
    values: dict[str, Any] = {
        "id": str(key),
        "content": validate_text(row["content"], "content", allow_empty=False),
        "created_at": parse_timestamp(row["created_at"], "created_at"),
        "updated_at": parse_timestamp(row["updated_at"], "updated_at"),
        "memory_kind": validate_memory_kind(row.get("memory_kind", "legacy")),
        "review_state": validate_review_state(row.get("review_state", "pending")),
        "namespace": validate_namespace(row.get("namespace", "")),
    }
    policy = row.get("delivery_policy")
    values["delivery_policy"] = None if policy is None else validate_delivery_policy(policy)
    for name in _TEXT:
        if name in row:
            values[name] = validate_text(row[name], name)
    for name in _OPTIONAL_TIMES:
        value = row.get(name)
        values[name] = None if value is None else parse_timestamp(value, name)
    reason = row.get("invalidation_reason")
    values["invalidation_reason"] = None if reason is None else validate_text(reason, "invalidation_reason")
    return MemoryChunk(**values)


def restored_chunks(rows: Iterable[Mapping[str, Any] | MemoryChunk]) -> list[MemoryChunk]:
    """Every row checked before anything is written: a bad one is named by its place and id,
    and an id given twice is refused."""
    chunks: list[MemoryChunk] = []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        if isinstance(row, MemoryChunk):
            row = {name: getattr(row, name) for name in ATTRIBUTES}
        try:
            chunk = _chunk(row)
        except ValidationError as exc:
            where = f" (id {row.get('id')!r})" if isinstance(row, Mapping) and "id" in row else ""
            raise ValidationError(f"restore: row {index}{where}: {exc}; nothing was restored") from None
        if chunk.id in seen:
            raise ValidationError(f"restore: row {index}: id {chunk.id} is given twice; nothing was restored")
        seen.add(chunk.id)
        chunks.append(chunk)
    return chunks


def id_taken(where: str, chunk_id: str, *, purged: bool = False) -> StoreError:
    """The refusal of an id the target store holds (or held), with what to do instead."""
    held = "was purged from this store (its history keeps the id)" if purged else "is already in this store"
    return StoreError(
        f"{where}: memory {chunk_id} {held}; an exact restore keeps ids, so "
        "restore into a fresh store, or import with new ids (`contextplane memory import --new-ids`); "
        "nothing was restored"
    )


def created_details(chunks: Sequence[MemoryChunk], at: datetime, by: str = "") -> dict[str, dict[str, Any]]:
    """Each restored row's ``created`` event detail (id -> detail): the note, when and by whom,
    and the rows of the batch it superseded (what ``memory purge`` reads to keep a chain)."""
    supersedes: dict[str, list[str]] = {}
    for chunk in chunks:
        reason = chunk.invalidation_reason or ""
        if chunk.invalidated_at is not None and reason.startswith(SUPERSEDED_PREFIX):
            supersedes.setdefault(reason[len(SUPERSEDED_PREFIX) :], []).append(chunk.id)
    out: dict[str, dict[str, Any]] = {}
    when = format_timestamp(at)
    for chunk in chunks:
        detail: dict[str, Any] = {"note": RESTORED_NOTE, "restored_at": when}
        if by:
            detail["restored_by"] = by
        if chunk.id in supersedes:
            detail["supersedes"] = supersedes[chunk.id]
        out[chunk.id] = detail
    return out


def restored_at(detail: Mapping[str, Any] | None) -> str | None:
    """The restore time a ``created`` event's detail names (None: an ordinary write)."""
    if not isinstance(detail, Mapping):
        return None
    value = detail.get("restored_at")
    return value if isinstance(value, str) else None
