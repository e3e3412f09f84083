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
import inspect
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import apsw
import click
from attrs import evolve as attrs_evolve

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
from contextplane.cli_params import STORE_INT_MAX, Whole
from contextplane.embedding import CONFIGURED, FULL_TEXT_ONLY
from contextplane.errors import StoreError, ValidationError
from contextplane.memory.consolidation import WriteOutcome
from contextplane.memory.history import HistoryEvent, lifecycle_state
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
from contextplane.memory.stamps import resolve_expiry
from contextplane.memory.trust import SOURCE_TYPE_TIERS
from contextplane.plugins import PluginHost
from contextplane.store import connection, jsonl, migrate
from contextplane.store.api import check_write_size
from contextplane.store.protocol import ExactRestore, MemoryHistory, SearchHit
from contextplane.textui import table

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("contextplane.cli")

#: Stores with at least this many rows to backfill get a progress bar.
PROGRESS_MIN_ROWS = 10_000

_CONTENT_WIDTH = 60

#: Days of an expiry: any whole number a store holds; the model says which are allowed.
DAYS = Whole(-STORE_INT_MAX - 1)


def _json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(func)


def _store_options(func: F) -> F:
    return config_option(db_option(func))


@contextlib.contextmanager
def _open(
    config_path: str | None,
    db: Path | None,
    *,
    write: bool,
    create: bool = False,
    host: PluginHost | None = None,
) -> Iterator[Any]:
    """The memory store of the backend a runtime with this configuration opens; only a
    command that adds memories (``create``) makes a new store, the others refuse a path with
    none (a typo must not curate an empty store)."""
    with command_backend(config_path, db, write=write, create=create, host=host) as (_config, _host, backend):
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


def _headers(chunks: Sequence[MemoryChunk]) -> tuple[str, ...]:
    """The table's columns: an ``occurred`` column (event time) only when a row has one, so a
    store without event times lists as it always did."""
    if any(c.occurred_at is not None for c in chunks):
        return (*_HEADERS[:-1], "occurred", _HEADERS[-1])
    return _HEADERS


def _row(chunk: MemoryChunk, event_time: bool = False) -> list[str]:
    occurred = [format_timestamp(chunk.occurred_at) if chunk.occurred_at else ""] if event_time else []
    return [
        chunk.id,
        chunk.memory_kind,
        chunk.effective_delivery_policy,
        chunk.review_state,
        f"{chunk.trust_tier}:{chunk.trust_label}",
        chunk.namespace or "(global)",
        _status(chunk),
        *occurred,
        _short(chunk.content),
    ]


def _emit_chunks(chunks: Sequence[MemoryChunk], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([c.to_dict() for c in chunks], indent=2, ensure_ascii=False))
    elif not chunks:
        click.echo("no memories")
    else:
        headers = _headers(chunks)
        click.echo(table(headers, [_row(c, headers != _HEADERS) for c in chunks]))


def _emit_one(
    chunk: MemoryChunk,
    as_json: bool,
    *,
    history: Sequence[HistoryEvent] | None = None,
    write: WriteOutcome | None = None,
    whole: bool = True,
) -> None:
    data = chunk.to_dict()
    content = chunk.content
    if not whole and len(content) > SHOW_CHARS:
        # A 50 MB memory would flood the terminal: its head, and how to see the rest.
        data["content"] = content[:SHOW_CHARS] + "\n" + SHOW_MARKER.format(n=len(content) - SHOW_CHARS)
        data["content_chars"] = len(content)
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
    click.option("--expires-in-days", type=DAYS, default=None, help="1..3650 days from now."),
    click.option(
        "--occurred-at",
        default=None,
        help="When what it describes happened (event time, not write time): ISO-8601 with offset.",
    ),
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


def _content(content: str | None, file: Path | None, limit: int = 0) -> str:
    """The memory's text: the argument, standard input for ``-``, or ``--file``; UTF-8 only and
    at most ``limit`` chars (``store.max_write_chars``; 0: no bound), checked before the store
    is opened, so bad text never even creates one. A file or standard input is read only up to
    what the limit could hold, so a 50 MB paste is refused without being read whole."""
    text = validate_text(_raw_content(content, file, limit), "content", allow_empty=False)
    check_write_size(text, limit)
    return text


