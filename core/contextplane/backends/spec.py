"""The toolkit a store or backend author writes against, one piece per job:

- the write spec (``store.write_spec``): ``add_chunk``'s keywords, their defaults, the checks
  and D7 stamps of a written row, and ``ChunkWrites``, which gives a store
  ``add_chunk``/``add_chunks`` over its own ``_write``; the lifecycle spec
  (``store.lifecycle_spec``): ``ChunkLifecycle`` gives ``invalidate_chunk`` over
  ``_invalidate_chunk``;
- the read spec (``store.read_spec``): ``ChunkReads`` gives ``list_chunks``, ``count_chunks``
  and ``search`` over a store's ``_list``/``_count``/``_search``; ``SQLReads`` adds the SQL
  listing, ``SearchTracing`` the optional ``trace_search`` over ``_trace``;
- the filter spec (``store.filters``): which rows a listing or a search admits, rendered by a
  ``Dialect`` (``SQLITE``; PostgreSQL's is ``contextplane_postgres.sql.POSTGRES``);
- the row codec (``store.row_codec``): the columns a chunk is read from and written to, and a
  reader compiled per store from how its cells decode;
- the write outcomes (``store.outcomes``): a consolidated batch's outcomes and history details;
- the view and history types (``store.view_spec``: ``PointInTimeView``; ``store.history_spec``:
  ``AsOfOverlay``, ``STATE_COLUMNS``), and ``ClosingStore`` (a store closes on leaving ``with``).

They are defined in ``contextplane.store`` (the embedded store needs them while this package is
still being imported) and are the same objects here; the embedded store, the PostgreSQL store
and the in-memory reference backend all use them.
"""

from __future__ import annotations

from contextplane.store.closing import ClosingStore
from contextplane.store.filters import SQLITE, Dialect, ListQuery, check_whole, list_sql
from contextplane.store.history_spec import STATE_COLUMNS, AsOfOverlay
from contextplane.store.lifecycle_spec import ChunkLifecycle
from contextplane.store.outcomes import write_outcomes
from contextplane.store.read_spec import ChunkReads, Scopes, SearchOptions, SearchTracing, SQLReads, search_k
from contextplane.store.row_codec import READ_ORDER, chunk_cells, compile_reader
from contextplane.store.view_spec import PointInTimeView
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
    "READ_ORDER",
    "SQLITE",
    "STATE_COLUMNS",
    "TEXT_FIELDS",
    "WRITE_FIELDS",
    "AsOfOverlay",
    "ChunkLifecycle",
    "ChunkReads",
    "ChunkWrites",
    "ClosingStore",
    "Dialect",
    "ListQuery",
    "PointInTimeView",
    "SQLReads",
    "Scopes",
    "SearchOptions",
    "SearchTracing",
    "ValidWrite",
    "check_fields",
    "check_whole",
    "chunk_cells",
    "compile_reader",
    "list_sql",
    "search_k",
    "stamped",
    "validate_write",
    "write_outcomes",
]
