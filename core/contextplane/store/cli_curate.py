"""The commands that curate memories: ``add``, ``supersede``, ``confirm``, ``reject``, ``expire``
and ``purge``, each recorded in the history as done by the operator at the command line.

Why a group: each writes, names its curator (``cli:<login>``) and keeps the audit trail intact
(a supersession chain is never purged); the review commands share one body.
"""

from __future__ import annotations

import getpass
import inspect
from pathlib import Path
from typing import Any

import click

from contextplane.errors import StoreError, ValidationError
from contextplane.memory.consolidation import WriteOutcome
from contextplane.memory.model import (
    utc_now,
)
from contextplane.memory.stamps import resolve_expiry
from contextplane.store.cli_options import (
    DAYS,
    _json_option,
    _open,
    _store_options,
    _text_write_options,
    _write_input,
)
from contextplane.store.cli_output import _emit_one
from contextplane.store.protocol import MemoryHistory


def curator() -> str:
    """Who a review made from the command line is recorded as: ``cli:<login name>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        user = "unknown"
    return f"cli:{user}"


@click.command("add")
@_text_write_options
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
    host, text, values = _write_input(config_path, content, file, attrs)
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


def _review(chunk_id: str, state: str, config_path: str | None, db: Path | None, as_json: bool) -> None:
    with _open(config_path, db, write=True) as store:
        chunk = store.set_review_state(chunk_id, state, by=curator())
    if as_json:
        _emit_one(chunk, as_json)
    else:
        click.echo(f"{chunk.id}: {chunk.review_state}")


def _review_command(name: str, state: str, help_text: str) -> click.Command:
    """The command that sets one review state. ``confirm`` and ``reject`` differ only in the
    state and their help, so both are made here: one set of arguments and options to keep."""

    @click.command(name, help=help_text)
    @click.argument("chunk_id")
    @_store_options
    @_json_option
    def review_command(chunk_id: str, config_path: str | None, db: Path | None, as_json: bool) -> None:
        _review(chunk_id, state, config_path, db, as_json)

    return review_command


confirm_command = _review_command("confirm", "confirmed", "Mark a memory confirmed by the operator.")
reject_command = _review_command(
    "reject", "rejected", "Mark a memory rejected: it is kept but never delivered."
)


@click.command("supersede")
@click.argument("old_id")
@_text_write_options
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
    host, text, values = _write_input(config_path, content, file, attrs)
    with _open(config_path, db, write=True, host=host) as store:
        new_id = store.supersede(old_id, text, **values)
        chunk = store.get(new_id)
        assert chunk is not None
    if as_json:
        _emit_one(chunk, as_json)
    else:
        click.echo(f"{old_id} superseded by {new_id}")


@click.command("expire")
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


@click.command("purge")
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
