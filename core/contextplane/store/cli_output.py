"""How memories print: a table (one row per memory, the content cut to a line) or JSON with
``--json``, one memory with its history, and search hits with rank and score.

Why one place: ``list``, ``search``, ``show`` and every writing command print memories; the
columns (an ``occurred`` column only when a row has an event time) and the cut of a long
content must read the same in each.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from contextplane.memory.consolidation import WriteOutcome
from contextplane.memory.history import HistoryEvent, lifecycle_state
from contextplane.memory.model import (
    MemoryChunk,
    format_timestamp,
    utc_now,
)
from contextplane.store.protocol import SearchHit
from contextplane.textui import table

_CONTENT_WIDTH = 60


def _short(text: str, width: int = _CONTENT_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _status(chunk: MemoryChunk) -> str:
    """The row's lifecycle state now (active, pending, rejected, superseded, expired,
    invalidated); a superseded row names its successor."""
    state = lifecycle_state(chunk, utc_now())
    return f"superseded→{chunk.superseded_by}" if state == "superseded" else state


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


#: ``memory show`` prints at most this many chars of a memory's content without ``--all``.
SHOW_CHARS = 10_000
SHOW_MARKER = "[… cut: {n:,} more chars; --all prints the whole memory]"


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
