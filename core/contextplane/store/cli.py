"""Command line: ``contextplane memory ...`` (browse and curate memories, ``reindex`` the
vectors) and
``contextplane migrate`` (bring a store to the current schema, with ``--dry-run``).

The root ``contextplane`` group registers these with ``add_command``. Every command takes
``--db PATH`` (default ``$CONTEXTPLANE_DB`` or the user data directory) and prints a table,
or JSON with ``--json``. Errors the store raises on purpose become one-line messages.
An embedder, when the root group has one, is read from ``ctx.obj["embedder"]``.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from contextplane.errors import ContextPlaneError
from contextplane.memory.model import DELIVERY_POLICIES, MEMORY_KINDS, REVIEW_STATES, MemoryChunk
from contextplane.plugins import get_host
from contextplane.store import default_db_path, migrate
from contextplane.store.protocol import SearchHit
from contextplane.store.sqlite import SQLiteKnowledgeStore, connect
from contextplane.textui import table

F = TypeVar("F", bound=Callable[..., Any])

#: Stores with at least this many rows to backfill get a progress bar.
PROGRESS_MIN_ROWS = 10_000

_CONTENT_WIDTH = 60


def _db_option(func: F) -> F:
    return click.option(
        "--db",
        "db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Store file (default: $CONTEXTPLANE_DB, else <user data dir>/contextplane/memory.sqlite3).",
    )(func)


def _json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(func)


def _friendly_errors(func: F) -> F:
    """Turn deliberate errors into ``Error: <message>`` and exit status 1, not a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ContextPlaneError as exc:
            raise click.ClickException(str(exc)) from None

    return cast(F, wrapper)


@contextlib.contextmanager
def _open(db: Path | None, *, create: bool = True) -> Iterator[SQLiteKnowledgeStore]:
    ctx = click.get_current_context(silent=True)
    embedder = ctx.obj.get("embedder") if ctx is not None and isinstance(ctx.obj, dict) else None
    store = SQLiteKnowledgeStore(db or default_db_path(), embedder=embedder, create=create)
    try:
        yield store
    finally:
        store.close()


def _short(text: str, width: int = _CONTENT_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _status(chunk: MemoryChunk) -> str:
    if chunk.superseded_by:
        return f"superseded→{chunk.superseded_by}"
    if chunk.invalidated_at is not None:
        return "invalidated"
    if chunk.is_expired():
        return "expired"
    return "active"


_HEADERS = ("id", "kind", "policy", "review", "tier", "scope", "status", "content")


def _row(chunk: MemoryChunk) -> list[str]:
    return [
        chunk.id,
        chunk.memory_kind,
        chunk.effective_delivery_policy,
        chunk.review_state,
        f"{chunk.trust_tier}:{chunk.trust_label}",
        chunk.namespace or "(global)",
        _status(chunk),
        _short(chunk.content),
    ]


def _emit_chunks(chunks: Sequence[MemoryChunk], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([c.to_dict() for c in chunks], indent=2, ensure_ascii=False))
    elif not chunks:
        click.echo("no memories")
    else:
        click.echo(table(_HEADERS, [_row(c) for c in chunks]))


def _emit_one(chunk: MemoryChunk, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(chunk.to_dict(), indent=2, ensure_ascii=False))
        return
    for key, value in chunk.to_dict().items():
        click.echo(f"{key:>26}: {'' if value is None else value}")


_write_options: list[Callable[[F], F]] = [
    click.option("--domain", default=None, help="Legacy domain (kept for compatibility; 'hot' = always)."),
    click.option(
        "--source-type", default="manual", show_default=True, help="Provenance (sets the trust tier)."
    ),
    click.option("--kind", "memory_kind", type=click.Choice(sorted(MEMORY_KINDS)), default=None),
    click.option("--policy", "delivery_policy", type=click.Choice(sorted(DELIVERY_POLICIES)), default=None),
    click.option("--review-state", type=click.Choice(sorted(REVIEW_STATES)), default=None),
    click.option("--namespace", default=None, help="Scope: '' global, project:<id> or session:<id>."),
    click.option("--heading", default=None),
    click.option("--source", default=None),
    click.option("--subject", default=None),
    click.option("--epoch", default=None),
    click.option("--expires-at", default=None, help="ISO-8601 time with offset, e.g. 2027-01-31T00:00:00Z."),
    click.option("--expires-in-days", type=int, default=None, help="1..3650 days from now."),
]


def _with_write_options(func: F) -> F:
    for option in reversed(_write_options):
        func = option(func)
    return func


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


@click.group("memory")
def memory() -> None:
    """Browse and curate memories: add, list, show, search, confirm, reject, supersede, expire."""


@memory.command("add")
@click.argument("content")
@_with_write_options
@_db_option
@_json_option
@_friendly_errors
def add_command(content: str, db: Path | None, as_json: bool, **attrs: Any) -> None:
    """Add a memory (operator provenance by default: tier 3, confirmed)."""
    with _open(db) as store:
        chunk_id = store.add_chunk(content, **_given(**attrs))
        chunk = store.get(chunk_id)
        assert chunk is not None
        if as_json:
            _emit_one(chunk, as_json)
        else:
            click.echo(f"added {chunk_id}")


@memory.command("list")
@click.option("--kind", "memory_kind", type=click.Choice(sorted(MEMORY_KINDS)), default=None)
@click.option("--review-state", type=click.Choice(sorted(REVIEW_STATES)), default=None)
@click.option("--policy", "delivery_policy", type=click.Choice(sorted(DELIVERY_POLICIES)), default=None)
@click.option("--namespace", "namespaces", multiple=True, help="Scope allow-list (repeatable).")
@click.option("--deliverable", is_flag=True, help="Only rows the delivery layer may use.")
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True)
@_db_option
@_json_option
@_friendly_errors
def list_command(
    memory_kind: str | None,
    review_state: str | None,
    delivery_policy: str | None,
    namespaces: tuple[str, ...],
    deliverable: bool,
    limit: int,
    db: Path | None,
    as_json: bool,
) -> None:
    """List memories, oldest first."""
    with _open(db) as store:
        chunks = store.list_chunks(
            deliverable=deliverable,
            memory_kind=memory_kind,
            review_state=review_state,
            delivery_policy=delivery_policy,
            namespaces=list(namespaces) or None,
            limit=limit,
        )
    _emit_chunks(chunks, as_json)