def _raw_content(content: str | None, file: Path | None, limit: int = 0) -> str:
    if content is not None and file is not None:
        raise ValidationError("content: give the text as an argument or with --file, not both")
    # A char is at most 4 bytes of UTF-8: more bytes than that cannot be within the limit.
    cap = 4 * limit if limit else -1
    if file is not None:
        return _decode(_bounded(_read_bytes(file, cap), cap, str(file), limit), str(file))
    if content is None:
        raise ValidationError(
            "content: missing; give the memory's text as an argument, '-' to read standard input, "
            "or --file PATH"
        )
    if content == "-":
        data = sys.stdin.buffer.read(cap + 1 if limit else -1)
        # ``echo text | contextplane memory add -`` means the text, not the text and echo's newline.
        return _strip_one_newline(_decode(_bounded(data, cap, "standard input", limit), "standard input"))
    return content


def _strip_one_newline(text: str) -> str:
    for end in ("\r\n", "\n"):
        if text.endswith(end):
            return text[: -len(end)]
    return text


def _bounded(data: bytes, cap: int, where: str, limit: int) -> bytes:
    if cap >= 0 and len(data) > cap:
        raise ValidationError(
            f"content: {where} holds more than {cap:,} bytes, over the {limit:,}-char limit for "
            "one memory (store.max_write_chars); split it into smaller memories, or raise "
            "store.max_write_chars"
        )
    return data


def _read_bytes(file: Path, cap: int = -1) -> bytes:
    try:
        with file.open("rb") as handle:
            return handle.read(cap + 1 if cap >= 0 else -1)
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


def _event_window_options(func: F) -> F:
    """``--occurred-after`` / ``--occurred-before``: the event-time window of list and search."""
    func = click.option(
        "--occurred-before", default=None, help="Only memories whose event time is before this (ISO-8601)."
    )(func)
    return click.option(
        "--occurred-after",
        default=None,
        help="Only memories whose event time is at or after this (ISO-8601).",
    )(func)


def _event_window(window: dict[str, Any]) -> dict[str, Any]:
    """The window's bounds, checked before the store is opened (a bad one opens nothing)."""
    return {k: parse_timestamp(v, k) for k, v in window.items() if v is not None}


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
    config, host = load(config_path)
    text = _content(content, file, config.store.max_write_chars)
    values = _checked_source_type(_given(**attrs))
    if "occurred_at" in values:  # checked before the store is opened, like the text
        values["occurred_at"] = parse_occurred_at(values["occurred_at"])
    with _open(config_path, db, write=True, create=True, host=host) as store:
        added = store.add_chunk(text, **values)
        # A store without consolidation (a plugin's) returns a plain id: it was stored.
        outcome = added if isinstance(added, WriteOutcome) else WriteOutcome(str(added))
        chunk = store.get(outcome)
        assert chunk is not None
        if as_json:
            _emit_one(chunk, as_json, write=outcome)
        elif outcome.outcome == "stored":
            click.echo(f"added {outcome}")
        elif not outcome.stored:  # a duplicate, or the text of a superseded row
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
    "--limit", type=Whole(0), default=50, show_default=True, help="At most this many; 0 = all."
)
@_event_window_options
@click.option("--offset", type=Whole(0), default=0, show_default=True, help="Skip this many rows first.")
@_store_options
@_json_option
def list_command(
    memory_kind: str | None,
    review_state: str | None,
    delivery_policy: str | None,
    namespaces: tuple[str, ...],
    deliverable: bool,
    limit: int,
    offset: int,
    config_path: str | None,
    db: Path | None,
    as_json: bool,
    **window: Any,
) -> None:
    """List memories, oldest first; a listing that is not the whole store says which rows of
    how many it shows, and the --offset of the next page."""
    filters: dict[str, Any] = {
        "deliverable": deliverable,
        "memory_kind": memory_kind,
        "review_state": review_state,
        "delivery_policy": delivery_policy,
        "namespaces": list(namespaces) or None,
        **_event_window(window),
    }
    with _open(config_path, db, write=False) as store:
        chunks = store.list_chunks(**filters, limit=limit or None, **({"offset": offset} if offset else {}))
        partial = offset > 0 or (limit > 0 and len(chunks) == limit)
        count = getattr(store, "count_chunks", None)  # optional in the protocol
        total = int(count(**filters)) if partial and callable(count) else None
    _emit_chunks(chunks, as_json)
    if as_json or not partial:
        return
    shown = f"rows {offset + 1}-{offset + len(chunks)}" if chunks else f"no rows from offset {offset}"
    of = f" of {total}" if total is not None else ""
    more = total is None or offset + len(chunks) < total
    nxt = f"; next page: --offset {offset + len(chunks)}, all: --limit 0" if more and chunks else ""
    click.echo(f"{shown}{of}{nxt}")


