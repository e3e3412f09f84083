"""The version stamp: the newest step's objects and ``PRAGMA user_version``, in the write
transaction of whichever step finishes a store (``to_v2.upgrade_schema`` for a store without a
version-3 history, ``to_v4.ensure_v4_history`` for one with it).

Why together: a store stamped with the current version always has what the newest step adds,
and a conversion that fails part-way leaves a store the release before can open, as it was.
A new schema version moves this module to its step's objects.
"""

from __future__ import annotations

from typing import Final

import apsw

from contextplane.store.migrations.state import SCHEMA_VERSION, schema_version
from contextplane.store.migrations.to_v5 import V5_COLUMNS, ensure_v5_objects

#: The columns the stamp adds (the newest step's).
STAMPED_COLUMNS: Final[tuple[tuple[str, str], ...]] = V5_COLUMNS


def stamp_current(conn: apsw.Connection) -> list[str]:
    """The newest step's objects, then the version (caller holds the write transaction);
    returns the columns added."""
    added = ensure_v5_objects(conn)
    if schema_version(conn) < SCHEMA_VERSION:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return added
