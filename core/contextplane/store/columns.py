"""The ``chunks`` columns as the embedded store reads and writes them: one table, everything
else derived from it.

Why one table: the select list, the keywords ``add_chunk`` accepts, what a superseding row
inherits and the insert statements used to be five parallel lists, and a column added to one
and forgotten in another is a row stored without it. Each ``Column`` says how ``add_chunk``
fills it and whether a superseding row inherits it; the rest follows. The schema itself (the
``CREATE TABLE`` and the version-1 migration) is ``migrate``'s.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, Literal

import attrs

from contextplane.memory.model import MemoryChunk, read_timestamp
from contextplane.store.row_codec import READ_ORDER, compile_reader

#: How ``add_chunk`` fills a column: ``content`` (required text), ``text`` (validated text,
#: ``default`` when absent), ``namespace`` (a validated scope), ``stamp`` (the D7 creation
#: stamps: kind, delivery policy, review state, expiry), ``now`` (the write's time),
#: ``event`` (a per-row timestamp, validated with the content rather than with the memoised
#: stamps, since every row of a batch may carry its own: ``occurred_at``), ``derived``
#: (computed from the content: the duplicate key), or ``never`` (the store assigns it, or a
#: later lifecycle step does).
OnAdd = Literal["content", "text", "namespace", "stamp", "now", "event", "derived", "never"]


@attrs.frozen
class Column:
    name: str
    on_add: OnAdd
    default: str = ""
    #: A superseding row takes the value of the row it replaces unless given. Provenance and
    #: review state are *not* inherited: an agent superseding an operator row must not gain
    #: operator trust.
    inherited: bool = False
    #: Part of the select list (what a ``MemoryChunk`` is read from); internal keys are not.
    read: bool = True


#: In select order. The order of the ``text`` columns is also the order their values are
#: validated in, so a row with several bad values names the same one first every time.
COLUMNS: Final[tuple[Column, ...]] = (
    Column("id", "never"),
    Column("content", "content"),
    Column("domain", "text", "general", inherited=True),
    Column("source_type", "text"),
    Column("memory_kind", "stamp", inherited=True),
    Column("delivery_policy", "stamp", inherited=True),
    Column("review_state", "stamp"),
    Column("expires_at", "stamp"),
    Column("heading", "text", inherited=True),
    Column("source", "text"),
    Column("subject", "text", inherited=True),
    Column("namespace", "namespace", inherited=True),
    Column("epoch", "text", inherited=True),
    Column("invalidated_at", "never"),
    Column("invalidation_reason", "never"),
    Column("created_at", "now"),
    Column("updated_at", "now"),
    #: Schema 5. Inherited: a correction (``supersede``) describes the same event unless it says
    #: otherwise.
    Column("occurred_at", "event", inherited=True),
    Column("content_hash", "derived", read=False),
)

#: The select list's names, in order (the columns a ``MemoryChunk`` is read from).
COLUMN_NAMES: Final[tuple[str, ...]] = tuple(c.name for c in COLUMNS if c.read)
SELECT_NAMES: Final[tuple[str, ...]] = COLUMN_NAMES
#: The select list, for ``SELECT ... FROM chunks AS c``.
SELECT_COLUMNS: Final[str] = ", ".join(f"c.{name}" for name in COLUMN_NAMES)

#: Keywords ``add_chunk`` accepts; bulk rows are checked against the same set. ``expires_in_days``
#: is the one keyword that is not a column: it is turned into ``expires_at``.
ADD_FIELDS: Final[frozenset[str]] = frozenset(
    {c.name for c in COLUMNS if c.on_add not in ("never", "now", "derived")} | {"expires_in_days"}
)
#: Per-row values validated beside the content, outside the memoised stamps.
EVENT_FIELDS: Final[tuple[str, ...]] = tuple(c.name for c in COLUMNS if c.on_add == "event")
#: Everything stamped besides the content and the event time (the memoisation key for bulk rows).
ATTRIBUTE_FIELDS: Final[tuple[str, ...]] = tuple(sorted(ADD_FIELDS - {"content", *EVENT_FIELDS}))
INHERITED_ON_SUPERSEDE: Final[tuple[str, ...]] = tuple(c.name for c in COLUMNS if c.inherited)

def superseding_row(old: MemoryChunk, attrs: Mapping[str, Any], content: str) -> dict[str, Any]:
    """The ``add_chunk`` keywords of a row superseding ``old`` (every store's ``supersede``):
    ``old``'s inherited attributes, overridden by those given. An event time given as ``None``
    counts as not given: a correction describes the same event as the row it corrects unless it
    names another (there is no way to say "this happened at no time")."""
    row: dict[str, Any] = {name: getattr(old, name) for name in INHERITED_ON_SUPERSEDE}
    row.update((k, v) for k, v in attrs.items() if not (k in EVENT_FIELDS and v is None))
    row["content"] = content
    return row


#: What an insert writes, in the order of a prepared row: the content first, then the memoised
#: stamps, then the per-row event time, the derived column last (it depends on the content);
#: neither of the last two is part of the memoised stamps.
INSERT_COLUMNS: Final[tuple[Column, ...]] = tuple(c for c in COLUMNS if c.on_add != "never")
assert INSERT_COLUMNS[0].on_add == "content"
assert [c.on_add for c in INSERT_COLUMNS[-2:]] == ["event", "derived"], (
    "the event time and the derived column must be the last two inserted"
)
_INSERT_NAMES: Final[str] = ", ".join(c.name for c in INSERT_COLUMNS)
#: An insert binds the prepared row, then the write's history position (``chunks.created_seq``).
INSERT_SQL: Final[str] = (
    f"INSERT INTO chunks({_INSERT_NAMES}, created_seq) VALUES ({', '.join('?' for _ in INSERT_COLUMNS)}, ?)"
)
#: A batch goes through a temporary table on the writer's connection, then into ``chunks`` in
#: one statement: FTS5 flushes its pending index at every statement boundary, so inserting row
#: by row (executemany into ``chunks``) indexes about 3x slower, and binding the rows to a
#: table without indexes or triggers is cheaper than encoding them as one JSON text for
#: ``json_each`` (about 5 us a row less here, bench/history_bench.py).
STAGING_SQL: Final[str] = f"CREATE TEMP TABLE IF NOT EXISTS chunks_staging({_INSERT_NAMES})"
STAGE_SQL: Final[str] = f"INSERT INTO temp.chunks_staging VALUES ({', '.join('?' for _ in INSERT_COLUMNS)})"
BULK_INSERT_SQL: Final[str] = (
    f"INSERT INTO chunks({_INSERT_NAMES}, created_seq) SELECT {_INSERT_NAMES}, ? FROM temp.chunks_staging "
    "ORDER BY rowid"
)
UNSTAGE_SQL: Final[str] = "DELETE FROM temp.chunks_staging"


_ID_TEXT: Final[re.Pattern[str]] = re.compile(r"-?[0-9]{1,20}")
#: SQLite's INTEGER is signed 64-bit: a whole number outside it names no row (and must not
#: reach SQLite, which cannot bind it).
ID_MIN: Final[int] = -(2**63)
ID_MAX: Final[int] = 2**63 - 1
#: The most hits a search asks its statements for: more than any store holds rows, and small
#: enough that the candidate counts derived from it (k times a widening factor) stay inside
#: SQLite's and PostgreSQL's 64-bit integers. A larger ``k`` returns the same hits.
SEARCH_K_MAX: Final[int] = 2**32


def as_id(chunk_id: object) -> int | None:
    """Store ids are decimal text (opaque to callers); anything else names no row. A migrated
    version-1 store may hold ids of 0 or below, so a leading minus is part of an id."""
    if isinstance(chunk_id, bool):
        return None
    if isinstance(chunk_id, int):
        value = chunk_id
    elif isinstance(chunk_id, str) and _ID_TEXT.fullmatch(chunk_id.strip()):
        value = int(chunk_id.strip())
    else:
        return None
    return value if ID_MIN <= value <= ID_MAX else None


_cells = operator.itemgetter(*(COLUMN_NAMES.index(name) for name in READ_ORDER))
_EPOCH: Final[datetime] = datetime.fromtimestamp(0, UTC)  # an unreadable legacy creation stamp
#: A chunk from the cells of ``SELECT_COLUMNS`` (a search row has its score after them), by the
#: shared row codec: text cells may be a legacy NULL, timestamps are ISO text.
chunk_from_row: Final = compile_reader(
    pick="_cells(row)",
    decode={
        "content": "str({})",
        "text": 'str({} or "")',
        "reason": "{}",
        "time": "read_timestamp({})",
        "created": "read_timestamp({}) or _EPOCH",
    },
    names={"_cells": _cells, "read_timestamp": read_timestamp, "_EPOCH": _EPOCH},
)
