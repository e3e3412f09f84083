"""What every store check shares: the fixtures a store author supplies and the capability
declaration (``_StoreBase``), the ADR tables written out as data (``D4_TABLE``,
``REVIEW_BY_SOURCE``), hostile query text, and small readers of a store's answers.

Why the tables are written out here and not imported from ``contextplane.memory``: the kit states
the contract, so a store that shares a bug with the reference implementation's helpers still
fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar

import pytest

from contextplane.embedding import Embedder
from contextplane.memory.model import MemoryChunk
from contextplane.store.protocol import KnowledgeStore, MemoryHistory
from contextplane.testing._base import DeclaredCapabilities, required_fixture
from contextplane.testing.requirements import STORE_CAPABILITIES, Requirement

LegacyRow = tuple[str, str, str]

#: ADR D4's migration table, as (domain, source_type) -> (memory_kind, delivery policy) where a
#: policy of None means NULL, i.e. "retrieved".
D4_TABLE: tuple[tuple[str, str, str, str | None], ...] = (
    ("hot", "", "standing", "always"),
    ("preferences", "", "profile", None),
    ("general", "conversation", "note", None),
    ("general", "ingest", "reference", None),
    ("finding", "", "fact", None),
    ("fact", "", "fact", None),
    ("conversation", "", "note", None),
    ("some_custom_domain", "", "legacy", None),
)

#: D7 with its amendment: source type -> the review state a new row starts in.
REVIEW_BY_SOURCE: tuple[tuple[str, str], ...] = (
    ("operator", "confirmed"),
    ("extracted", "pending"),
    ("harvest", "pending"),
    ("conversation", "pending"),
    ("ingest", "pending"),
    ("background_report", "pending"),
    ("", "pending"),
    ("an-unknown-writer", "pending"),
)

#: Query text that has broken full-text engines: syntax, quoting, operators, control characters.
HOSTILE_QUERIES: tuple[str, ...] = (
    "",
    " ",
    '"',
    '""',
    "'",
    "unbalanced (paren",
    "a) OR (b",
    "((((",
    "AND",
    "OR NOT",
    "NEAR(a b, 3)",
    "*",
    "kiwi*",
    "^kiwi",
    "content:kiwi",
    "heading : x",
    "-kiwi",
    "+kiwi",
    "kiwi AND OR NOT",
    "; DROP TABLE chunks; --",
    "' OR 1=1 --",
    "%_%",
    "\\",
    "{}[]<>",
    "NULL",
    "\x00",
    "kiwi\x00alpha",
    "\u2028\u2029\r\n\t",
    "\u200f\u202e kiwi",
    "\ud800 lone surrogate \udfff",
    "🥝🥝🥝",
    "ﬁ ǅ İ ß",
    "kiwi " * 2000,
    "x" * 20_000,
)

#: Rows for STORE-SEARCH-RELEVANCE: words the question does not use, function words included.
RELEVANCE_FILLER: tuple[str, ...] = (
    "the invoice renderer is owned by bob",
    "lunch is served at noon on fridays",
    "the staging database refreshes on sunday",
    "backups are encrypted and tested monthly",
    "the api gateway limits requests per key",
    "canary releases run for thirty minutes",
    "incident reviews are blameless",
    "the design system uses an eight pixel grid",
    "log retention is thirty days",
    "support escalations go to tier two",
)

_SLACK = timedelta(seconds=5)
#: STORE-CONSOLIDATE-RACE: how many subjects see a supersede and an add race (one pair at a time).
RACING_PAIRS = 20


def _aware_utc(value: datetime | None) -> bool:
    return value is not None and value.tzinfo is not None and value.utcoffset() == timedelta(0)


class _StoreBase(DeclaredCapabilities):
    """Fixtures every store supplies, and the capability declaration."""

    known_capabilities: ClassVar[frozenset[str]] = STORE_CAPABILITIES
    #: Optional capabilities this store has (see ``STORE_CAPABILITIES``); undeclared ones skip.
    capabilities: ClassVar[frozenset[str]] = frozenset({"concurrent_writes", "consistent_read"})

    @pytest.fixture
    def store(self) -> KnowledgeStore:
        """Return (or yield, then close) a new, empty store implementing
        ``contextplane.store.KnowledgeStore``, private to one test."""
        raise required_fixture(self, "store", _StoreBase.store.__doc__)

    @pytest.fixture
    def legacy_store(self) -> Callable[[Sequence[LegacyRow]], KnowledgeStore]:
        """Required when ``capabilities`` has "migration". Return a function that takes pre-D4 rows
        ``(content, domain, source_type)``, writes them the way your previous schema stored them
        (no kind, delivery policy or review state) and returns your store opened on them, so the
        backfill has run. Close the stores it opened after the test."""
        raise required_fixture(self, "legacy_store", _StoreBase.legacy_store.__doc__)

    @pytest.fixture
    def reopen(self) -> Callable[[Embedder | None], KnowledgeStore]:
        """Required when ``capabilities`` has "vector_space". Return a function that opens a new
        handle on one storage private to the test (the same file, the same schema) with the given
        embedder (None: full text only) and returns its memory store; close every handle after
        the test."""
        raise required_fixture(self, "reopen", _StoreBase.reopen.__doc__)


def _get(store: KnowledgeStore, chunk_id: str, req: Requirement) -> MemoryChunk:
    chunk = store.get(chunk_id)
    if chunk is None:
        req.fail(f"get({chunk_id!r}) returned None for a row the store wrote")
    return chunk


def _ids(chunks: Sequence[MemoryChunk]) -> set[str]:
    return {c.id for c in chunks}


def _hit_ids(store: KnowledgeStore, query: str, **kw: Any) -> set[str]:
    return {h.chunk.id for h in store.search(query, 50, **kw)}


def _shape(chunk: MemoryChunk) -> tuple[Any, ...]:
    """What two twin rows share: everything but id, content, heading and the clock."""
    return (
        chunk.domain,
        chunk.source_type,
        chunk.memory_kind,
        chunk.delivery_policy,
        chunk.review_state,
        chunk.namespace,
        chunk.invalidated_at is None,
        chunk.is_superseded,
    )


def _history_of(store: KnowledgeStore, req: Requirement) -> MemoryHistory:
    """The store as a ``MemoryHistory``, or a failure naming the missing protocol."""
    if not isinstance(store, MemoryHistory):
        req.fail(
            f"{type(store).__name__} does not implement contextplane.store.MemoryHistory "
            "(history, history_position, as_of)"
        )
    return store


def _as_of(store: KnowledgeStore, when: Any, req: Requirement) -> Any:
    """The store's ``as_of`` context manager, or a failure naming the missing protocol."""
    return _history_of(store, req).as_of(when)


def _pause() -> None:
    """Let the clock move, so events before and after a time compare unambiguously."""
    time.sleep(0.005)
