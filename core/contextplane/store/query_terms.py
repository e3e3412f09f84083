"""Which words of a natural-language query the full-text leg scores, and how much each is worth.

Why: a runtime sends the user's whole turn ("remind me what we said about the deploy window
for checkout"). OR-ing every word makes BM25 rank every row that contains "the" or "me": at
100k rows a 12-word question matched 72,671 rows, took 44 ms, and an off-corpus question
still injected memories matched on "to" and "me". So the leg scores only *meaningful* terms:

- English function words (``STOP_WORDS``) never take part;
- a term found in more than ``MAX_DOC_SHARE`` of the rows carries almost no information
  (BM25's IDF is near zero) but costs a scan of its whole posting list, so it is left out of
  the MATCH expression, unless no other term remains (then the rarest one is kept).

Each term's document frequency is counted once, bounded (never more postings than the
frequency cap), and cached per *corpus version*: the store's history position (every write
that adds or removes an indexed row appends a history event), or, for an as-of view with its
own full-text index, the position it shows. So the plan is a pure function of the corpus the
read sees, and a replayed turn scores exactly as it did (an approximate cache, e.g. "until
the row count moves by a tenth", made a replay against the as-of view keep or drop a row the
turn had not).

The *ideal* score is what a row matching every meaningful term the store knows would score
(the sum of their IDFs, with FTS5's own formula); ``-bm25 / ideal`` is then the IDF-weighted
share of the query a row matches, a relevance in [0, 1] that means the same at 1k and 1M rows,
which is what the relevance floor (``context.min_relevance``) compares against.

Terms no row contains count only in part: conversational questions carry words no memory has
("continue the goal: finish the canary"), and counting them in full would push every answer
below the floor; but left out entirely, a question about things the store has never heard of
was answered in full by any row sharing its one known word ("Which capacitor and resistor go on
the transistor voltage divider?" matched "Congrats! How did it go?" at relevance 1.0 through
"go"). So the ideal is never less than ``UNSEEN_SHARE`` of what a row matching every word of the
question would score, each unseen word weighing as much as the known ones do on average (not as
the rarest word could: in a small store whose every row holds the known words, their weight is
near zero and any unseen word would outweigh a full match). The share is a trade measured in
one run each: on LoCoMo's data (bench/locomo_bench.py) its 20 hand-written off-corpus questions
reach the 0.3 floor 9 times with no share, 8 at 0.6, 4 at 0.7, 2 at 0.8; but on the scale
bench's questions (bench/scale_data.py, 20k rows over 20 scopes) the best match of 1 in 200
falls under the floor with no share or 0.6, 3 at 0.7 and 6 at 0.8 (their words come inflected
where the rows' do not, so a word the question shares reads as unseen). 0.6 keeps the scale
bench's relevance where it was.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable, Sequence
from typing import Any, Final

import apsw
import attrs

from contextplane.store.fts_query import MAX_TERMS, fts_terms

#: Corpus versions whose frequencies are kept at once (the present and a few as-of views).
_VERSIONS_KEPT: Final[int] = 4
#: Terms in more than this share of rows are not scored (see the module docstring), once the
#: share is worth skipping: a posting list of ``MIN_DOC_CAP`` rows costs well under a millisecond.
MAX_DOC_SHARE: Final[float] = 0.1
MIN_DOC_CAP: Final[int] = 1_000
#: The least share of the whole question's weight (unseen words included) the ideal stands for.
UNSEEN_SHARE: Final[float] = 0.6
_CACHE_LIMIT: Final[int] = 50_000

#: English function words: pronouns, articles, auxiliaries, prepositions, conjunctions and the
#: question words and fillers of conversational requests. Deliberately no content words.
STOP_WORDS: Final[frozenset[str]] = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just let ll me mightn more
    most mustn my myself needn no nor not now of off on once only or other ought our ours
    ourselves out over own re s same shan she should shouldn so some such t than that the their
    theirs them themselves then there these they this those through to too under until up ve
    very was wasn we were weren what when where which while who whom why will with won would
    wouldn you your yours yourself yourselves d m o y also still yet ever even much many
    please tell remind say said ask asked again thing things something anything get got
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def meaningful_words(text: str) -> list[str]:
    """The query's quoted FTS5 terms without function words (order kept, deduplicated)."""
    return [t for t in fts_terms(text) if t.strip('"*') not in STOP_WORDS][:MAX_TERMS]


