"""Schema version 4 -> 5: the event time.

Version 5 adds the nullable ``occurred_at`` column (a memory's event time, beside
``created_at``) and a partial index of the rows that have one: an ``ALTER``, no row visited, in
the same transaction as the version stamp (``stamp``). Every existing row reads as having no
event time; its history needs nothing (the event time is not a lifecycle cell).
"""

from __future__ import annotations

from typing import Final

import apsw

from contextplane.store.migrations.state import add_columns

#: Version 5: the event time (``MemoryChunk.occurred_at``), nullable, so the ALTER is O(1), and
#: a partial index for the time filters of ``list_chunks``: a store without event times pays
#: one scan to build an empty index, and a write without one pays nothing.
V5_COLUMNS: Final[tuple[tuple[str, str], ...]] = (("occurred_at", "TEXT"),)
V5_INDEX_SQL: Final[str] = (
    "CREATE INDEX IF NOT EXISTS chunks_occurred ON chunks(namespace, occurred_at) "
    "WHERE occurred_at IS NOT NULL"
)


def ensure_v5_objects(conn: apsw.Connection) -> list[str]:
    """Version 5's column and index (caller holds the write transaction); return columns added."""
    added = add_columns(conn, V5_COLUMNS)
    conn.execute(V5_INDEX_SQL)
    return added
