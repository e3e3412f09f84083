"""The toolkit a store or backend author writes against: the write spec every memory store
shares (``add_chunk``'s keywords, their defaults, the checks and D7 stamps of a written row, and
``ChunkWrites``, which gives a store ``add_chunk``/``add_chunks`` over its own ``_write``).

It is defined in ``contextplane.store.write_spec`` (the embedded store needs it while this
package is still being imported) and is the same objects here; the embedded store, the
PostgreSQL store and the in-memory reference backend all use it.
"""

from __future__ import annotations

from contextplane.store.write_spec import (
    KEYWORDS,
    TEXT_FIELDS,
    WRITE_FIELDS,
    ChunkWrites,
    ValidWrite,
    check_fields,
    stamped,
    validate_write,
)

__all__ = [
    "KEYWORDS",
    "TEXT_FIELDS",
    "WRITE_FIELDS",
    "ChunkWrites",
    "ValidWrite",
    "check_fields",
    "stamped",
    "validate_write",
]
