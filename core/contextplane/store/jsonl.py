"""``contextplane memory export`` / ``import``: memories as JSON Lines, through the store
protocols only, so they move between any two backends.

Why the protocols and not the tables: an export from the embedded file must import into
PostgreSQL or a plugin's store, and back. What an import keeps, said in the export's first line
(the header) so nobody has to guess:

- **Every attribute of a row is carried**: the fields of ``MemoryChunk`` (``CARRIED``, read
  from the model itself, so an attribute added to it is exported with no change here).
- **Exact import (the default)**: into a store that offers ``restore_chunks`` (the optional
  ``ExactRestore`` protocol: the embedded, PostgreSQL and in-memory stores do), every attribute
  is kept as exported: ids (so ``superseded_by:<id>`` links and recorded turns still name the
  same rows), ``created_at``, ``updated_at``, ``invalidated_at``, ``occurred_at``. Export, import
  into an empty store and export again gives the same lines. An id the store already holds is
  refused by name and nothing is imported (``contextplane.store.restore``); the embedded store
  also refuses an id below one it has handed out (its as-of reads need ids in arrival order).
- **New ids** (``--new-ids``, or a store without ``restore_chunks``, which the command says in
  one line): rows go through the public write API, so the store gives each row a new id and its
  ``created_at``, ``updated_at`` and ``invalidated_at`` are the import's time
  (``ASSIGNED_AT_IMPORT``); a supersession is re-linked to the successor's new id and the import
  reports the old id -> new id map. For merging into a store that already holds memories.
- **History starts at the import** either way: a row's lifecycle history is not exported. An
  exactly imported row has one ``created`` event at the import saying it was restored, with its
  state as exported; a row imported with a new id has its ``created`` event, then its review,
  expiry and invalidation as imported.

Why exact is the default and new ids a flag: an export is a backup, or a move to another
backend; whoever imports it into an empty store expects the same memories back, and an id is
what supersession links, recorded turns (``explain``, ``replay``) and the injection log name.
The one case exactness cannot serve, merging into a store that holds the same ids, is refused
with a line naming the id and ``--new-ids``, so the default loses nothing and hides nothing.

Consolidation must be off while importing with new ids (an exported store may hold duplicates
and superseded rows on purpose; ``contextplane memory import`` opens the store with
``deduplicate`` and ``auto_supersede`` off): each line becomes one row. An exact restore never
consolidates.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs

from contextplane.errors import ValidationError
from contextplane.memory.model import SUPERSEDED_PREFIX, MemoryChunk, format_timestamp
from contextplane.store.protocol import ExactRestore

#: The format's version, in the header's ``contextplane_export`` key.
EXPORT_FORMAT: Final[int] = 1
#: Every attribute a row has: the model's own field list (the one place an attribute is added).
CARRIED: Final[tuple[str, ...]] = tuple(f.name for f in attrs.fields(MemoryChunk))
#: What the importing store assigns itself on an import with new ids (an exact one keeps all).
ASSIGNED_AT_IMPORT: Final[tuple[str, ...]] = ("id", "created_at", "updated_at", "invalidated_at")
#: What the import sets by ``invalidate_chunk`` after every row is written (a supersession
#: needs its successor's new id).
SET_AFTER: Final[tuple[str, ...]] = ("invalidation_reason",)
#: What the import passes to ``add_chunks``: everything else.
WRITTEN: Final[tuple[str, ...]] = tuple(n for n in CARRIED if n not in ASSIGNED_AT_IMPORT + SET_AFTER)
#: Rows read per ``list_chunks`` call while exporting (memory stays bounded on a large store).
PAGE_ROWS: Final[int] = 1000

IMPORT_NOTE: Final[str] = (
    "`contextplane memory import` keeps every attribute, ids and times included, on a store that "
    "restores exactly (the embedded, PostgreSQL and in-memory stores; an id the store already holds "
    "is refused); with --new-ids, or into a store without exact restore, the store assigns "
    "new_id_import_assigns anew"
)
HISTORY_NOTE: Final[str] = (
    "not carried: an imported row's lifecycle history starts at its import (exact: one 'created' "
    "event saying it was restored, with its state as exported; new ids: created, then its review, "
    "expiry and invalidation as imported)"
)


def header(rows: int) -> dict[str, Any]:
    return {
        "contextplane_export": EXPORT_FORMAT,
        "rows": rows,
        "attributes": list(CARRIED),
        "import": IMPORT_NOTE,
        "exact_import_keeps": list(CARRIED),
        "new_id_import_assigns": list(ASSIGNED_AT_IMPORT),
        "history": HISTORY_NOTE,
    }


def row_json(chunk: MemoryChunk) -> dict[str, Any]:
    """One row's attributes (``CARRIED``), timestamps as ISO text."""
    out: dict[str, Any] = {}
    for name in CARRIED:
        value = getattr(chunk, name)
        out[name] = format_timestamp(value) if isinstance(value, datetime) else value
    return out


