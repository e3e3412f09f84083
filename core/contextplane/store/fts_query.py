"""Turn a user's raw text into an FTS5 MATCH expression that cannot be a syntax error.

FTS5 has its own query language (quotes, AND/OR/NOT/NEAR, ``*``, parentheses, column
filters with ``:``, ``^``). A user typing ``what's "NEAR(" the C++ API?`` means words, not
operators, so nothing from the input is passed through as syntax: each word becomes a quoted
string (internal quotes cannot survive, because only letters and digits are kept), and the
words are OR-ed so BM25 ranks rows by how many and how rare the matched words are. A word
ending in ``*`` keeps its prefix meaning, the one operator users type on purpose.
"""

from __future__ import annotations

import re
from typing import Final

#: Runs of characters FTS5's unicode61 tokenizer keeps (letters, digits), plus a trailing '*'.
_WORD: Final[re.Pattern[str]] = re.compile(r"[^\W_]+(\*?)")

#: Bound the expression: very long inputs would only make BM25 slower, not better.
MAX_TERMS: Final[int] = 64


def fts_terms(text: str) -> list[str]:
    """The quoted FTS5 terms for ``text`` (deduplicated, order kept)."""
    seen: set[str] = set()
    terms: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group(0).rstrip("*").lower()
        if not word:
            continue
        term = f'"{word}"' + ("*" if match.group(1) else "")
        if term not in seen:
            seen.add(term)
            terms.append(term)
        if len(terms) >= MAX_TERMS:
            break
    return terms


def to_match_expression(text: str) -> str | None:
    """A safe MATCH expression, or ``None`` when the text holds no searchable word
    (callers then skip the full-text leg instead of issuing an empty query)."""
    terms = fts_terms(text)
    return " OR ".join(terms) if terms else None
