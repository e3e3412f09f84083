"""Command line: ``contextplane memory ...`` (browse and curate memories, ``reindex`` the
vectors) and
``contextplane migrate`` (bring a store to the current schema, with ``--dry-run``).

The root ``contextplane`` group registers these with ``add_command``. Every command opens the
store a runtime with the same configuration opens (``contextplane.cli_common``: ``--config``,
``--db``, the plugins' backend, knowledge store and embedder), prints a table, or JSON with
``--json``, and reports a problem as one ``error: ...`` line (exit 2). ``list``, ``show`` and
``search`` open the store read-only: they never create, migrate or change it.
"""

from __future__ import annotations

import contextlib
import difflib
import getpass
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

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
)
from contextplane.embedding import CONFIGURED, FULL_TEXT_ONLY
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.consolidation import WriteOutcome
from contextplane.memory.history import HistoryEvent, lifecycle_state
from contextplane.memory.model import (
    DELIVERY_POLICIES,
    MEMORY_KINDS,
    REVIEW_STATES,
    MemoryChunk,
    utc_now,
    validate_text,
)
from contextplane.memory.stamps import resolve_expiry
from contextplane.memory.trust import SOURCE_TYPE_TIERS
from contextplane.store import connection, migrate
from contextplane.store.protocol import MemoryHistory, SearchHit
from contextplane.textui import table

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("contextplane.cli")

#: Stores with at least this many rows to backfill get a progress bar.
PROGRESS_MIN_ROWS = 10_000

_CONTENT_WIDTH = 60


def _json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(func)


def _store_options(func: F) -> F:
    return config_option(db_option(func))


@contextlib.contextmanager
def _open(config_path: str | None, db: Path | None, *, write: bool) -> Iterator[Any]:
    """The memory store of the backend a runtime with this configuration opens."""
    with command_backend(config_path, db, write=write) as (_config, _host, backend):
        yield backend.memories