@memory.command("show")
@click.argument("chunk_id")
@_db_option
@_json_option
@_friendly_errors
def show_command(chunk_id: str, db: Path | None, as_json: bool) -> None:
    """Show every attribute of one memory."""
    with _open(db) as store:
        chunk = store.get(chunk_id)
    if chunk is None:
        raise click.ClickException(f"no memory with id {chunk_id!r}")
    _emit_one(chunk, as_json)


def _emit_hits(hits: Sequence[SearchHit], as_json: bool) -> None:
    if as_json:
        payload = [{"rank": h.rank, "score": h.score, "chunk": h.chunk.to_dict()} for h in hits]
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
    elif not hits:
        click.echo("no matches")
    else:
        rows = [[str(h.rank), f"{h.score:.4f}", *_row(h.chunk)] for h in hits]
        click.echo(table(("rank", "score", *_HEADERS), rows))


@memory.command("search")
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--namespace", "namespaces", multiple=True, help="Scope allow-list (repeatable).")
@click.option("--include-superseded", is_flag=True, help="Also return superseded rows (audit trail).")
@click.option("--all", "include_all", is_flag=True, help="Ignore the deliverable filter.")
@_db_option
@_json_option
@_friendly_errors
def search_command(
    query: str,
    k: int,
    namespaces: tuple[str, ...],
    include_superseded: bool,
    include_all: bool,
    db: Path | None,
    as_json: bool,
) -> None:
    """Search memories (hybrid when an embedder is configured, else full-text)."""
    with _open(db) as store:
        hits = store.search(
            query,
            k,
            deliverable=not include_all,
            namespaces=list(namespaces) or None,
            include_superseded=include_superseded,
        )
    _emit_hits(hits, as_json)


def _review(chunk_id: str, state: str, db: Path | None, as_json: bool) -> None:
    with _open(db) as store:
        chunk = store.set_review_state(chunk_id, state)
    if as_json:
        _emit_one(chunk, as_json)
    else:
        click.echo(f"{chunk.id}: {chunk.review_state}")


@memory.command("confirm")
@click.argument("chunk_id")
@_db_option
@_json_option
@_friendly_errors
def confirm_command(chunk_id: str, db: Path | None, as_json: bool) -> None:
    """Mark a memory confirmed by the operator."""
    _review(chunk_id, "confirmed", db, as_json)


@memory.command("reject")
@click.argument("chunk_id")
@_db_option
@_json_option
@_friendly_errors
def reject_command(chunk_id: str, db: Path | None, as_json: bool) -> None:
    """Mark a memory rejected: it is kept but never delivered."""
    _review(chunk_id, "rejected", db, as_json)


