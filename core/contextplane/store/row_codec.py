"""The row codec every SQL memory store shares: how a ``MemoryChunk`` is read from the cells of a
select list and written as the cells of an insert, with only the decoding of one cell left to
each store (SQLite keeps ISO text and may hold a legacy NULL; PostgreSQL keeps ``timestamptz``
and escapes NUL in ``text``).

Why a compiled reader: reading rows is the hot end of every search and listing, and a reader
calling a store's decoder per cell would add a Python call per cell to every row a turn reads.
``compile_reader`` writes the one reader below out with the store's decoding expressions
inlined, once at import, so each store's reader is as direct as the hand-written ones were
and the legacy rules (NULL kind is the D4 table applied to ``domain``, NULL review state is
pending, NULL or unknown policy is retrieved) stand in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from contextplane.memory.model import (
    DELIVERY_POLICIES,
    MEMORY_KINDS,
    REVIEW_STATES,
    MemoryChunk,
)
from contextplane.memory.stamps import legacy_kind_and_policy

#: The columns a chunk is read from, in the order ``compile_reader``'s reader takes them.
READ_ORDER: Final[tuple[str, ...]] = (
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
#: How each cell decodes: ``text`` (a text column), ``content``, ``reason`` (nullable text),
#: ``time`` (a nullable timestamp), ``created`` (the one timestamp every row has), or ``raw``
#: (a lifecycle value, read as the legacy rules say).
CELL_KINDS: Final[Mapping[str, str]] = {
    "id": "id",
    "content": "content",
    "domain": "text",
    "source_type": "text",
    "memory_kind": "raw",
    "delivery_policy": "raw",
    "review_state": "raw",
    "namespace": "text",
    "heading": "text",
    "source": "text",
    "subject": "text",
    "epoch": "text",
    "invalidated_at": "time",
    "invalidation_reason": "reason",
    "expires_at": "time",
    "created_at": "created",
    "updated_at": "time",
    "occurred_at": "time",
}

_READER: Final[str] = """
def chunk_from_row(row):
    (id_, content, domain, source_type, kind, policy, review, namespace, heading, source, subject,
     epoch, invalidated_at, reason, expires_at, created_at, updated_at, occurred_at) = {pick}
    domain = {domain}
    source_type = {source_type}
    created = {created_at}
    return MemoryChunk(
        id=str(id_),
        content={content},
        domain=domain,
        source_type=source_type,
        memory_kind=kind if kind in MEMORY_KINDS else legacy_kind_and_policy(domain, source_type)[0],
        delivery_policy=policy if policy in DELIVERY_POLICIES else None,
        review_state=review if review in REVIEW_STATES else "pending",
        namespace={namespace},
        heading={heading},
        source={source},
        subject={subject},
        epoch={epoch},
        invalidated_at={invalidated_at},
        invalidation_reason={reason},
        expires_at={expires_at},
        created_at=created,
        updated_at={updated_at} or created,
        occurred_at={occurred_at},
    )
"""
_LOCALS: Final[dict[str, str]] = {"id": "id_", "invalidation_reason": "reason"}


def compile_reader(
    *, pick: str, decode: Mapping[str, str], names: Mapping[str, Any]
) -> Callable[[Sequence[Any]], MemoryChunk]:
    """A store's ``chunk_from_row``: ``pick`` is the expression taking the ``READ_ORDER`` cells
    out of ``row`` (a search row has its score after them); ``decode`` maps each cell kind of
    ``CELL_KINDS`` but ``raw`` and ``id`` to an expression of ``{}`` (the cell); ``names`` are
    the globals those expressions use."""
    cells = {
        name: decode[kind].format(_LOCALS.get(name, name))
        for name, kind in CELL_KINDS.items()
        if kind not in ("raw", "id")
    }
    cells["reason"] = cells.pop("invalidation_reason")
    source = _READER.format(pick=pick, **cells)
    scope: dict[str, Any] = {
        "MemoryChunk": MemoryChunk,
        "MEMORY_KINDS": MEMORY_KINDS,
        "DELIVERY_POLICIES": DELIVERY_POLICIES,
        "REVIEW_STATES": REVIEW_STATES,
        "legacy_kind_and_policy": legacy_kind_and_policy,
        **names,
    }
    exec(compile(source, f"<row codec: {pick}>", "exec"), scope)
    reader: Callable[[Sequence[Any]], MemoryChunk] = scope["chunk_from_row"]
    reader.__doc__ = (
        "A chunk from the cells of the store's select list (``row_codec.compile_reader``), legacy "
        "NULLs read as the spec says."
    )
    return reader


def chunk_cells(
    chunk: MemoryChunk,
    names: Sequence[str],
    text: Callable[[str], Any],
    time: Callable[[datetime], Any],
) -> list[Any]:
    """A chunk as the cells of an insert of ``names`` (each in ``CELL_KINDS``), every id, time and
    state kept (an exact restore): text through ``text``, timestamps through ``time``."""
    cells: list[Any] = []
    for name in names:
        kind = CELL_KINDS[name]
        value = getattr(chunk, name)
        if kind == "id":
            cells.append(int(value))
        elif value is None or kind == "raw":
            cells.append(value)
        elif kind in ("time", "created"):
            cells.append(time(value))
        else:
            cells.append(text(value))
    return cells