def _short(text: str, width: int = _CONTENT_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _status(chunk: MemoryChunk) -> str:
    """The row's lifecycle state now (active, pending, rejected, superseded, expired,
    invalidated); a superseded row names its successor."""
    state = lifecycle_state(chunk, utc_now())
    return f"superseded→{chunk.superseded_by}" if state == "superseded" else state


def curator() -> str:
    """Who a review made from the command line is recorded as: ``cli:<login name>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        user = "unknown"
    return f"cli:{user}"


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


def _emit_one(
    chunk: MemoryChunk,
    as_json: bool,
    *,
    history: Sequence[HistoryEvent] | None = None,
    write: WriteOutcome | None = None,
) -> None:
    data = chunk.to_dict()
    data["lifecycle_state"] = lifecycle_state(chunk, utc_now())
    if as_json:
        if history is not None:
            data["history"] = [e.to_dict() for e in history]
        if write is not None:
            data["write"] = write.to_dict()
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    for key, value in data.items():
        click.echo(f"{key:>26}: {'' if value is None else value}")
    if history is not None:
        click.echo("history:")
        for event in history:
            click.echo(f"  {event.describe()}")


_write_options: list[Callable[[F], F]] = [
    click.option("--domain", default=None, help="Legacy domain (kept for compatibility; 'hot' = always)."),
    click.option(
        "--source-type",
        default="manual",
        show_default=True,
        help=f"Provenance, matched exactly (sets the trust tier): {', '.join(sorted(SOURCE_TYPE_TIERS))}.",
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


def _checked_source_type(values: dict[str, Any]) -> dict[str, Any]:
    """Warn (once per command) when ``--source-type`` names no known provenance: it is matched
    exactly, and an unknown one silently gets the least trust."""
    source = values.get("source_type")
    if isinstance(source, str) and source not in SOURCE_TYPE_TIERS:
        known = sorted(SOURCE_TYPE_TIERS)
        near = [k for k in known if k == source.strip().lower()] or difflib.get_close_matches(
            source.lower(), known, n=1
        )
        hint = f"; did you mean {near[0]!r}?" if near else ""
        log.warning(
            "--source-type %r is not a known provenance (it is matched exactly), so the memory gets "
            "the least trust: tier 1, pending review%s (known: %s)",
            source,
            hint,
            ", ".join(known),
        )
    return values


def _content(content: str | None, file: Path | None) -> str:
    """The memory's text: the argument, standard input for ``-``, or ``--file``; UTF-8 only,
    checked before the store is opened, so bad text never even creates one."""
    return validate_text(_raw_content(content, file), "content", allow_empty=False)


def _raw_content(content: str | None, file: Path | None) -> str:
    if content is not None and file is not None:
        raise ValidationError("content: give the text as an argument or with --file, not both")
    if file is not None:
        return _decode(_read_bytes(file), str(file))
    if content is None:
        raise ValidationError(
            "content: missing; give the memory's text as an argument, '-' to read standard input, "
            "or --file PATH"
        )
    if content == "-":
        return _decode(sys.stdin.buffer.read(), "standard input")
    return content


def _read_bytes(file: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as exc:
        raise ValidationError(f"--file {file}: cannot read it ({exc.strerror})") from None


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"content: {where} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "convert it to UTF-8 first"
        ) from None


@click.group("memory", cls=CommandGroup)
def memory() -> None:
    """Browse and curate memories: add, list, show, search, confirm, reject, supersede, expire."""


_file_option = click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the memory's text from this UTF-8 file.",
)


@memory.command("add")
@click.argument("content", required=False)
@_file_option
@_with_write_options
@_store_options
@_json_option
def add_command(
    content: str | None,
    file: Path | None,
    config_path: str | None,
    db: Path | None,
    as_json: bool,
    **attrs: Any,
) -> None:
    """Add a memory: CONTENT, '-' for standard input, or --file (operator provenance by default:
    tier 3, confirmed). Embedded when an embedder is configured. An exact duplicate of a
    deliverable row is not stored again, a row naming the subject of one in its scope and kind
    supersedes it, and similar rows are reported for review (see ``[store]`` settings)."""
    text = _content(content, file)
    values = _checked_source_type(_given(**attrs))
    with _open(config_path, db, write=True) as store:
        added = store.add_chunk(text, **values)
        # A store without consolidation (a plugin's) returns a plain id: it was stored.
        outcome = added if isinstance(added, WriteOutcome) else WriteOutcome(str(added))
        chunk = store.get(outcome)
        assert chunk is not None
        if as_json:
            _emit_one(chunk, as_json, write=outcome)
        elif outcome.outcome == "stored":
            click.echo(f"added {outcome}")
        elif outcome.outcome == "duplicate":
            click.echo(f"not added: {outcome.message}")
        else:
            click.echo(f"added {outcome}: {outcome.message.split('; ', 1)[1]}")


@memory.command("list")
@click.option("--kind", "memory_kind", type=click.Choice(sorted(MEMORY_KINDS)), default=None)
@click.option("--review-state", type=click.Choice(sorted(REVIEW_STATES)), default=None)
@click.option("--policy", "delivery_policy", type=click.Choice(sorted(DELIVERY_POLICIES)), default=None)
@click.option("--namespace", "namespaces", multiple=True, help="Scope allow-list (repeatable).")
@click.option("--deliverable", is_flag=True, help="Only rows the delivery layer may use.")
@click.option(
    "--limit", type=click.IntRange(min=0), default=50, show_default=True, help="At most this many; 0 = all."
)
@_store_options
@_json_option
def list_command(
    memory_kind: str | None,
    review_state: str | None,
    delivery_policy: str | None,
    namespaces: tuple[str, ...],
    deliverable: bool,
    limit: int,
    config_path: str | None,
    db: Path | None,
    as_json: bool,
) -> None:
    """List memories, oldest first."""
    with _open(config_path, db, write=False) as store:
        chunks = store.list_chunks(
            deliverable=deliverable,
            memory_kind=memory_kind,
            review_state=review_state,
            delivery_policy=delivery_policy,
            namespaces=list(namespaces) or None,
            limit=limit or None,
        )
    _emit_chunks(chunks, as_json)


@memory.command("show")
@click.argument("chunk_id")
@_store_options
@_json_option
def show_command(chunk_id: str, config_path: str | None, db: Path | None, as_json: bool) -> None:
    """Show every attribute of one memory and its lifecycle history."""
    with _open(config_path, db, write=False) as store:
        chunk = store.get(chunk_id)
        # A plugin's store may keep no lifecycle history: then there is none to show.
        events = store.history(chunk_id) if isinstance(store, MemoryHistory) else None
    if chunk is None:
        if events:
            raise StoreError(
                f"memory {chunk_id} was purged; its history: "
                + "; ".join(e.describe() for e in events)
            )
        raise StoreError(f"no memory with id {chunk_id!r}")
    _emit_one(chunk, as_json, history=events)


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
@_store_options
@_json_option
def search_command(
    query: str,
    k: int,
    namespaces: tuple[str, ...],
    include_superseded: bool,
    include_all: bool,
    config_path: str | None,
    db: Path | None,
    as_json: bool,
) -> None:
    """Search memories (hybrid when an embedder is configured, else full-text)."""
    with _open(config_path, db, write=False) as store:
        if not as_json and not getattr(store, "vectors_enabled", False):  # JSON stays JSON
            click.echo(f"note: {FULL_TEXT_ONLY}", err=True)
        hits = store.search(
            query,
            k,
            deliverable=not include_all,
            namespaces=list(namespaces) or None,
            include_superseded=include_superseded,
        )
    _emit_hits(hits, as_json)


def _review(chunk_id: str, state: str, config_path: str | None, db: Path | None, as_json: bool) -> None:
    with _open(config_path, db, write=True) as store:
        chunk = store.set_review_state(chunk_id, state, by=curator())
    if as_json:
        _emit_one(chunk, as_json)
    else:
        click.echo(f"{chunk.id}: {chunk.review_state}")


@memory.command("confirm")
@click.argument("chunk_id")
@_store_options
@_json_option
def confirm_command(chunk_id: str, config_path: str | None, db: Path | None, as_json: bool) -> None:
    """Mark a memory confirmed by the operator."""
    _review(chunk_id, "confirmed", config_path, db, as_json)


@memory.command("reject")
@click.argument("chunk_id")
@_store_options
@_json_option
def reject_command(chunk_id: str, config_path: str | None, db: Path | None, as_json: bool) -> None:
    """Mark a memory rejected: it is kept but never delivered."""
    _review(chunk_id, "rejected", config_path, db, as_json)


@memory.command("supersede")
@click.argument("old_id")
@click.argument("content", required=False)
@_file_option
@_with_write_options
@_store_options
@_json_option
def supersede_command(
    old_id: str,
    content: str | None,
    file: Path | None,
    config_path: str | None,
    db: Path | None,
    as_json: bool,
    **attrs: Any,
) -> None:
    """Replace a memory with newer content (CONTENT, '-' for standard input, or --file); the old
    row is kept as superseded (audit trail)."""
    text = _content(content, file)
    values = _checked_source_type(_given(**attrs))
    with _open(config_path, db, write=True) as store:
        new_id = store.supersede(old_id, text, **values)
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
@_store_options
@_json_option
def expire_command(
    chunk_id: str,
    at: str | None,
    in_days: int | None,
    clear: bool,
    config_path: str | None,
    db: Path | None,
    as_json: bool,
) -> None:
    """Set when a memory stops being delivered (the row itself is kept)."""
    given = [flag for flag, value in (("--at", at), ("--in-days", in_days), ("--clear", clear)) if value]
    if len(given) > 1:
        raise ValidationError(
            f"{' and '.join(given)} conflict: give one of --at (a time), --in-days (from now) or --clear "
            "(no expiry); none expires the memory now"
        )
    now = utc_now()
    when = None if clear else resolve_expiry(at, in_days, now) or now
    with _open(config_path, db, write=True) as store:
        chunk = store.set_expires_at(chunk_id, when, by=curator())
    if as_json:
        _emit_one(chunk, as_json)
    else:
        click.echo(f"{chunk.id}: expires {chunk.expires_at.isoformat() if chunk.expires_at else 'never'}")


@memory.command("status")
@_store_options
@_json_option
def status_command(config_path: str | None, db: Path | None, as_json: bool) -> None:
    """The store's vector space (which embedder made its vectors), the configured embedder and
    whether they match, and the rows without a vector (what `memory reindex` would embed).
    Opens the store without its embedder, so a mismatch is reported here, not refused."""
    _config, host = load(config_path)
    embedder = host.embedder()
    with command_backend(config_path, db, write=False, host=host, embedder=None) as (_c, _h, backend):
        store = backend.memories
        if not hasattr(store, "vector_space"):
            raise StoreError(f"{getattr(store, 'name', 'the store')}: this memory store keeps no vectors")
        name, dims = store.vector_space()
        missing = store.vectorless_count()
        where = str(getattr(store, "path", None) or getattr(store, "name", "the store"))
    wanted = None if embedder is None else (embedder.name, int(embedder.dimensions))
    matches = None if wanted is None or dims is None else wanted == (name, dims)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "store": where,
                    "vector_space": {"embedder": name, "dimensions": dims},
                    "embedder": None if wanted is None else {"embedder": wanted[0], "dimensions": wanted[1]},
                    "matches": matches,
                    "without_vector": missing,
                }
            )
        )
        return
    click.echo(f"store: {where}")
    click.echo(f"vector space: {'none yet' if dims is None else f'{name} ({dims} dimensions)'}")
    if wanted is None:
        click.echo(f"embedder: none configured; {FULL_TEXT_ONLY}")
    else:
        verdict = {
            None: "",
            True: ", matches",
            False: ": differs, run `contextplane memory reindex --rebuild`",
        }
        click.echo(f"embedder: {wanted[0]} ({wanted[1]} dimensions){verdict[matches]}")
    click.echo(f"rows without a vector: {missing}")


@memory.command("reindex")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Embed every memory again with the configured embedder and make its vector space the store's "
    "(after changing [embedder]).",
)
@_store_options
@_json_option
def reindex_command(rebuild: bool, config_path: str | None, db: Path | None, as_json: bool) -> None:
    """Embed the memories that have no vector yet (written before an embedder was configured, or
    left by an interrupted rebuild), then retrain the vector index (off the write path: a store
    past 65,536 vectors is never retrained inside a write). With --rebuild, every memory is
    embedded again: the fix when the store's vectors are another embedder's."""
    config, host = load(config_path)
    embedder = host.embedder()
    if embedder is None:
        server = db is None and config.store.backend != "sqlite"
        where = f"store.backend = {config.store.backend!r}" if server else str(command_store_path(config, db))
        raise StoreError(
            f"{where}: no embedder is configured ([embedder] provider in the configuration, or a plugin's "
            "`embedder` hook), so there are no vectors to build"
        )
    # A rebuild opens the store without the embedder (its vectors may be another space's, which
    # opening with the new one refuses) and hands it over.
    opening = None if rebuild else CONFIGURED
    with command_backend(config_path, db, write=True, host=host, embedder=opening) as (_c, _h, backend):
        store = backend.memories
        if not hasattr(store, "rebuild_vectors"):
            raise StoreError(f"{getattr(store, 'name', 'the store')}: this memory store cannot build vectors")
        count = store.rebuild_vectors(embedder) if rebuild else store.reindex_vectors()
        train = getattr(store, "train_vector_index", None)
        lists = int(train()) if callable(train) else 0
        missing = store.vectorless_count()
        name, dims = store.vector_space()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "embedded": count,
                    "lists": lists,
                    "without_vector": missing,
                    "vector_space": {"embedder": name, "dimensions": dims},
                }
            )
        )
    else:
        click.echo(f"embedded {count} memories with {name} ({dims} dimensions); {missing} without a vector")


@click.command("migrate", cls=Command)
@click.option("--dry-run", is_flag=True, help="Print what the migration would do; change nothing.")
@click.option(
    "--batch-rows", type=click.IntRange(min=1), default=migrate.DEFAULT_BATCH_ROWS, show_default=True
)
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