#: ``memory show`` prints at most this many chars of a memory's content without ``--all``.
SHOW_CHARS = 10_000
SHOW_MARKER = "[… cut: {n:,} more chars; --all prints the whole memory]"


@memory.command("show")
@click.argument("chunk_id")
@click.option(
    "--all", "whole", is_flag=True, help=f"Print the whole content (else the first {SHOW_CHARS:,} chars)."
)
@_store_options
@_json_option
def show_command(chunk_id: str, whole: bool, config_path: str | None, db: Path | None, as_json: bool) -> None:
    """Show every attribute of one memory and its lifecycle history (a long content is cut
    after 10,000 chars with a marker; --all prints it whole)."""
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
    _emit_one(chunk, as_json, history=events, whole=whole)


def _emit_hits(hits: Sequence[SearchHit], as_json: bool) -> None:
    if as_json:
        payload = [{"rank": h.rank, "score": h.score, "chunk": h.chunk.to_dict()} for h in hits]
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
    elif not hits:
        click.echo("no matches")
    else:
        headers = _headers([h.chunk for h in hits])
        rows = [[str(h.rank), f"{h.score:.4f}", *_row(h.chunk, headers != _HEADERS)] for h in hits]
        click.echo(table(("rank", "score", *headers), rows))


@memory.command("search")
@click.argument("query")
@click.option("-k", "k", type=Whole(1), default=10, show_default=True)
@click.option("--namespace", "namespaces", multiple=True, help="Scope allow-list (repeatable).")
@click.option("--include-superseded", is_flag=True, help="Also return superseded rows (audit trail).")
@click.option("--all", "include_all", is_flag=True, help="Ignore the deliverable filter.")
@_event_window_options
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
    **window: Any,
) -> None:
    """Search memories (hybrid when an embedder is configured, else full-text)."""
    filters = _event_window(window)
    query = query_text(query)
    with _open(config_path, db, write=False) as store:
        if not as_json and not getattr(store, "vectors_enabled", False):  # JSON stays JSON
            click.echo(f"note: {FULL_TEXT_ONLY}", err=True)
        hits = store.search(
            query,
            k,
            deliverable=not include_all,
            namespaces=list(namespaces) or None,
            include_superseded=include_superseded,
            **filters,
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
    config, host = load(config_path)
    text = _content(content, file, config.store.max_write_chars)
    values = _checked_source_type(_given(**attrs))
    if "occurred_at" in values:  # checked before the store is opened, like the text
        values["occurred_at"] = parse_occurred_at(values["occurred_at"])
    with _open(config_path, db, write=True, host=host) as store:
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
@click.option("--in-days", type=DAYS, default=None, help="Expire this many days from now (1..3650).")
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


@memory.command("purge")
@click.argument("chunk_ids", metavar="ID...", nargs=-1, required=True)
@click.option(
    "--reason",
    default="purged from the command line",
    show_default=True,
    help="Why, kept in the history (for a row not invalidated yet).",
)
@_store_options
def purge_command(chunk_ids: tuple[str, ...], reason: str, config_path: str | None, db: Path | None) -> None:
    """Delete memories and their text for good (the history keeps that they were, and when). A
    row not yet invalidated is invalidated with --reason first; a superseded row, or one that
    superseded another, stays (the chain is the audit trail): expire or reject it instead."""
    wanted = list(dict.fromkeys(chunk_ids))
    with _open(config_path, db, write=True) as store:
        if "ids" not in inspect.signature(store.purge).parameters:
            raise StoreError(
                "this store's purge takes no ids (it deletes every purgeable row at once); invalidate "
                "the rows and purge from the Python API; nothing was purged"
            )
        for chunk_id in wanted:
            chunk = store.get(chunk_id)
            if chunk is None:
                raise StoreError(f"no memory with id {chunk_id!r}; nothing was purged")
            if chunk.is_superseded:
                raise StoreError(
                    f"memory {chunk_id} is superseded by {chunk.superseded_by}: it stays for the audit "
                    "trail; nothing was purged"
                )
            if _superseded_another(store, chunk_id):
                raise StoreError(
                    f"memory {chunk_id} superseded another row: it stays for the audit trail (the chain "
                    "must stay readable); expire or reject it instead; nothing was purged"
                )
        for chunk_id in wanted:
            chunk = store.get(chunk_id)
            if chunk is not None and chunk.invalidated_at is None and not chunk.is_expired():
                store.invalidate_chunk(chunk_id, reason=reason, by=curator())
        store.purge(ids=wanted)
        kept = [i for i in wanted if store.get(i) is not None]
    gone = [i for i in wanted if i not in kept]
    if kept:
        raise StoreError(
            f"memory {', '.join(kept)} superseded another row, so it stays (the chain is the audit trail); "
            f"it is invalidated and no longer delivered; purged: {', '.join(gone) or 'none'}"
        )
    click.echo(f"purged {', '.join(gone)}")


def _superseded_another(store: Any, chunk_id: str) -> bool:
    """Whether the row's history says it replaced another (a store without history: False,
    and its purge still keeps such a row)."""
    if not isinstance(store, MemoryHistory):
        return False
    return any("supersedes" in e.detail or "superseded" in e.detail for e in store.history(chunk_id))


@memory.command("export")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file (default: standard output).",
)
@_store_options
def export_command(output: Path | None, config_path: str | None, db: Path | None) -> None:
    """Every memory as JSON Lines: a header line saying what an import keeps (every attribute,
    ids and times included, on a store that restores exactly; new ids and times with
    `import --new-ids`) and that history starts at the import, then one row per line with every
    attribute. `contextplane memory import` reads it into any store."""
    with _open(config_path, db, write=False) as store:
        lines = list(jsonl.export_lines(store))
    text = "".join(line + "\n" for line in lines)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"--output {output}: cannot write it ({exc.strerror})") from None
    click.echo(f"exported {len(lines) - 1} memories to {output}", err=True)