def fts5_idf(total: int, df: int) -> float:
    """FTS5's BM25 IDF (``fts5_bm25.c``): log((N - n + 0.5) / (n + 0.5)), floored at 1e-6."""
    value = math.log((total - df + 0.5) / (df + 0.5)) if total > 0 else 0.0
    return max(value, 1e-6)


@attrs.frozen
class FtsPlan:
    """What the full-text leg runs: the MATCH expression (None: no leg), the ideal score, and
    an upper bound on the rows the expression matches (the sum of its terms' frequencies)."""

    expression: str | None
    ideal: float
    postings: int = 0


def _varint(blob: bytes) -> int:
    """SQLite's varint (FTS5's record format): 7 bits a byte, big-endian, the 9th byte whole."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value


def indexed_rows(conn: apsw.Connection, table: str = "chunks_fts") -> int:
    """Rows in the full-text index, read from FTS5's own averages record (O(1))."""
    row: Any = conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    return _varint(bytes(row[0])) if row is not None and row[0] else 0


def corpus_version(conn: apsw.Connection) -> Hashable:
    """The present corpus's version on ``conn``: the last history position (``chunk_log``
    seq), or, for a store without a history (older schema, read-only), its indexed row count
    and the full-text index's structure record (which changes on every write to the index)."""
    try:
        row: Any = conn.execute("SELECT max(seq) FROM main.chunk_log").fetchone()
        return ("history", row[0])
    except apsw.SQLError:
        block: Any = conn.execute("SELECT block FROM chunks_fts_data WHERE id = 10").fetchone()
        return ("structure", indexed_rows(conn), bytes(block[0]) if block and block[0] else b"")


class TermStats:
    """Bounded document frequencies of query terms, cached per corpus version (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: corpus version -> term -> bounded document frequency, oldest version first.
        self._versions: dict[Hashable, dict[str, int]] = {}

    @property
    def _df(self) -> dict[str, int]:
        """The newest version's frequencies (for tests and diagnostics)."""
        with self._lock:
            return dict(next(reversed(self._versions.values()), {}))

    def plan(self, conn: apsw.Connection, text: str, version: Hashable | None = None) -> FtsPlan:
        """The MATCH expression of the meaningful, informative terms of ``text`` and its ideal.
        ``version`` names the corpus ``conn`` reads (``corpus_version`` when None)."""
        terms = meaningful_words(text)
        if not terms:
            return FtsPlan(None, 0.0)
        total = indexed_rows(conn)
        cap = max(MIN_DOC_CAP, int(total * MAX_DOC_SHARE))
        key = (corpus_version(conn) if version is None else version, total)
        frequencies = self._frequencies(conn, terms, key, cap)
        present = [t for t in terms if frequencies[t] > 0]
        ideal = sum(fts5_idf(total, frequencies[t]) for t in present)
        unseen = len(terms) - len(present)
        if unseen and present:
            # never less than a share of what matching the whole question would score, each word
            # no row holds weighing as much as the known ones do on average (module docstring)
            ideal = max(ideal, UNSEEN_SHARE * ideal * len(terms) / len(present))
        kept = [t for t in present if frequencies[t] <= cap]
        if not kept and present:
            # only common words matched: keep the rarest, and never call its rows a full answer
            kept = [min(present, key=lambda t: frequencies[t])]
            ideal = max(ideal, fts5_idf(total, cap))
        postings = sum(frequencies[t] for t in kept)
        return FtsPlan(" OR ".join(kept) if kept else None, ideal, postings)

    def _frequencies(
        self, conn: apsw.Connection, terms: Sequence[str], key: Hashable, cap: int
    ) -> dict[str, int]:
        with self._lock:
            cached = self._versions.get(key, {})
            known = {t: cached[t] for t in terms if t in cached}
        for term in terms:
            if term not in known:
                # Bounded: a term past the cap is "too common" and its count stops there.
                row: Any = conn.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)",
                    (term, cap + 1),
                ).fetchone()
                known[term] = int(row[0])
        with self._lock:
            entry = self._versions.pop(key, None)
            if entry is None or len(entry) > _CACHE_LIMIT:
                entry = {}
            entry.update(known)
            self._versions[key] = entry  # newest last
            while len(self._versions) > _VERSIONS_KEPT:
                del self._versions[next(iter(self._versions))]
        return known
