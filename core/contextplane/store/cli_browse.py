"""The read-only commands: ``memory list`` (paged, filtered), ``memory show`` (one memory and its
history) and ``memory search``.

Why a group: each opens the store read-only, so browsing never creates, migrates or changes a
store (a typo in ``--db`` must not make an empty one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from contextplane.cli_common import (
    query_text,
)
from contextplane.cli_params import Whole
from contextplane.embedding import FULL_TEXT_ONLY
from contextplane.errors import StoreError
from contextplane.memory.model import (
    DELIVERY_POLICIES,
    MEMORY_KINDS,
    REVIEW_STATES,
)
from contextplane.store.cli_options import (
    _event_window,
    _event_window_options,
    _json_option,
    _open,
    _store_options,
)
from contextplane.store.cli_output import SHOW_CHARS, _emit_chunks, _emit_hits, _emit_one
from contextplane.store.protocol import MemoryHistory


@click.command("list")
@click.option("--kind", "memory_kind", type=click.Choice(sorted(MEMORY_KINDS)), default=None)
@click.option("--review-state", type=click.Choice(sorted(REVIEW_STATES)), default=None)
@click.option("--policy", "delivery_policy", type=click.Choice(sorted(DELIVERY_POLICIES)), default=None)
@click.option("--namespace", "namespaces", multiple=True, help="Scope allow-list (repeatable).")
@click.option("--deliverable", is_flag=True, help="Only rows the delivery layer may use.")
@click.option("--limit", type=Whole(0), default=50, show_default=True, help="At most this many; 0 = all.")
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


@click.command("show")
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
                f"memory {chunk_id} was purged; its history: " + "; ".join(e.describe() for e in events)
            )
        raise StoreError(f"no memory with id {chunk_id!r}")
    _emit_one(chunk, as_json, history=events, whole=whole)


@click.command("search")
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
