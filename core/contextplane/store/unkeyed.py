"""Exact duplicates among the rows that have no content key yet.

A migrated store's rows get their content key (``content_hash``) after the migration, in
batches (``migrate.migrate_content_hashes``). Until that pass is done a write's exact duplicate
must still be found among them, or it would be stored twice; the key's index cannot find a row
without a key, so the full-text index does. An exact duplicate (the same text once runs of
whitespace are collapsed, ``consolidation.normalise_content``) holds the write's tokens in the
same order, so the phrase of its first ``PHRASE_TOKENS`` tokens, in the content column, matches
it. The phrase is made of the spans the index's own tokenizer finds in the write's text (apsw's
``fts5_tokenizer``), each cut from the text as it stands, so FTS5 tokenizes the query as it
tokenized the row (stemmed or not). Every match of the write's scope and provenance that is
deliverable and unkeyed is keyed here and compared like a keyed row. A text with no token at
all (only punctuation and spaces) cannot be found that way: every unkeyed row of its scope and
provenance that holds its longest piece is compared (a scan: 0.15 s at a million rows). Both
cost more than one key probe (a phrase of common words only, several milliseconds at a million
rows; a usual one, well under one), and only until the pass is done.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, cast

import apsw

from contextplane.memory.consolidation import content_hash, normalise_content
from contextplane.store import history

#: Tokens of the write the phrase holds: enough to make a match rare, few enough to stay cheap.
PHRASE_TOKENS: Final[int] = 32
#: A lookup here costs about what keying this many rows does (0.1 ms against 4 us a row at a
#: million rows, ``bench/history_bench.py``): a bulk write with more rows than the unkeyed
#: rows divided by it keys the store first (``writes._key_before_bulk``).
LOOKUP_COST_IN_KEYS: Final[int] = 25

#: (content key, namespace, source_type, occurred_at): what a duplicate must share with the write.
DedupeKey = tuple[int | None, str, str, str | None]

_BY_PHRASE: Final[str] = (
    "SELECT c.id, c.content FROM chunks_fts JOIN chunks AS c ON c.id = chunks_fts.rowid "
    "WHERE chunks_fts MATCH ? AND c.content_hash IS NULL AND c.namespace = ? AND c.source_type = ? "
    "AND c.occurred_at IS ? AND "
)
_BY_SCAN: Final[str] = (
    "SELECT c.id, c.content FROM chunks AS c "
    "WHERE c.content_hash IS NULL AND c.namespace = ? AND c.source_type = ? AND c.occurred_at IS ? AND "
)


def _tokenizer(conn: apsw.Connection) -> apsw.FTS5Tokenizer:
    """The full-text index's own tokenizer (``tokenize='porter unicode61 ...'``)."""
    spec = history.fts_tokenizer(conn)
    if spec[:1] in ("'", '"'):
        spec = spec[1:-1].replace(spec[0] * 2, spec[0])
    name, *args = re.split(r"\s+", spec.strip())
    return conn.fts5_tokenizer(name, args)


def phrase(tokenizer: apsw.FTS5Tokenizer, text: str) -> str | None:
    """The MATCH expression of ``text``'s first tokens as a phrase in the content column, or
    None when the tokenizer finds no token in it. A span holds no separator, so no quote."""
    data = text.encode("utf-8")
    spans = cast(
        list[tuple[int, int, str]],
        tokenizer(data, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=True, include_colocated=False),
    )
    if not spans:
        return None
    words = [data[start:end].decode("utf-8") for start, end, *_ in spans[:PHRASE_TOKENS]]
    return 'content : "' + " ".join(words) + '"'


def duplicates(
    conn: apsw.Connection, writes: Iterable[tuple[DedupeKey, str]], deliverable: str, now_text: str
) -> dict[DedupeKey, list[tuple[str, str]]]:
    """For each (dedupe key, text) written, the deliverable unkeyed rows with that key:
    key -> [(text, id)], oldest first. ``deliverable``: the D6 filter on ``chunks AS c`` with
    one parameter, the time of the write."""
    tokenizer = _tokenizer(conn)
    found: dict[DedupeKey, set[tuple[str, str]]] = {}
    looked: set[tuple[DedupeKey, str]] = set()
    for key, text in writes:
        normal = normalise_content(text)
        if key[0] is None or (key, normal) in looked:
            continue
        looked.add((key, normal))
        expression = phrase(tokenizer, normal)
        if expression is None:
            # Every piece of the text between spaces is in a duplicate as it stands: the
            # longest, found by SQLite itself, spares keying each row of the scope in Python.
            piece = max(normal.split(" "), key=len)
            scan = _BY_SCAN + deliverable + " AND instr(c.content, ?) > 0"
            rows = conn.execute(scan, (key[1], key[2], key[3], now_text, piece))
        else:
            rows = conn.execute(_BY_PHRASE + deliverable, (expression, key[1], key[2], key[3], now_text))
        for chunk_id, content in rows:
            if content_hash(content) == key[0]:
                found.setdefault(key, set()).add((str(content), str(chunk_id)))
    return {key: sorted(rows, key=lambda pair: int(pair[1])) for key, rows in found.items()}