@memory.command("import")
@click.argument("source", metavar="FILE")
@click.option(
    "--new-ids",
    is_flag=True,
    help="Let the store assign new ids and times (created_at, updated_at, invalidated_at) and re-link "
    "supersessions to them: for merging into a store that already holds memories.",
)
@_store_options
@_json_option
def import_command(
    source: str, new_ids: bool, config_path: str | None, db: Path | None, as_json: bool
) -> None:
    """Write the memories of an export (FILE, or '-' for standard input) into the store, each
    line one row, exactly as exported: ids, times, supersession links and review state kept (an
    id the store already holds is refused, nothing imported). A store that cannot restore exactly,
    or --new-ids, gets new ids and times, printed old -> new. History starts at the import. Every
    line is checked first; consolidation is off. Creates the store if there is none."""
    if source == "-":
        raw, where = sys.stdin.buffer.read(), "standard input"
    else:
        raw, where = _read_bytes(Path(source)), source
    rows = jsonl.parse_lines(_decode(raw, where).splitlines(), where)  # all checked before a write
    config, _host = load(config_path)
    # One row per line: consolidation would merge what the export kept apart on purpose.
    verbatim = attrs_evolve(config, store=attrs_evolve(config.store, deduplicate=False, auto_supersede=False))
    host = PluginHost.from_entry_points(verbatim)
    with command_backend(config_path, db, write=True, create=True, host=host) as (_c, _h, backend):
        store = backend.memories
        if not new_ids and not isinstance(store, ExactRestore):
            shown = getattr(store, "name", None) or type(store).__name__
            click.echo(
                f"notice: {shown} cannot restore exactly (it has no restore_chunks), so it assigns new ids "
                "and times; supersessions are re-linked to them",
                err=True,
            )
        result = jsonl.import_rows(store, rows, by=curator(), new_ids=new_ids)
    if as_json:
        report = {"imported": len(result.ids), "exact": result.exact, "ids": dict(result.ids)}
        click.echo(json.dumps(report, indent=2))
        return
    if result.exact:
        click.echo(
            f"imported {len(result.ids)} memories exactly: ids, times and state as exported "
            "(history starts at the import)"
        )
        return
    click.echo(f"imported {len(result.ids)} memories with new ids (history starts at the import)")
    for old, new in result.ids.items():
        click.echo(f"  {old} -> {new}")


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
        if not server and not command_store_path(config, db).exists():
            raise connection.no_store(command_store_path(config, db))  # the path first: a typo
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
    "--batch-rows", type=Whole(1), default=migrate.DEFAULT_BATCH_ROWS, show_default=True
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
