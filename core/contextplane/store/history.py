"""The embedded store's lifecycle history: appending events (``history_write``), reading them
(``history_read``) and as-of overlays (``as_of``); this module is their old path and keeps every
name (``contextplane.shims.patch_through``: a name patched here reaches its home).

Where the events live (schema 4), and why: a review-state change is a ~30 us write that commits
one page (the row's). An event kept in a table of its own commits two more (the table's last
page and its per-row index), and those pages, not the insert, are what made the history cost a
change 1.28x. So a row carries its own history, in ``chunks.history``, and a change appends its
entry in the same ``UPDATE`` that makes it, dirtying the page it dirties anyway:

- ``chunks.history``: one JSON array per change, newline-terminated, appended and never
  rewritten (a trigger refuses anything else): ``[seq, at, event, actor, detail, <the row's
  lifecycle cells before the change>]``. The cells *before*: an ``UPDATE``'s expressions read
  the old values, so the entry is written by SQL with no read of the row; the state a change
  left is the next entry's before-cells, or the row itself for the last one.
- ``chunk_log``: the store-wide order, one small row per change (``seq``, row, time), one per
  write batch (``kind`` 'created': the batch's id range, whose rows all carry its ``seq`` in
  ``chunks.created_seq``) and one per purged row. It answers "what changed after position S"
  and "the latest position" by its rowid, with no index to keep.
- ``chunk_gone``: a purged row's history, creation stamps and last state, moved there by the
  purge before the row is deleted (a trigger refuses to delete a row that has not been).

Appending: every write path goes through ``change`` (or ``log_created`` / ``record_purged``)
inside its own write transaction, so an event commits or rolls back with its change.

A migrated store's rows (those up to ``HISTORY_BASELINE_KEY`` without a ``created_seq``) start
with a ``migrated`` event read at ``HISTORY_START``: their state at the migration is the first
entry's before-cells, or the row itself while it has not changed; nothing is written for them at
the migration (``migrate.start_history``).

As-of reads: the state of the store at a ``HistoryPosition`` (seq S, time T) differs from now
only for the rows with a change after S. ``overlay`` puts their state at S into a temporary table
and shadows ``chunks`` with a temporary view of the same name that reads them from it and hides
the rows written after S (ids are handed out in order, so those are the ids above the last batch
at or before S); every read statement of the store (``get``, ``list_chunks``, ``search``, the
vector leg) runs unchanged against the past. SQLite resolves an unqualified table name in
``temp`` first, so nothing in ``sql`` needs to know.

Ranking: BM25 depends on the corpus (row count, lengths, how many rows hold a word), so rows
written after S would change the order of results even while hidden. With ``exact_ranking``
the overlay also shadows ``chunks_fts`` with a temporary full-text index of the rows present
at S (same tokenizer): an O(rows) build, paid only when rows were written or purged after S.
What no overlay can restore: the text of rows purged after S (the purge deleted it), and the
vector index's clustering if it was retrained (its candidate lists are approximate); both
are reported by ``AsOfOverlay``.
"""

from __future__ import annotations

from contextplane.shims import patch_through
from contextplane.store import as_of, history_read, history_write
from contextplane.store.as_of import _high_at as _high_at
from contextplane.store.as_of import _view_sql as _view_sql
from contextplane.store.as_of import drop_overlay as drop_overlay
from contextplane.store.as_of import fts_tokenizer as fts_tokenizer
from contextplane.store.as_of import overlay as overlay
from contextplane.store.history_read import EventKey as EventKey
from contextplane.store.history_read import _Baseline as _Baseline
from contextplane.store.history_read import _entries as _entries
from contextplane.store.history_read import _event as _event
from contextplane.store.history_read import _keys_after as _keys_after
from contextplane.store.history_read import _row_events as _row_events
from contextplane.store.history_read import _rows as _rows
from contextplane.store.history_read import _stamp as _stamp
from contextplane.store.history_read import check_histories as check_histories
from contextplane.store.history_read import count_events as count_events
from contextplane.store.history_read import events as events
from contextplane.store.history_read import position_at as position_at
from contextplane.store.history_read import walk_events as walk_events
from contextplane.store.history_spec import STATE_COLUMNS as STATE_COLUMNS
from contextplane.store.history_spec import AsOfOverlay as AsOfOverlay
from contextplane.store.history_write import _CHANGE_SQL as _CHANGE_SQL
from contextplane.store.history_write import _LOG_CHANGE as _LOG_CHANGE
from contextplane.store.history_write import _ROW_GONE as _ROW_GONE
from contextplane.store.history_write import _ROW_LIVE as _ROW_LIVE
from contextplane.store.history_write import _STATE_LIST as _STATE_LIST
from contextplane.store.history_write import ENTRY_SQL as ENTRY_SQL
from contextplane.store.history_write import change as change
from contextplane.store.history_write import chunk_ids as chunk_ids
from contextplane.store.history_write import latest_seq as latest_seq
from contextplane.store.history_write import log_created as log_created
from contextplane.store.history_write import plain_change as plain_change
from contextplane.store.history_write import record_created as record_created
from contextplane.store.history_write import record_purged as record_purged
from contextplane.store.history_write import state_of as state_of

patch_through(__name__, (history_write, history_read, as_of))