def export_lines(store: Any) -> Iterator[str]:
    """The header, then one line per row, oldest first (read a page at a time)."""
    chunks: list[MemoryChunk] = []
    offset = 0
    while True:
        page = store.list_chunks(limit=PAGE_ROWS, offset=offset)
        chunks.extend(page)
        if len(page) < PAGE_ROWS:
            break
        offset += len(page)
    yield json.dumps(header(len(chunks)), ensure_ascii=False)
    for chunk in chunks:
        yield json.dumps(row_json(chunk), ensure_ascii=False)


@attrs.frozen
class Imported:
    """What an import wrote: exported id -> stored id, in the file's order (the same id on an
    exact import), and whether it was exact."""

    ids: Mapping[str, str]
    exact: bool = False


def parse_lines(lines: Iterable[str], where: str = "the export") -> list[dict[str, Any]]:
    """The rows of an export, checked before anything is written: a bad line is named and
    nothing is imported."""
    rows: list[dict[str, Any]] = []
    seen_header = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"{where} line {number}: not JSON ({exc.msg}); nothing was imported"
            ) from None
        if not isinstance(data, dict):
            raise ValidationError(f"{where} line {number}: expected a JSON object; nothing was imported")
        if "contextplane_export" in data:
            if data["contextplane_export"] != EXPORT_FORMAT:
                raise ValidationError(
                    f"{where} line {number}: export format {data['contextplane_export']!r}, this "
                    f"contextplane reads format {EXPORT_FORMAT}; nothing was imported"
                )
            seen_header = True
            continue
        unknown = sorted(set(data) - set(CARRIED))
        if unknown:
            raise ValidationError(
                f"{where} line {number}: unknown attribute {unknown[0]!r} (a memory has: "
                f"{', '.join(CARRIED)}); nothing was imported"
            )
        if not isinstance(data.get("content"), str):
            raise ValidationError(f"{where} line {number}: 'content' is missing; nothing was imported")
        rows.append(data)
    if rows and not seen_header:
        raise ValidationError(
            f"{where}: no export header (a first line with 'contextplane_export'); is it an export of "
            "`contextplane memory export`? nothing was imported"
        )
    return rows


def import_lines(
    store: Any, lines: Iterable[str], *, where: str = "the export", by: str = "", new_ids: bool = False
) -> Imported:
    """Write every row of an export into ``store`` (see the module docstring: exact when the
    store can restore and ``new_ids`` is false); every line is checked before the first write."""
    return import_rows(store, parse_lines(lines, where), by=by, new_ids=new_ids)


def import_rows(
    store: Any, rows: Sequence[Mapping[str, Any]], *, by: str = "", new_ids: bool = False
) -> Imported:
    """Write rows read by ``parse_lines`` into ``store``: restored exactly when it offers
    ``restore_chunks`` (and ``new_ids`` is false), else through its write API."""
    if not new_ids and isinstance(store, ExactRestore):
        try:
            kept = store.restore_chunks(rows, by=by)
        except ValidationError as exc:
            if "--new-ids" in str(exc):
                raise
            raise ValidationError(
                f"{exc} (to have the store assign ids and times instead, import with --new-ids)"
            ) from None
        return Imported({str(row["id"]): str(i) for row, i in zip(rows, kept, strict=True)}, exact=True)
    written = [{k: row[k] for k in WRITTEN if row.get(k) is not None} for row in rows]
    stored = [str(i) for i in store.add_chunks(written)] if written else []
    ids = {str(row.get("id", n)): new for n, (row, new) in enumerate(zip(rows, stored, strict=True))}
    for row, new in zip(rows, stored, strict=True):
        reason = row.get("invalidation_reason")
        if not reason:
            continue
        if reason.startswith(SUPERSEDED_PREFIX):
            successor = ids.get(reason[len(SUPERSEDED_PREFIX) :])
            if successor is not None:
                store.invalidate_chunk(new, superseded_by=successor, by=by)
                continue
        store.invalidate_chunk(new, reason=reason, by=by)
    return Imported(ids)
