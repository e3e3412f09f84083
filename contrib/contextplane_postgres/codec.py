"""What PostgreSQL cannot hold as it is, and how memory rows come back as ``MemoryChunk`` values.

PostgreSQL ``text`` cannot contain NUL (U+0000), which the embedded store keeps (the store
kit's round trip writes one). Every text cell goes through ``enc`` / ``dec``: NUL becomes
U+E000 followed by ``0`` and U+E000 itself becomes U+E000 twice, a reversible escape that
leaves every other character, and so full-text indexing, untouched. Text without either
character (nearly all) is passed through after two substring checks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from contextplane.memory.model import (
    DELIVERY_POLICIES,
    MEMORY_KINDS,
    REVIEW_STATES,
    DeliveryPolicy,
    MemoryChunk,
    MemoryKind,
    ReviewState,
)
from contextplane.memory.stamps import legacy_kind_and_policy

ESC: Final[str] = "\ue000"
_DECODE: Final[re.Pattern[str]] = re.compile(f"{ESC}(.)", re.S)


def enc(text: str) -> str:
    if "\x00" not in text and ESC not in text:
        return text
    return text.replace(ESC, ESC + ESC).replace("\x00", ESC + "0")


def dec(text: str) -> str:
    if ESC not in text:
        return text
    return _DECODE.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), text)


def enc_opt(text: str | None) -> str | None:
    return None if text is None else enc(text)


#: Every character Python's ``str.split()`` splits on (``str.isspace``), as a regular
#: expression class of PostgreSQL's (``\uXXXX`` escapes, standard-conforming strings).
_WHITESPACE: Final[str] = (
    r"[\t\n\v\f\r \u001c-\u001f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
)


def content_key(expr: str) -> str:
    """SQL for the key exact duplicates are looked up by: md5 of the text without any
    whitespace. Two texts equal after ``consolidation.normalise_content`` (whitespace runs
    collapsed) always share it, so an index on it finds every duplicate; rows sharing a key
    are then compared by their normalised text. An expression, not a stored column: a store
    upgraded to it rewrites no row (a rewrite re-inserts every row into the HNSW index)."""
    return f"md5(regexp_replace({expr}, '{_WHITESPACE}', '', 'g'))"


#: The select list, for ``... FROM chunks AS c``; ``chunk_from_row`` reads it in this order.
COLUMNS: Final[tuple[str, ...]] = (
    "id",
    "content",
    "domain",
    "source_type",
    "memory_kind",
    "delivery_policy",
    "review_state",
    "namespace",
    "heading",
    "source",
    "subject",
    "epoch",
    "invalidated_at",
    "invalidation_reason",
    "expires_at",
    "created_at",
    "updated_at",
    "occurred_at",
)
SELECT_COLUMNS: Final[str] = ", ".join(f"c.{name}" for name in COLUMNS)

#: Largest bigint: a longer decimal id names no row (and must not reach the server as one).
_MAX_ID: Final[int] = 2**63 - 1


def as_id(chunk_id: object) -> int | None:
    """Ids are decimal text (opaque to callers); anything else names no row."""
    if isinstance(chunk_id, bool):
        return None
    if isinstance(chunk_id, int):
        value = chunk_id
    elif isinstance(chunk_id, str) and chunk_id.strip().isdigit() and chunk_id.strip().isascii():
        value = int(chunk_id.strip())
    else:
        return None
    return value if 0 < value <= _MAX_ID else None


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def chunk_from_row(row: Sequence[Any]) -> MemoryChunk:
    """A chunk from the cells of ``SELECT_COLUMNS`` (a search row has its score after them),
    reading NULL kind, policy and review state the way the embedded store does (D4 table,
    retrieved, pending)."""
    (
        id_,
        content,
        domain,
        source_type,
        kind,
        policy,
        review,
        namespace,
        heading,
        source,
        subject,
        epoch,
        invalidated_at,
        reason,
        expires_at,
        created_at,
        updated_at,
        occurred_at,
    ) = row[: len(COLUMNS)]
    domain = dec(domain)
    source_type = dec(source_type)
    memory_kind: MemoryKind = kind if kind in MEMORY_KINDS else legacy_kind_and_policy(domain, source_type)[0]
    delivery_policy: DeliveryPolicy | None = policy if policy in DELIVERY_POLICIES else None
    review_state: ReviewState = review if review in REVIEW_STATES else "pending"
    created = created_at.astimezone(UTC)
    return MemoryChunk(
        id=str(id_),
        content=dec(content),
        domain=domain,
        source_type=source_type,
        memory_kind=memory_kind,
        delivery_policy=delivery_policy,
        review_state=review_state,
        namespace=dec(namespace),
        heading=dec(heading),
        source=dec(source),
        subject=dec(subject),
        epoch=dec(epoch),
        invalidated_at=_utc(invalidated_at),
        invalidation_reason=None if reason is None else dec(reason),
        expires_at=_utc(expires_at),
        created_at=created,
        updated_at=_utc(updated_at) or created,
        occurred_at=_utc(occurred_at),
    )
