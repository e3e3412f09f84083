"""Command line: ``contextplane memory ...`` (browse and curate memories, ``reindex`` the
vectors) and ``contextplane migrate`` (bring a store to the current schema, with ``--dry-run``).

The root ``contextplane`` group registers these with ``add_command``. Every command opens the
store a runtime with the same configuration opens (``contextplane.cli_common``: ``--config``,
``--db``, the plugins' backend, knowledge store and embedder), prints a table, or JSON with
``--json``, and reports a problem as one ``error: ...`` line (exit 2). ``list``, ``show`` and
``search`` open the store read-only: they never create, migrate or change it.

Split by job: ``cli_options`` (what a command reads, checked before the store opens),
``cli_output`` (tables and JSON), ``cli_browse`` (read-only), ``cli_curate`` (writes with an
audit trail), ``cli_upkeep`` (export, import, status, reindex). This module holds the ``memory``
group (``contextplane --help`` reads its help from here without importing it) and ``migrate``,
and re-exports every name it had; a name set here (``monkeypatch.setattr(cli,
"command_backend", ...)``) is set too in the module that reads it (``contextplane.shims``).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import apsw
import click

from contextplane.cli_common import (
    Command,
    CommandGroup,
    command_backend,
    command_store_path,
    config_option,
    db_option,
    load,
    query_text,
)
from contextplane.cli_params import (
    STORE_INT_MAX,
    Whole,
)
from contextplane.embedding import (
    CONFIGURED,
    FULL_TEXT_ONLY,
)
from contextplane.errors import (
    StoreError,
    ValidationError,
)
from contextplane.memory.consolidation import (
    WriteOutcome,
)
from contextplane.memory.history import (
    HistoryEvent,
    lifecycle_state,
)
from contextplane.memory.model import (
    DELIVERY_POLICIES,
    MEMORY_KINDS,
    REVIEW_STATES,
    MemoryChunk,
    format_timestamp,
    parse_occurred_at,
    parse_timestamp,
    utc_now,
    validate_text,
)
from contextplane.memory.stamps import (
    resolve_expiry,
)
from contextplane.memory.trust import (
    SOURCE_TYPE_TIERS,
)
from contextplane.plugins import (
    PluginHost,
)
from contextplane.shims import patch_through
from contextplane.store import (
    cli_browse,
    cli_curate,
    cli_options,
    cli_output,
    cli_upkeep,
    connection,
    jsonl,
    migrate,
)
from contextplane.store.api import (
    check_write_size,
)
from contextplane.store.cli_browse import (
    list_command,
    search_command,
    show_command,
)
from contextplane.store.cli_curate import (
    _review,
    _superseded_another,
    add_command,
    confirm_command,
    curator,
    expire_command,
    purge_command,
    reject_command,
    supersede_command,
)
from contextplane.store.cli_options import (
    DAYS,
    F,
    _bounded,
    _checked_source_type,
    _content,
    _decode,
    _event_window,
    _event_window_options,
    _file_option,
    _given,
    _json_option,
    _open,
    _raw_content,
    _read_bytes,
    _store_options,
    _strip_one_newline,
    _with_write_options,
    _write_options,
    log,
)
from contextplane.store.cli_output import (
    _CONTENT_WIDTH,
    _HEADERS,
    SHOW_CHARS,
    SHOW_MARKER,
    _emit_chunks,
    _emit_hits,
    _emit_one,
    _headers,
    _row,
    _short,
    _status,
)
from contextplane.store.cli_upkeep import (
    export_command,
    import_command,
    reindex_command,
    status_command,
)
from contextplane.store.protocol import (
    ExactRestore,
    MemoryHistory,
    SearchHit,
)
from contextplane.textui import table

#: Stores with at least this many rows to backfill get a progress bar.
PROGRESS_MIN_ROWS = 10_000


@click.group("memory", cls=CommandGroup)
def memory() -> None:
    """Browse and curate memories: add, list, show, search, confirm, reject, supersede, expire."""


for _command in (
    add_command,
    list_command,
    show_command,
    search_command,
    confirm_command,
    reject_command,
    supersede_command,
    expire_command,
    purge_command,
    export_command,
    import_command,
    status_command,
    reindex_command,
):
    memory.add_command(_command)


@click.command("migrate", cls=Command)
@click.option("--dry-run", is_flag=True, help="Print what the migration would do; change nothing.")
@click.option("--batch-rows", type=Whole(1), default=migrate.DEFAULT_BATCH_ROWS, show_default=True)
@_store_options
@_json_option
def migrate_command(
    dry_run: bool, batch_rows: int, config_path: str | None, db: Path | None, as_json: bool
) -> None:
    """Upgrade a memory store to the current schema (D4 typed memory, D7 review state)."""
    config, host = load(config_path)
    if db is None and (host.backend() is not None or host.knowledge_store() is not None):
        raise StoreError(
            "the configured memory store is a plugin's, not the embedded SQLite store that `contextplane "
            "migrate` upgrades; pass --db to name an embedded store file"
        )
    path = command_store_path(config, db)
    conn = connection.connect(path, create=False, read_only=dry_run)
    try:
        if dry_run:
            _print_dry_run(migrate.dry_run(conn, str(path)), as_json)
            return
        with contextlib.ExitStack() as stack:
            bar: Any = None

            def on_batch(done: int, total: int) -> None:
                nonlocal bar
                if bar is None and total >= PROGRESS_MIN_ROWS and not as_json:
                    bar = stack.enter_context(click.progressbar(length=total, label="backfilling", file=None))
                if bar is not None:
                    bar.update(done - bar.pos)

            try:
                result = migrate.ensure_schema(conn, str(path), on_batch=on_batch, batch_rows=batch_rows)
                bar = None
                stemmed = migrate.migrate_stemming(conn, on_batch=on_batch, batch_rows=batch_rows)
            except apsw.Error as exc:
                raise connection.store_error(str(path), exc, migrate.MIGRATING) from None
        if as_json:
            click.echo(json.dumps({"result": {**_result_dict(result), "stemmed_rows": stemmed}}, indent=2))
        elif result.created:
            click.echo(f"{path}: created at schema version {migrate.SCHEMA_VERSION}")
        elif result.changed:
            click.echo(
                f"{path}: migrated from schema version {result.from_version} to {migrate.SCHEMA_VERSION}; "
                f"passes {', '.join(result.passes_run) or 'none'}; {result.rows_visited} rows"
            )
            for change in result.normalised:
                click.echo(f"  {change}")
        elif not stemmed:
            click.echo(f"{path}: already at schema version {migrate.SCHEMA_VERSION}; nothing to do")
        if stemmed and not as_json:
            click.echo(f"{path}: full-text index rebuilt with stemming; {stemmed} rows")
    finally:
        conn.close()


def _result_dict(result: migrate.MigrationResult) -> dict[str, Any]:
    return {
        "created": result.created,
        "from_version": result.from_version,
        "to_version": migrate.SCHEMA_VERSION,
        "added_columns": list(result.added_columns),
        "passes_run": list(result.passes_run),
        "rows_visited": result.rows_visited,
        "normalised": list(result.normalised),
    }


def _print_dry_run(report: migrate.DryRunReport, as_json: bool) -> None:
    if as_json:
        click.echo(
            json.dumps(
                {
                    "schema_version": report.schema_version,
                    "pending": list(report.pending),
                    "total_rows": report.total_rows,
                    "mapping": [
                        {
                            "rule": r.label,
                            "memory_kind": r.memory_kind,
                            "delivery_policy": r.delivery_policy,
                            "rows": r.rows,
                        }
                        for r in report.mapping
                    ],
                    "review_states": dict(report.review_states),
                    "schema_changes": list(report.schema_changes),
                },
                indent=2,
            )
        )
        return
    click.echo(
        f"schema version {report.schema_version} -> {migrate.SCHEMA_VERSION}; {report.total_rows} rows; "
        f"pending passes: {', '.join(report.pending) or 'none'}"
    )
    for change in report.schema_changes:
        click.echo(f"first: {change}")
    rows = [
        [r.label, r.memory_kind, r.delivery_policy or "NULL (retrieved)", str(r.rows)] for r in report.mapping
    ]
    click.echo(table(("domain rule", "memory_kind", "delivery_policy", "rows"), rows))
    if report.review_states:
        click.echo(table(("review_state", "rows"), [[s, str(n)] for s, n in report.review_states]))


def register(group: click.Group) -> None:
    """Attach ``memory`` and ``migrate`` to the root ``contextplane`` command group."""
    group.add_command(memory)
    group.add_command(migrate_command)


patch_through(
    __name__,
    (
        cli_options,
        cli_output,
        cli_browse,
        cli_curate,
        cli_upkeep,
    ),
)

__all__ = [
    "CONFIGURED",
    "DAYS",
    "DELIVERY_POLICIES",
    "FULL_TEXT_ONLY",
    "MEMORY_KINDS",
    "PROGRESS_MIN_ROWS",
    "REVIEW_STATES",
    "SHOW_CHARS",
    "SHOW_MARKER",
    "SOURCE_TYPE_TIERS",
    "STORE_INT_MAX",
    "_CONTENT_WIDTH",
    "_HEADERS",
    "Command",
    "CommandGroup",
    "ExactRestore",
    "F",
    "HistoryEvent",
    "MemoryChunk",
    "MemoryHistory",
    "PluginHost",
    "SearchHit",
    "StoreError",
    "ValidationError",
    "Whole",
    "WriteOutcome",
    "_bounded",
    "_checked_source_type",
    "_content",
    "_decode",
    "_emit_chunks",
    "_emit_hits",
    "_emit_one",
    "_event_window",
    "_event_window_options",
    "_file_option",
    "_given",
    "_headers",
    "_json_option",
    "_open",
    "_print_dry_run",
    "_raw_content",
    "_read_bytes",
    "_result_dict",
    "_review",
    "_row",
    "_short",
    "_status",
    "_store_options",
    "_strip_one_newline",
    "_superseded_another",
    "_with_write_options",
    "_write_options",
    "add_command",
    "check_write_size",
    "cli_browse",
    "cli_curate",
    "cli_options",
    "cli_output",
    "cli_upkeep",
    "command_backend",
    "command_store_path",
    "config_option",
    "confirm_command",
    "connection",
    "curator",
    "db_option",
    "expire_command",
    "export_command",
    "format_timestamp",
    "import_command",
    "jsonl",
    "lifecycle_state",
    "list_command",
    "load",
    "log",
    "memory",
    "migrate",
    "migrate_command",
    "parse_occurred_at",
    "parse_timestamp",
    "purge_command",
    "query_text",
    "register",
    "reindex_command",
    "reject_command",
    "resolve_expiry",
    "search_command",
    "show_command",
    "status_command",
    "supersede_command",
    "table",
    "utc_now",
    "validate_text",
]
