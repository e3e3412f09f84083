"""What PostgreSQL cannot hold as it is, and how memory rows come back as ``MemoryChunk`` values.

PostgreSQL ``text`` cannot contain NUL (U+0000), which the embedded store keeps (the store
kit's round trip writes one). Every text cell goes through ``enc`` / ``dec``: NUL becomes
U+E000 followed by ``0`` and U+E000 itself becomes U+E000 twice, a reversible escape that
leaves every other character, and so full-text indexing, untouched. Text without either
character (nearly all) is passed through after two substring checks.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final

from contextplane.store.row_codec import READ_ORDER, compile_reader

ESC: Final[str] = "\ue000"
_DECODE: Final[re.Pattern[str]] = re.compile(f"{ESC}(.)", re.S)


def enc(text: str) -> str:
    if "\x00" not in text and ESC not in text:
        return text
    return text.replace(ESC, ESC + ESC).replace("\x00", ESC + "0")


def dec(text: str) -> str:
    if ESC not in text:
        return text
    return _DECODE.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), text)


def enc_opt(text: str | None) -> str | None:
    return None if text is None else enc(text)


#: Every character Python's ``str.split()`` splits on (``str.isspace``), as a regular
#: expression class of PostgreSQL's (``\uXXXX`` escapes, standard-conforming strings).
_WHITESPACE: Final[str] = (
    r"[\t\n\v\f\r \u001c-\u001f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
)


def content_key(expr: str) -> str:
    """SQL for the key exact duplicates are looked up by: md5 of the text without any
    whitespace. Two texts equal after ``consolidation.normalise_content`` (whitespace runs
    collapsed) always share it, so an index on it finds every duplicate; rows sharing a key
    are then compared by their normalised text. An expression, not a stored column: a store
    upgraded to it rewrites no row (a rewrite re-inserts every row into the HNSW index)."""
    return f"md5(regexp_replace({expr}, '{_WHITESPACE}', '', 'g'))"


#: The select list's names, for ``... FROM chunks AS c``: the shared row codec's read order.
COLUMNS: Final[tuple[str, ...]] = READ_ORDER
SELECT_COLUMNS: Final[str] = ", ".join(f"c.{name}" for name in COLUMNS)

#: Largest bigint: a longer decimal id names no row (and must not reach the server as one).
_MAX_ID: Final[int] = 2**63 - 1


def as_id(chunk_id: object) -> int | None:
    """Ids are decimal text (opaque to callers); anything else names no row."""
    if isinstance(chunk_id, bool):
        return None
    if isinstance(chunk_id, int):
        value = chunk_id
    elif isinstance(chunk_id, str) and chunk_id.strip().isdigit() and chunk_id.strip().isascii():
        value = int(chunk_id.strip())
    else:
        return None
    return value if 0 < value <= _MAX_ID else None


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


#: A chunk from the cells of ``SELECT_COLUMNS`` (a search row has its score after them), by the
#: shared row codec (``contextplane.store.row_codec``): text cells escaped (``dec``), timestamps
#: as ``timestamptz``, NULL kind, policy and review state read as the embedded store reads them.
chunk_from_row: Final = compile_reader(
    pick=f"row[:{len(COLUMNS)}]",
    decode={
        "content": "dec({})",
        "text": "dec({})",
        "reason": "None if {0} is None else dec({0})",
        "time": "_utc({})",
        "created": "{}.astimezone(UTC)",
    },
    names={"dec": dec, "_utc": _utc, "UTC": UTC},
)