@memory.command("supersede")
@click.argument("old_id")
@click.argument("content")
@_with_write_options
@_db_option
@_json_option
@_friendly_errors
def supersede_command(old_id: str, content: str, db: Path | None, as_json: bool, **attrs: Any) -> None:
    """Replace a memory with newer content; the old row is kept as superseded (audit trail)."""
    with _open(db) as store:
        new_id = store.supersede(old_id, content, **_given(**attrs))
        chunk = store.get(new_id)
        assert chunk is not None
    if as_json:
        _emit_one(chunk, as_json)
    else:
        click.echo(f"{old_id} superseded by {new_id}")


@memory.command("expire")
@click.argument("chunk_id")
@click.option("--at", "at", default=None, help="ISO-8601 time with offset (default: now).")
@click.option("--in-days", type=int, default=None, help="Expire this many days from now (1..3650).")
@click.option("--clear", is_flag=True, help="Remove the expiry instead.")
@_db_option
@_json_option
@_friendly_errors
def expire_command(
    chunk_id: str, at: str | None, in_days: int | None, clear: bool, db: Path | None, as_json: bool
) -> None:
    """Set when a memory stops being delivered (the row itself is kept)."""
    from contextplane.memory.model import utc_now
    from contextplane.memory.stamps import resolve_expiry

    now = utc_now()
    when = None if clear else resolve_expiry(at, in_days, now) or now
    with _open(db) as store:
        chunk = store.set_expires_at(chunk_id, when)
    if as_json:
        _emit_one(chunk, as_json)
    else:
        click.echo(f"{chunk.id}: expires {chunk.expires_at.isoformat() if chunk.expires_at else 'never'}")


@memory.command("reindex")
@click.option("--rebuild", is_flag=True, help="Re-embed every row (after switching embedders).")
@_db_option
@_json_option
@_friendly_errors
def reindex_command(rebuild: bool, db: Path | None, as_json: bool) -> None:
    """Embed rows that have no vector, then retrain the vector index (off the write path: a
    store past 65,536 vectors is never retrained inside a write)."""
    ctx = click.get_current_context()
    given = ctx.obj.get("embedder") if isinstance(ctx.obj, dict) else None
    embedder = given if given is not None else get_host().embedder()
    with SQLiteKnowledgeStore(db or default_db_path(), embedder=embedder, create=False) as store:
        if not store.vectors_enabled:
            raise click.ClickException(
                f"{store.path}: no embedder configured, so there is no vector index to rebuild; "
                "install a plugin that provides one (the contextplane_embedder hook)"
            )
        embedded = store.reindex_vectors(rebuild=rebuild)
        lists = store.train_vector_index()
    if as_json:
        click.echo(json.dumps({"embedded": embedded, "lists": lists}))
    else:
        click.echo(f"{store.path}: {embedded} rows embedded; vector index trained with {lists} lists")


@click.command("migrate")
@click.option("--dry-run", is_flag=True, help="Print what the backfill would write; change nothing.")
@click.option(
    "--batch-rows", type=click.IntRange(min=1), default=migrate.DEFAULT_BATCH_ROWS, show_default=True
)
@_db_option
@_json_option
@_friendly_errors
def migrate_command(dry_run: bool, batch_rows: int, db: Path | None, as_json: bool) -> None:
    """Upgrade a memory store to the current schema (D4 typed memory, D7 review state)."""
    path = db or default_db_path()
    conn = connect(path, create=False)
    try:
        migrate.check_schema_version(conn, str(path))
        if dry_run:
            _print_dry_run(migrate.dry_run(conn), as_json)
            return
        with contextlib.ExitStack() as stack:
            bar: Any = None

            def on_batch(done: int, total: int) -> None:
                nonlocal bar
                if bar is None and total >= PROGRESS_MIN_ROWS and not as_json:
                    bar = stack.enter_context(click.progressbar(length=total, label="backfilling", file=None))
                if bar is not None:
                    bar.update(done - bar.pos)

            result = migrate.ensure_schema(conn, str(path), on_batch=on_batch, batch_rows=batch_rows)
            bar = None
            stemmed = migrate.migrate_stemming(conn, on_batch=on_batch, batch_rows=batch_rows)
        if as_json:
            click.echo(json.dumps({"result": {**_result_dict(result), "stemmed_rows": stemmed}}, indent=2))
        elif result.created:
            click.echo(f"{path}: created at schema version {migrate.SCHEMA_VERSION}")
        elif result.passes_run or result.added_columns:
            click.echo(
                f"{path}: migrated from schema version {result.from_version} to {migrate.SCHEMA_VERSION}; "
                f"passes {', '.join(result.passes_run) or 'none'}; {result.rows_visited} rows"
            )
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
                },
                indent=2,
            )
        )
        return
    click.echo(
        f"schema version {report.schema_version} -> {migrate.SCHEMA_VERSION}; {report.total_rows} rows; "
        f"pending passes: {', '.join(report.pending) or 'none'}"
    )
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
