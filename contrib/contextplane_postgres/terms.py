"""The PostgreSQL full-text leg's term plan: which words of a query it scores, and what each is worth.

Why the embedded store's plan (``contextplane.store.query_terms``) and not ``ts_rank``: the
retrieved section injects no row whose relevance is under ``context.min_relevance``, and
relevance must mean the same on every store, or an off-corpus question injects its nearest
noise here and nothing on SQLite, and a turn copied from one store replays differently on the
other. So the words, the stop words, the "too common to inform" share and the IDF formula are
core's (``meaningful_words``, ``MAX_DOC_SHARE``, ``MIN_DOC_CAP``, ``fts5_idf``), and only the
counting is PostgreSQL's: each term's document frequency is a count on the GIN index, bounded
at the frequency cap (``LIMIT cap + 1``: a term past it is "too common" and its count stops
there), and the row count is ``count(*)`` of the memory table.

Both are cached per *corpus version*: the newest history event the reading snapshot sees (every
write that adds or removes a row appends one, numbered in commit order), plus, for an as-of
view, the rows purged since (the overlay cannot show their text, so its corpus is smaller).
The counts run on the read's own connection, inside its snapshot (a consistent view, an as-of
view, or the search's own read-only transaction), so a plan is a pure function of the corpus
the read sees and a replayed turn scores exactly as it did.

A row's lexical relevance is then the IDF share of the scored terms it contains: the sum of
the IDFs of its matched terms over the *ideal* (the sum over every term the store knows, as in
``query_terms``), capped at 1. It carries no term-frequency or length factor (BM25's), so it
is the embedded store's figure for a row of average length that holds each matched term once.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from typing import Any, Final

import attrs
import psycopg

from contextplane.store.query_terms import MAX_DOC_SHARE, MIN_DOC_CAP, fts5_idf, meaningful_words
from contextplane_postgres.schema import TS_CONFIG

#: Corpus versions whose counts are kept at once (the present and a few as-of views).
_VERSIONS_KEPT: Final[int] = 4
_CACHE_LIMIT: Final[int] = 50_000


def tsquery_term(term: str) -> str:
    """``to_tsquery`` input for one ``fts_terms`` term (``"word"`` or ``"word"*``). The words
    hold only letters and digits, so the single quotes around them cannot be escaped out of."""
    word = term.rstrip("*").strip('"')
    return f"'{word}'" + (":*" if term.endswith("*") else "")


@attrs.frozen
class TermPlan:
    """What the full-text leg runs: the scored terms (``to_tsquery`` input each), the weight of
    each (its IDF over the ideal), and an upper bound on the rows they match."""

    terms: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    postings: int = 0

    @property
    def query(self) -> str | None:
        """The OR of the scored terms (None: no full-text leg)."""
        return " | ".join(self.terms) if self.terms else None


class PgTermStats:
    """Bounded document frequencies of query terms and the row count, cached per corpus version
    (thread-safe; one per store)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: corpus version -> (row count, term -> bounded document frequency), oldest first.
        self._versions: dict[Hashable, tuple[int, dict[str, int]]] = {}

    def plan(self, conn: psycopg.Connection[Any], text: str, version: Hashable) -> TermPlan:
        """The scored terms of ``text`` and their weights, on the corpus ``conn`` reads, which
        ``version`` names (the caller reads it in the same snapshot)."""
        words = meaningful_words(text)
        if not words:
            return TermPlan()
        terms = list(dict.fromkeys(tsquery_term(w) for w in words))
        total, frequencies = self._frequencies(conn, terms, version)
        cap = max(MIN_DOC_CAP, int(total * MAX_DOC_SHARE))
        present = [t for t in terms if frequencies[t] > 0]
        ideal = sum(fts5_idf(total, frequencies[t]) for t in present)
        kept = [t for t in present if frequencies[t] <= cap]
        if not kept and present:
            # only common words matched: keep the rarest, and never call its rows a full answer
            kept = [min(present, key=lambda t: frequencies[t])]
            ideal = max(ideal, fts5_idf(total, cap))
        ideal = max(ideal, 1e-6)
        return TermPlan(
            tuple(kept),
            tuple(fts5_idf(total, frequencies[t]) / ideal for t in kept),
            sum(frequencies[t] for t in kept),
        )

    def rows(self, conn: psycopg.Connection[Any], version: Hashable) -> int:
        """The corpus's row count (cached with the frequencies, per version)."""
        with self._lock:
            entry = self._versions.get(version)
        return entry[0] if entry is not None else self._frequencies(conn, [], version)[0]

    def _frequencies(
        self, conn: psycopg.Connection[Any], terms: Sequence[str], version: Hashable
    ) -> tuple[int, dict[str, int]]:
        with self._lock:
            entry = self._versions.get(version)
        if entry is None:
            row = conn.execute("SELECT count(*) FROM chunks").fetchone()
            total, known = (int(row[0]) if row else 0), {}
        else:
            total, known = entry[0], {t: entry[1][t] for t in terms if t in entry[1]}
        missing = [t for t in terms if t not in known]
        if missing:
            cap = max(MIN_DOC_CAP, int(total * MAX_DOC_SHARE))
            # one statement, one round trip: a bounded count per term on the GIN index
            counts = ", ".join(
                f"(SELECT count(*) FROM (SELECT 1 FROM chunks WHERE tsv @@ to_tsquery('{TS_CONFIG}', %s) "
                "LIMIT %s) AS t)"
                for _ in missing
            )
            args: list[Any] = []
            for term in missing:
                args.extend((term, cap + 1))
            found = conn.execute(f"SELECT {counts}", args).fetchone()
            assert found is not None
            known.update({t: int(n) for t, n in zip(missing, found, strict=True)})
        with self._lock:
            cached = self._versions.pop(version, None)
            stored = {} if cached is None or len(cached[1]) > _CACHE_LIMIT else cached[1]
            stored.update(known)
            self._versions[version] = (total, stored)  # newest last
            while len(self._versions) > _VERSIONS_KEPT:
                del self._versions[next(iter(self._versions))]
        return total, known
