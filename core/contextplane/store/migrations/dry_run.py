"""``contextplane migrate --dry-run``: what the backfill would write, counted per D4 mapping row
and per review state, without writing anything. Works on an unmigrated version-1 store of any
shape (a missing column reads as its default) and never alters the schema.
"""

from __future__ import annotations

import apsw
import attrs

from contextplane.memory.stamps import LEGACY_DOMAIN_TABLE
from contextplane.store.migrations.backfill import pending_passes, pending_v3_passes
from contextplane.store.migrations.rules import REVIEW_CASE_SQL, RULE_LABEL_CASE_SQL
from contextplane.store.migrations.state import (
    REVIEW_STATE_BACKFILL,
    TYPED_MEMORY_BACKFILL,
    column_names,
    scalar,
    schema_version,
    table_exists,
)
from contextplane.store.migrations.v1_input import planned_normalisation


@attrs.frozen
class DryRunRow:
    label: str
    memory_kind: str
    delivery_policy: str | None
    rows: int


@attrs.frozen
class DryRunReport:
    schema_version: int
    pending: tuple[str, ...]
    mapping: tuple[DryRunRow, ...]
    review_states: tuple[tuple[str, int], ...]
    total_rows: int
    #: What bringing a version-1 ``chunks`` table to the v2 shape would do first.
    schema_changes: tuple[str, ...] = ()


def dry_run(conn: apsw.Connection, path: str = "") -> DryRunReport:
    """Counts per D4 mapping row and per review state the backfill would write. Read-only:
    works on an unmigrated v1 store of any shape (where every row counts; a missing column
    reads as its default) and never alters the schema."""
    version = schema_version(conn)
    if not table_exists(conn, "chunks"):
        return DryRunReport(
            version,
            (),
            tuple(DryRunRow(r.label, r.memory_kind, r.delivery_policy, 0) for r in LEGACY_DOMAIN_TABLE),
            (),
            0,
        )
    changes = planned_normalisation(conn, path)
    cols = column_names(conn, "chunks")
    pending = (*pending_passes(conn), *pending_v3_passes(conn))
    # The rows as the backfill will see them, whatever columns the version-1 table lacks, and
    # with the one rule for NULL cells (``normalise_chunks``) applied.
    source = (
        "(SELECT "
        + ", ".join(
            f"{f'coalesce({name}, {default})' if name in cols else default} AS {name}"
            for name, default in (
                ("domain", "'general'"),
                ("source_type", "''"),
                ("memory_kind", "NULL"),
                ("review_state", "NULL"),
            )
        )
        + " FROM chunks) AS chunks"
    )
    kind_filter = "WHERE memory_kind IS NULL" if "memory_kind" in cols else ""
    review_filter = "WHERE review_state IS NULL" if "review_state" in cols else ""
    by_label: dict[str, int] = {}
    if TYPED_MEMORY_BACKFILL in pending:
        for label, count in conn.execute(
            f"SELECT {RULE_LABEL_CASE_SQL} AS label, count(*) FROM {source} {kind_filter} GROUP BY label"
        ):
            by_label[str(label)] = int(count)
    review: list[tuple[str, int]] = []
    if REVIEW_STATE_BACKFILL in pending:
        review = [
            (str(state), int(count))
            for state, count in conn.execute(
                f"SELECT {REVIEW_CASE_SQL} AS s, count(*) FROM {source} {review_filter} GROUP BY s ORDER BY s"
            )
        ]
    total = int(scalar(conn, "SELECT count(*) FROM chunks"))
    mapping = tuple(
        DryRunRow(r.label, r.memory_kind, r.delivery_policy, by_label.get(r.label, 0))
        for r in LEGACY_DOMAIN_TABLE
    )
    return DryRunReport(version, pending, mapping, tuple(review), total, changes)
