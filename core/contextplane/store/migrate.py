"""The old home of the store's migrations, kept as an import path: everything it held now lives
in ``contextplane.store.migrations`` (one module per schema version step, a registry that runs
them in order, and one module per other job), and every name is re-exported here.

Why the module keeps a class of its own: tests and third parties patch names on this module
(``monkeypatch.setattr(migrate, "INLINE_STEMMING_MAX_ROWS", 2)``); when this was one module, the
patch reached every function that read the name. Setting a name here sets it too in each
``migrations`` module that holds the same object under that name (or the public name a private
one became), so a patch keeps reaching the code that reads it.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Final

from contextplane.store.migrations import (
    backfill,
    checks,
    fts,
    read_path,
    registry,
    rules,
    stamp,
    state,
    stemming,
    to_v2,
    to_v3,
    to_v4,
    to_v5,
    v1_input,
)
from contextplane.store.migrations import (
    dry_run as _dry_run_module,
)
from contextplane.store.migrations.backfill import (
    INLINE_CONTENT_HASH_MAX_ROWS,
    _pass_start,
    content_hash_rows_left,
    content_hash_sql,
    migrate_content_hashes,
    pending_passes,
    pending_v3_passes,
    repair_nonpositive_ids,
    rows_left,
    run_backfill,
    run_passes,
    run_v3_backfill,
)
from contextplane.store.migrations.checks import check_openable, require_current
from contextplane.store.migrations.dry_run import DryRunReport, DryRunRow, dry_run
from contextplane.store.migrations.fts import (
    FTS_CONFIG,
    FTS_SQL,
    FTS_TRIGGERS,
    STEMMED_FTS_SQL,
    ensure_fts,
    fts_sql_is_current,
)
from contextplane.store.migrations.read_path import (
    ANALYZED_ROWS,
    READ_INDEXES,
    analyze_due,
    ensure_read_indexes,
    maybe_analyze,
    prepare_read_path,
)
from contextplane.store.migrations.registry import STEPS, MigrationResult, Step, create_fresh, ensure_schema
from contextplane.store.migrations.rules import (
    KIND_CASE_SQL,
    PASS_ASSIGNMENTS,
    POLICY_CASE_SQL,
    REVIEW_CASE_SQL,
    RULE_LABEL_CASE_SQL,
)
from contextplane.store.migrations.state import (
    CONTENT_HASH_BACKFILL,
    DEFAULT_BATCH_ROWS,
    HISTORY_BACKFILL,
    MIGRATING,
    OLDEST_VERSION,
    PASSES,
    REVIEW_STATE_BACKFILL,
    SCHEMA_VERSION,
    TYPED_MEMORY_BACKFILL,
    V3_PASSES,
    BatchCallback,
    check_schema_version,
    column_names,
    cursor_key,
    log,
    meta_get,
    meta_set,
    scalar,
    schema_version,
    table_exists,
    write_transaction,
)
from contextplane.store.migrations.stemming import (
    INLINE_STEMMING_MAX_ROWS,
    STEMMED_FTS,
    migrate_stemming,
    stemming_pending,
    stemming_rows_left,
)
from contextplane.store.migrations.to_v2 import CHUNKS_V2_SQL, V2_COLUMNS, upgrade_schema
from contextplane.store.migrations.to_v3 import (
    HISTORY_BASELINE_KEY,
    HISTORY_STARTED_KEY,
    V3_COLUMNS,
    V3_HISTORY_SQL,
    V3_TRIGGERS,
    ensure_v3_objects,
    ensure_v3_schema,
    history_due,
    start_history,
)
from contextplane.store.migrations.to_v4 import (
    V4_COLUMNS,
    V4_HISTORY_SQL,
    _convert_v3_history,
    ensure_v4_history,
    ensure_v4_objects,
    v4_due,
)
from contextplane.store.migrations.to_v5 import V5_COLUMNS, V5_INDEX_SQL, ensure_v5_objects
from contextplane.store.migrations.v1_input import (
    ANCHOR_TABLES,
    REQUIRED_V1_COLUMNS,
    V1_COLUMNS,
    V1_SCHEMA_SQL,
    ChunksShape,
    ColumnInfo,
    check_ids,
    inspect_chunks,
    normalise_chunks,
    planned_normalisation,
    table_names,
)

#: The private names this module had, under the public names they have now.
RENAMED: Final[dict[str, str]] = {
    "_meta_get": "meta_get",
    "_meta_set": "meta_set",
    "_FTS_SQL": "FTS_SQL",
    "_FTS_TRIGGERS": "FTS_TRIGGERS",
    "_ensure_fts": "ensure_fts",
    "_CHUNKS_V2_SQL": "CHUNKS_V2_SQL",
    "_PASS_ASSIGNMENTS": "PASS_ASSIGNMENTS",
    "_cursor_key": "cursor_key",
    "_content_hash_sql": "content_hash_sql",
    "_ensure_v3_objects": "ensure_v3_objects",
    "_ensure_v4_objects": "ensure_v4_objects",
    "_ensure_v5_objects": "ensure_v5_objects",
    "_V3_TRIGGERS": "V3_TRIGGERS",
    "_v4_due": "v4_due",
    "_history_due": "history_due",
    "_rows_left": "rows_left",
    "_check_ids": "check_ids",
    "_backfill": "run_passes",
}
_meta_get = meta_get
_meta_set = meta_set
_FTS_SQL = FTS_SQL
_FTS_TRIGGERS = FTS_TRIGGERS
_ensure_fts = ensure_fts
_CHUNKS_V2_SQL = CHUNKS_V2_SQL
_PASS_ASSIGNMENTS = PASS_ASSIGNMENTS
_cursor_key = cursor_key
_content_hash_sql = content_hash_sql
_ensure_v3_objects = ensure_v3_objects
_ensure_v4_objects = ensure_v4_objects
_ensure_v5_objects = ensure_v5_objects
_V3_TRIGGERS = V3_TRIGGERS
_v4_due = v4_due
_history_due = history_due
_rows_left = rows_left
_check_ids = check_ids
_backfill = run_passes

#: The modules a name set here is set in too.
HOMES: Final[tuple[types.ModuleType, ...]] = (
    state,
    fts,
    rules,
    stemming,
    read_path,
    to_v5,
    stamp,
    to_v2,
    to_v3,
    to_v4,
    v1_input,
    backfill,
    _dry_run_module,
    registry,
    checks,
)

_ABSENT: Final = object()


class _Shim(types.ModuleType):
    """This module, with ``setattr`` reaching the homes of the name (see the module docstring)."""

    def __setattr__(self, name: str, value: Any) -> None:
        old = self.__dict__.get(name, _ABSENT)
        super().__setattr__(name, value)
        if old is _ABSENT:
            return
        for home in HOMES:
            for home_name in {name, RENAMED.get(name, name)}:
                if home.__dict__.get(home_name, _ABSENT) is old:
                    setattr(home, home_name, value)


sys.modules[__name__].__class__ = _Shim

__all__ = [
    "ANALYZED_ROWS",
    "ANCHOR_TABLES",
    "CHUNKS_V2_SQL",
    "CONTENT_HASH_BACKFILL",
    "DEFAULT_BATCH_ROWS",
    "FTS_CONFIG",
    "FTS_SQL",
    "FTS_TRIGGERS",
    "HISTORY_BACKFILL",
    "HISTORY_BASELINE_KEY",
    "HISTORY_STARTED_KEY",
    "INLINE_CONTENT_HASH_MAX_ROWS",
    "INLINE_STEMMING_MAX_ROWS",
    "KIND_CASE_SQL",
    "MIGRATING",
    "OLDEST_VERSION",
    "PASSES",
    "PASS_ASSIGNMENTS",
    "POLICY_CASE_SQL",
    "READ_INDEXES",
    "REQUIRED_V1_COLUMNS",
    "REVIEW_CASE_SQL",
    "REVIEW_STATE_BACKFILL",
    "RULE_LABEL_CASE_SQL",
    "SCHEMA_VERSION",
    "STEMMED_FTS",
    "STEMMED_FTS_SQL",
    "STEPS",
    "TYPED_MEMORY_BACKFILL",
    "V1_COLUMNS",
    "V1_SCHEMA_SQL",
    "V2_COLUMNS",
    "V3_COLUMNS",
    "V3_HISTORY_SQL",
    "V3_PASSES",
    "V3_TRIGGERS",
    "V4_COLUMNS",
    "V4_HISTORY_SQL",
    "V5_COLUMNS",
    "V5_INDEX_SQL",
    "BatchCallback",
    "ChunksShape",
    "ColumnInfo",
    "DryRunReport",
    "DryRunRow",
    "MigrationResult",
    "Step",
    "_convert_v3_history",
    "_pass_start",
    "analyze_due",
    "check_ids",
    "check_openable",
    "check_schema_version",
    "column_names",
    "content_hash_rows_left",
    "content_hash_sql",
    "create_fresh",
    "cursor_key",
    "dry_run",
    "ensure_fts",
    "ensure_read_indexes",
    "ensure_schema",
    "ensure_v3_objects",
    "ensure_v3_schema",
    "ensure_v4_history",
    "ensure_v4_objects",
    "ensure_v5_objects",
    "fts_sql_is_current",
    "history_due",
    "inspect_chunks",
    "log",
    "maybe_analyze",
    "meta_get",
    "meta_set",
    "migrate_content_hashes",
    "migrate_stemming",
    "normalise_chunks",
    "pending_passes",
    "pending_v3_passes",
    "planned_normalisation",
    "prepare_read_path",
    "repair_nonpositive_ids",
    "require_current",
    "rows_left",
    "run_backfill",
    "run_passes",
    "run_v3_backfill",
    "scalar",
    "schema_version",
    "start_history",
    "stemming_pending",
    "stemming_rows_left",
    "table_exists",
    "table_names",
    "upgrade_schema",
    "v4_due",
    "write_transaction",
]
