"""Conformance checks for knowledge stores: the D4 attributes, the D6 deliverable filter and the
D7 write lifecycle, plus search safety, concurrency and round-trips.

The expected values are written out here from the ADR's tables rather than imported from
``contextplane.memory``: the kit states the contract, so a store that shares a bug with the
reference implementation's helpers still fails. Every check talks to the store only through
the ``KnowledgeStore`` protocol.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, ClassVar

import pytest

from contextplane.embedding import Embedder
from contextplane.errors import StoreError
from contextplane.memory.model import MemoryChunk
from contextplane.store import aio
from contextplane.store.protocol import KnowledgeStore, MemoryHistory
from contextplane.testing._base import ConformanceBase, KitUsageError, checks, required_fixture
from contextplane.testing.requirements import STORE_CAPABILITIES, Requirement

#: A pre-D4 row: (content, domain, source_type), as the version-1 schema stored it.
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


class _StoreBase(ConformanceBase):
    """Fixtures every store supplies, and the capability declaration."""

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

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        unknown = set(type(self).capabilities) - STORE_CAPABILITIES
        if unknown:
            raise KitUsageError(
                f"{type(self).__name__}.capabilities names {sorted(unknown)}; known capabilities: "
                f"{sorted(STORE_CAPABILITIES)}"
            )
        super().pytest_generate_tests(metafunc)

    def _require(self, req: Requirement) -> None:
        if req.capability is not None:
            self.require_capability(
                req,
                req.capability in type(self).capabilities,
                f'add "{req.capability}" to {type(self).__name__}.capabilities',
            )


def _get(store: KnowledgeStore, chunk_id: str, req: Requirement) -> MemoryChunk:
    chunk = store.get(chunk_id)
    if chunk is None:
        req.fail(f"get({chunk_id!r}) returned None for a row the store wrote")
    return chunk


def _ids(chunks: Sequence[MemoryChunk]) -> set[str]:
    return {c.id for c in chunks}


def _hit_ids(store: KnowledgeStore, query: str, **kw: Any) -> set[str]:
    return {h.chunk.id for h in store.search(query, 50, **kw)}


class StoreWriteChecks(_StoreBase):
    """D7 step 1 and 2: what a write stamps, and the review state it starts in."""

    @checks("STORE-PROTOCOL")
    def test_store_protocol(self, store: KnowledgeStore, requirement: Requirement) -> None:
        missing = [
            name
            for name in (
                "add_chunk",
                "add_chunks",
                "get",
                "list_chunks",
                "search",
                "set_review_state",
                "set_expires_at",
                "invalidate_chunk",
                "supersede",
                "purge",
                "close",
                "__enter__",
                "__exit__",
            )
            if not callable(getattr(store, name, None))
        ]
        requirement.check(not missing, f"{type(store).__name__} lacks {', '.join(missing)}")
        requirement.check(
            isinstance(store, KnowledgeStore), f"{type(store).__name__} is not a KnowledgeStore"
        )

    @checks("STORE-STAMP-CREATION")
    def test_store_stamp_creation(self, store: KnowledgeStore, requirement: Requirement) -> None:
        before = datetime.now(UTC)
        for domain, source_type, kind, policy in D4_TABLE:
            cid = store.add_chunk(f"kiwi {domain}", domain, source_type, namespace="project:kit")
            chunk = _get(store, cid, requirement)
            where = f"add_chunk(domain={domain!r}, source_type={source_type!r})"
            requirement.check(
                chunk.memory_kind == kind, f"{where} stamped memory_kind {chunk.memory_kind!r}, not {kind!r}"
            )
            requirement.check(
                chunk.effective_delivery_policy == (policy or "retrieved"),
                f"{where} stamped delivery_policy {chunk.delivery_policy!r}, "
                f"not {policy or 'NULL/retrieved'!r}",
            )
            requirement.check(chunk.domain == domain, f"{where} stored domain {chunk.domain!r}")
            requirement.check(
                chunk.source_type == source_type, f"{where} stored source_type {chunk.source_type!r}"
            )
            requirement.check(
                chunk.namespace == "project:kit", f"{where} stored namespace {chunk.namespace!r}"
            )
            requirement.check(
                chunk.review_state in ("pending", "confirmed"),
                f"{where} stamped review_state {chunk.review_state!r}",
            )
            requirement.check(
                _aware_utc(chunk.created_at) and _aware_utc(chunk.updated_at),
                f"{where}: created_at {chunk.created_at!r} / updated_at {chunk.updated_at!r} "
                "are not aware UTC",
            )
            requirement.check(
                before - _SLACK <= chunk.created_at <= datetime.now(UTC) + _SLACK,
                f"{where}: created_at {chunk.created_at.isoformat()} is not the time of the write",
            )
        cid = store.add_chunk(
            "kiwi explicit", "hot", "operator", memory_kind="decision", delivery_policy="on_demand"
        )
        chunk = _get(store, cid, requirement)
        requirement.check(
            (chunk.memory_kind, chunk.delivery_policy) == ("decision", "on_demand"),
            "explicit memory_kind='decision', delivery_policy='on_demand' were stored as "
            f"{chunk.memory_kind!r}, {chunk.delivery_policy!r}: explicit values must win over the domain",
        )

    @checks("STORE-REVIEW-TIER")
    def test_store_review_tier(self, store: KnowledgeStore, requirement: Requirement) -> None:
        for source_type, state in REVIEW_BY_SOURCE:
            chunk = _get(store, store.add_chunk("kiwi review", "general", source_type), requirement)
            requirement.check(
                chunk.review_state == state,
                f"a write with source_type={source_type!r} (trust tier {chunk.trust_tier}) starts "
                f"{chunk.review_state!r}, not {state!r}",
            )
        chunk = _get(
            store, store.add_chunk("kiwi", "general", "extracted", review_state="confirmed"), requirement
        )
        requirement.check(
            chunk.review_state == "confirmed",
            f"an explicit review_state='confirmed' was stored as {chunk.review_state!r}",
        )


class StoreDeliveryChecks(_StoreBase):
    """D6's deliverable filter: rejected, expired and invalidated rows are never delivered."""

    @checks("STORE-DELIVERABLE-REJECTED")
    def test_store_deliverable_rejected(self, store: KnowledgeStore, requirement: Requirement) -> None:
        keep = store.add_chunk("kiwi keep", "general", "operator")
        gone = store.add_chunk("kiwi reject", "general", "extracted")
        store.set_review_state(gone, "rejected")
        requirement.check(
            _ids(store.list_chunks(deliverable=True)) == {keep},
            f"list_chunks(deliverable=True) returned {_ids(store.list_chunks(deliverable=True))}; "
            f"rejected row {gone!r} must be excluded",
        )
        requirement.check(gone not in _hit_ids(store, "kiwi"), f"search() returned rejected row {gone!r}")
        requirement.check(
            gone not in _hit_ids(store, "kiwi", include_superseded=True),
            f"search(include_superseded=True) returned rejected row {gone!r}",
        )
        requirement.check(
            _get(store, gone, requirement).review_state == "rejected",
            "the rejected row lost its review state",
        )
        requirement.check(
            gone in _ids(store.list_chunks()), "list_chunks() without a filter lost the rejected row"
        )

    @checks("STORE-DELIVERABLE-EXPIRED")
    def test_store_deliverable_expired(self, store: KnowledgeStore, requirement: Requirement) -> None:
        now = datetime.now(UTC)
        past = store.add_chunk("kiwi past", "general", "operator", expires_at=now - timedelta(hours=1))
        future = store.add_chunk("kiwi future", "general", "operator", expires_at=now + timedelta(days=30))
        plain = store.add_chunk("kiwi plain", "general", "operator")
        listed = _ids(store.list_chunks(deliverable=True))
        requirement.check(
            listed == {future, plain},
            f"list_chunks(deliverable=True) returned {sorted(listed)}; expected {sorted({future, plain})} "
            f"(row {past!r} expired an hour ago)",
        )
        hits = _hit_ids(store, "kiwi")
        requirement.check(past not in hits, f"search() returned expired row {past!r}")
        later = now + timedelta(days=31)
        requirement.check(
            _ids(store.list_chunks(deliverable=True, now=later)) == {plain},
            f"list_chunks(deliverable=True, now=<in 31 days>) must drop row {future!r}, which expires then",
        )
        requirement.check(
            future not in _hit_ids(store, "kiwi", now=later),
            f"search(now=<in 31 days>) returned row {future!r}, expired by then",
        )
        requirement.check(
            _get(store, past, requirement).content == "kiwi past", "the expired row was not retained"
        )

    @checks("STORE-DELIVERABLE-SUPERSEDED")
    def test_store_deliverable_superseded(self, store: KnowledgeStore, requirement: Requirement) -> None:
        old = store.add_chunk("kiwi version one", "fact", "operator")
        new = store.supersede(old, "kiwi version two")
        listed = _ids(store.list_chunks(deliverable=True))
        requirement.check(old not in listed, f"list_chunks(deliverable=True) returned superseded row {old!r}")
        requirement.check(new in listed, f"list_chunks(deliverable=True) lost the superseding row {new!r}")
        requirement.check(old not in _hit_ids(store, "kiwi"), f"search() returned superseded row {old!r}")
        audit = _hit_ids(store, "kiwi", include_superseded=True)
        requirement.check(
            {old, new} <= audit,
            f"search(include_superseded=True) returned {sorted(audit)}; it must find the superseded row "
            f"{old!r} and its successor {new!r}",
        )

    @checks("STORE-DELIVERABLE-INVALIDATED")
    def test_store_deliverable_invalidated(self, store: KnowledgeStore, requirement: Requirement) -> None:
        bad = store.add_chunk("kiwi wrong fact", "fact", "operator")
        ok = store.add_chunk("kiwi right fact", "fact", "operator")
        store.invalidate_chunk(bad, reason="found to be wrong")
        requirement.check(
            _ids(store.list_chunks(deliverable=True)) == {ok},
            f"list_chunks(deliverable=True) must exclude invalidated row {bad!r}",
        )
        requirement.check(bad not in _hit_ids(store, "kiwi"), f"search() returned invalidated row {bad!r}")
        requirement.check(
            bad not in _hit_ids(store, "kiwi", include_superseded=True),
            f"search(include_superseded=True) returned row {bad!r}, invalidated for another reason",
        )
        chunk = _get(store, bad, requirement)
        requirement.check(
            chunk.invalidated_at is not None and chunk.invalidation_reason == "found to be wrong",
            f"the invalidated row reads back as {chunk.invalidated_at!r}, {chunk.invalidation_reason!r}",
        )

    @checks("STORE-POLICY-FILTER")
    def test_store_policy_filter(self, store: KnowledgeStore, requirement: Requirement) -> None:
        always = store.add_chunk("kiwi always", "general", "operator", delivery_policy="always")
        demand = store.add_chunk("kiwi demand", "general", "operator", delivery_policy="on_demand")
        explicit = store.add_chunk("kiwi retrieved", "general", "operator", delivery_policy="retrieved")
        null = store.add_chunk("kiwi default", "general", "operator")
        for policy, expected in (
            ("retrieved", {explicit, null}),
            ("always", {always}),
            ("on_demand", {demand}),
        ):
            got = _ids(store.list_chunks(delivery_policy=policy))
            requirement.check(
                got == expected,
                f"list_chunks(delivery_policy={policy!r}) returned {sorted(got)}, "
                f"expected {sorted(expected)}",
            )


class StoreLifecycleChecks(_StoreBase):
    """D7 steps 3 and 4: supersession (insert, then invalidate; never delete) and expiry."""

    @checks("STORE-SUPERSEDE-ORDER")
    def test_store_supersede_order(self, store: KnowledgeStore, requirement: Requirement) -> None:
        old = store.add_chunk("kiwi standing rule", "hot", "operator")
        try:
            store.supersede(old, "kiwi replacement", memory_kind="not-a-kind")
        except Exception:
            pass
        else:
            requirement.fail(
                "supersede(..., memory_kind='not-a-kind') succeeded; an invalid kind must be refused"
            )
        chunk = _get(store, old, requirement)
        requirement.check(
            chunk.invalidated_at is None and old in _ids(store.list_chunks(deliverable=True)),
            f"a supersede whose new row could not be written left the old row {old!r} invalidated "
            f"({chunk.invalidation_reason!r}); write the new row first",
        )
        new = store.supersede(old, "kiwi replacement")
        kept = store.get(old)
        requirement.check(
            kept is not None, f"supersede deleted the old row {old!r}; it must be kept for audit"
        )
        assert kept is not None
        requirement.check(
            kept.content == "kiwi standing rule" and kept.id == old,
            f"the superseded row changed: {kept.id!r} {kept.content!r}",
        )
        requirement.check(new != old, "supersede returned the old id")
        fresh = _get(store, new, requirement)
        requirement.check(
            fresh.created_at >= chunk.created_at, "the superseding row is older than the row it replaces"
        )

    @checks("STORE-SUPERSEDE-CHAIN")
    def test_store_supersede_chain(self, store: KnowledgeStore, requirement: Requirement) -> None:
        a = store.add_chunk("kiwi first", "fact", "operator")
        b = store.supersede(a, "kiwi second")
        c = store.supersede(b, "kiwi third")
        for older, newer in ((a, b), (b, c)):
            chunk = store.get(older)
            requirement.check(chunk is not None, f"superseded row {older!r} is gone; it must stay readable")
            assert chunk is not None
            requirement.check(
                chunk.invalidated_at is not None and chunk.invalidation_reason == f"superseded_by:{newer}",
                f"row {older!r} reads invalidated_at={chunk.invalidated_at!r}, "
                f"invalidation_reason={chunk.invalidation_reason!r}; expected 'superseded_by:{newer}'",
            )
        walk, cur = [a], store.get(a)
        while cur is not None and cur.superseded_by is not None and len(walk) < 10:
            walk.append(cur.superseded_by)
            cur = store.get(cur.superseded_by)
        requirement.check(
            walk == [a, b, c], f"following superseded_by from {a!r} visits {walk}, not {[a, b, c]}"
        )
        requirement.check(
            _ids(store.list_chunks(deliverable=True)) == {c},
            f"only the chain's last row {c!r} must be deliverable; "
            f"got {_ids(store.list_chunks(deliverable=True))}",
        )

    @checks("STORE-EXPIRY")
    def test_store_expiry(self, store: KnowledgeStore, requirement: Requirement) -> None:
        before = datetime.now(UTC)
        week = _get(
            store, store.add_chunk("kiwi week", "general", "operator", expires_in_days=7), requirement
        )
        requirement.check(
            _aware_utc(week.expires_at),
            f"expires_in_days=7 stored expires_at={week.expires_at!r}, not aware UTC",
        )
        assert week.expires_at is not None
        requirement.check(
            before + timedelta(days=7) - _SLACK
            <= week.expires_at
            <= datetime.now(UTC) + timedelta(days=7) + _SLACK,
            f"expires_in_days=7 stored expires_at={week.expires_at.isoformat()}, not 7 days after the write",
        )
        given = _get(
            store,
            store.add_chunk("kiwi given", "general", "operator", expires_at="2031-01-01T12:00:00+02:00"),
            requirement,
        )
        requirement.check(
            given.expires_at == datetime(2031, 1, 1, 10, 0, tzinfo=UTC) and _aware_utc(given.expires_at),
            f"expires_at='2031-01-01T12:00:00+02:00' reads back as {given.expires_at!r}",
        )
        moved = store.set_expires_at(given.id, datetime(2032, 6, 1, tzinfo=UTC))
        requirement.check(
            moved.expires_at == datetime(2032, 6, 1, tzinfo=UTC),
            f"set_expires_at returned expires_at={moved.expires_at!r}",
        )
        cleared = store.set_expires_at(given.id, None)
        requirement.check(
            cleared.expires_at is None and _get(store, given.id, requirement).expires_at is None,
            f"set_expires_at(id, None) left expires_at={cleared.expires_at!r}",
        )


class StoreScopeChecks(_StoreBase):
    """D4 scope: namespaces are an allow-list, for listing and searching alike."""

    @checks("STORE-SCOPE-ISOLATION")
    def test_store_scope_isolation(self, store: KnowledgeStore, requirement: Requirement) -> None:
        ids = {
            ns: store.add_chunk(f"kiwi scoped {ns or 'global'}", "general", "operator", namespace=ns)
            for ns in ("", "project:a", "project:b", "session:s1")
        }
        for allowed in ([""], ["", "project:a"], ["project:b", "session:s1"], [], None):
            expected = set(ids.values()) if allowed is None else {ids[n] for n in allowed}
            listed = _ids(store.list_chunks(namespaces=allowed))
            requirement.check(
                listed == expected,
                f"list_chunks(namespaces={allowed!r}) returned {sorted(listed)}, expected {sorted(expected)}",
            )
            found = _hit_ids(store, "kiwi scoped", namespaces=allowed)
            requirement.check(
                found == expected,
                f"search('kiwi scoped', namespaces={allowed!r}) returned {sorted(found)}, "
                f"expected {sorted(expected)}",
            )


class StoreMigrationChecks(_StoreBase):
    """The D4 backfill (and the D7 review-state backfill) for stores with an earlier schema."""

    @checks("STORE-BACKFILL-TABLE")
    def test_store_backfill_table(self, request: pytest.FixtureRequest, requirement: Requirement) -> None:
        self._require(requirement)
        legacy_store: Callable[[Sequence[LegacyRow]], KnowledgeStore] = request.getfixturevalue(
            "legacy_store"
        )
        rows = [(f"legacy {i} {domain}", domain, source) for i, (domain, source, _, _) in enumerate(D4_TABLE)]
        rows.append(("legacy operator hot", "hot", "operator"))
        expected = {
            content: (kind, policy)
            for (content, _, _), (_, _, kind, policy) in zip(rows, D4_TABLE, strict=False)
        }
        expected["legacy operator hot"] = ("standing", "always")
        store = legacy_store(rows)
        by_content = {c.content: c for c in store.list_chunks()}
        requirement.check(
            set(by_content) == {r[0] for r in rows},
            f"after the backfill the store holds {sorted(by_content)}; every legacy row must survive",
        )
        for content, domain, source in rows:
            chunk = by_content[content]
            kind, policy = expected[content]
            where = f"legacy row (domain={domain!r}, source_type={source!r})"
            requirement.check(
                chunk.memory_kind == kind,
                f"{where} was backfilled to memory_kind {chunk.memory_kind!r}, not {kind!r}",
            )
            requirement.check(
                chunk.effective_delivery_policy == (policy or "retrieved"),
                f"{where} was backfilled to delivery_policy {chunk.delivery_policy!r}, "
                f"not {policy or 'NULL'!r}",
            )
            state = "confirmed" if source == "operator" else "pending"
            requirement.check(
                chunk.review_state == state,
                f"{where} was backfilled to review_state {chunk.review_state!r}, not {state!r}",
            )
            requirement.check(chunk.domain == domain, f"{where} lost its domain (now {chunk.domain!r})")

    @checks("STORE-HISTORY-MIGRATED")
    def test_store_history_migrated(self, request: pytest.FixtureRequest, requirement: Requirement) -> None:
        self._require(requirement)
        legacy_store: Callable[[Sequence[LegacyRow]], KnowledgeStore] = request.getfixturevalue(
            "legacy_store"
        )
        rows = [
            ("kiwi migrated one", "fact", "extracted"),
            ("kiwi migrated two", "fact", "operator"),
            ("kiwi migrated three", "general", "operator"),
        ]
        store = legacy_store(rows)
        history = _history_of(store, requirement)
        by_content = {c.content: c for c in store.list_chunks()}
        one, two, three = (by_content[content] for content, _, _ in rows)
        for chunk in (one, two, three):
            got = [(e.seq, e.event, e.review_state) for e in history.history(chunk.id)]
            requirement.check(
                got == [(0, "migrated", chunk.review_state)],
                f"the history of legacy row {chunk.id!r} reads {got} (seq, event, review_state); "
                f"expected [(0, 'migrated', {chunk.review_state!r})]",
            )
        position = history.history_position()
        store.set_review_state(one.id, "rejected", by="curator-kit")
        store.invalidate_chunk(two.id, reason="kit says wrong", by="curator-kit")
        changed = [(e.seq, str(e.event), e.review_state, e.actor) for e in history.history(one.id)]
        requirement.check(
            len(changed) == 2
            and changed[0] == (0, "migrated", "pending", "")
            and changed[1][1:] == ("review", "rejected", "curator-kit")
            and changed[1][0] > position.seq,
            f"after set_review_state the history of legacy row {one.id!r} reads {changed}; expected the "
            f"'migrated' event at seq 0, then the review after position {position.seq}",
        )
        with _as_of(store, position, requirement) as then:
            was_one, was_two = then.get(one.id), then.get(two.id)
            requirement.check(
                was_one is not None and was_one.review_state == "pending",
                f"as of {position} legacy row {one.id!r} reads {was_one}; expected it pending, as migrated",
            )
            requirement.check(
                was_two is not None and was_two.invalidated_at is None,
                f"as of {position} legacy row {two.id!r} reads {was_two}; expected it valid, as migrated",
            )
            listed = _ids(then.list_chunks(deliverable=True))
            requirement.check(
                {one.id, two.id, three.id} <= listed,
                f"as of {position} list_chunks(deliverable=True) returned {sorted(listed)}; the three "
                "legacy rows were deliverable then",
            )
        copy = store.add_chunk("kiwi  migrated three", "general", "operator")
        requirement.check(
            copy == three.id and getattr(copy, "outcome", "duplicate") == "duplicate",
            f"add_chunk of a copy of legacy row {three.id!r} returned {copy!r} "
            f"(outcome {getattr(copy, 'outcome', None)!r}); expected the legacy row's id, a duplicate",
        )


class StoreRobustnessChecks(_StoreBase):
    """What no caller can break: hostile search text, concurrent writers, every attribute."""

    @checks("STORE-SEARCH-HOSTILE")
    def test_store_search_hostile(self, store: KnowledgeStore, requirement: Requirement) -> None:
        store.add_chunk("kiwi alpha", "general", "operator")
        store.add_chunk('quote " paren ( star * caret ^', "general", "operator", namespace="project:a")
        for query in HOSTILE_QUERIES:
            for kw in ({}, {"namespaces": ["", "project:a"]}, {"include_superseded": True}):
                try:
                    hits = store.search(query, 5, **kw)
                except Exception as exc:
                    requirement.fail(f"search({query[:60]!r}, {kw}) raised {type(exc).__name__}: {exc}")
                requirement.check(
                    isinstance(hits, list),
                    f"search({query[:60]!r}) returned {type(hits).__name__}, not a list",
                )

    @checks("STORE-SEARCH-RELEVANCE")
    def test_store_search_relevance(self, store: KnowledgeStore, requirement: Requirement) -> None:
        whole = store.add_chunk("kiwi crates leave the orchard at dawn", "general", "operator")
        function_only = store.add_chunk("the meeting is when it is", "general", "operator")
        for i, words in enumerate(RELEVANCE_FILLER):
            store.add_chunk(f"{words} number{i}", "general", "operator")
        query = "when do the kiwi crates leave the orchard?"
        hits = store.search(query, 20)
        for hit in hits:
            relevance = hit.relevance
            requirement.check(
                isinstance(relevance, float) and 0.0 <= relevance <= 1.0,
                f"search({query!r}) gave row {hit.chunk.id} relevance {relevance!r}; "
                "expected a float in [0, 1]",
            )
        requirement.check(
            bool(hits) and hits[0].chunk.id == whole,
            f"search({query!r}) ranked {[h.chunk.id for h in hits]}; expected {whole} (every meaningful "
            "word) first",
        )
        top = hits[0].relevance or 0.0
        requirement.check(top >= 0.3, f"the row holding every meaningful word has relevance {top}, under 0.3")
        for hit in hits:
            if hit.chunk.id == function_only:
                requirement.check(
                    (hit.relevance or 0.0) < 0.3 and (hit.relevance or 0.0) < top,
                    f"row {function_only} shares only function words with {query!r} but has relevance "
                    f"{hit.relevance} (the full match: {top})",
                )

    @checks("STORE-SEARCH-DEPTH")
    def test_store_search_depth(self, store: KnowledgeStore, requirement: Requirement) -> None:
        relevant = set(
            store.add_chunks(
                {"content": f"the kiwi crates left orchard {i} at dawn", "source_type": "operator"}
                for i in range(40)
            )
        )
        store.add_chunks(
            {"content": f"{words} number{i}", "source_type": "operator"}
            for i, words in enumerate(RELEVANCE_FILLER * 5)
        )
        query = "when did the kiwi crates leave the orchard?"
        previous = -1
        for k in (5, 10, 20, 40, 80):
            found = sum(hit.chunk.id in relevant for hit in store.search(query, k))
            requirement.check(
                found >= previous,
                f"search({query!r}, {k}) returned {found} of the 40 relevant rows, fewer than the "
                f"{previous} the shallower search returned",
            )
            previous = found
        requirement.check(
            previous == 40,
            f"search({query!r}, 80) returned {previous} of the 40 rows holding the question's words",
        )

    @checks("STORE-CONCURRENT-WRITES")
    def test_store_concurrent_writes(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        threads, per_thread = 8, 25
        results: list[list[str]] = [[] for _ in range(threads)]
        errors: list[BaseException] = []
        start = threading.Barrier(threads)

        def write(n: int) -> None:
            try:
                start.wait()
                for i in range(per_thread):
                    if i % 5 == 4:
                        results[n].extend(
                            store.add_chunks([{"content": f"kiwi bulk t{n} i{i} {j}"} for j in range(2)])
                        )
                    else:
                        results[n].append(store.add_chunk(f"kiwi t{n} i{i}", "general", "operator"))
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        requirement.check(not errors, f"concurrent writers raised: {errors[:3]}")
        ids = [i for r in results for i in r]
        per = per_thread + per_thread // 5
        requirement.check(len(ids) == threads * per, f"{len(ids)} ids came back for {threads * per} writes")
        requirement.check(len(set(ids)) == len(ids), f"{len(ids) - len(set(ids))} ids were handed out twice")
        stored = _ids(store.list_chunks())
        lost = set(ids) - stored
        requirement.check(
            not lost, f"{len(lost)} written rows are missing afterwards, e.g. {sorted(lost)[:5]}"
        )

    @checks("STORE-ROUND-TRIP")
    def test_store_round_trip(self, store: KnowledgeStore, requirement: Requirement) -> None:
        content = "Ünïcödé 🥝 multi\nline\ttext with 'quotes', \"doubles\", NUL\x00 and \u2028 separators"
        expires = datetime(2030, 5, 17, 8, 30, 15, tzinfo=UTC)
        written: dict[str, Any] = {
            "domain": "decisions/2026",
            "source_type": "harvest",
            "memory_kind": "decision",
            "delivery_policy": "on_demand",
            "review_state": "confirmed",
            "namespace": "project:round-trip",
            "heading": "Heading — with dash",
            "source": "https://example.invalid/doc?id=1&x=2",
            "subject": "subject ∑",
            "epoch": "era-7",
            "expires_at": expires,
        }
        cid = store.add_chunk(content, **written)
        chunk = _get(store, cid, requirement)
        requirement.check(chunk.content == content, f"content read back as {chunk.content!r}")
        for name, value in written.items():
            got = getattr(chunk, name)
            requirement.check(got == value, f"{name} was written as {value!r} and read back as {got!r}")
        bulk = store.add_chunks([{"content": content, **written}])
        requirement.check(len(bulk) == 1, f"add_chunks of one row returned {len(bulk)} ids")
        again = _get(store, bulk[0], requirement)
        for name, value in written.items():
            got = getattr(again, name)
            requirement.check(
                got == value, f"add_chunks: {name} was written as {value!r} and read back as {got!r}"
            )

    @checks("STORE-GET-UNKNOWN")
    def test_store_get_unknown(self, store: KnowledgeStore, requirement: Requirement) -> None:
        store.add_chunk("kiwi", "general", "operator")
        for bogus in ("999999999", "not-an-id", "", " 1 x", "-1", "1; DROP TABLE chunks"):
            try:
                got = store.get(bogus)
            except Exception as exc:
                requirement.fail(f"get({bogus!r}) raised {type(exc).__name__}: {exc}")
            requirement.check(got is None, f"get({bogus!r}) returned {got!r}")


class StoreConsistencyChecks(_StoreBase):
    """ADR D2's one projection, one state: the view a composition reads through."""

    @checks("STORE-CONSISTENT-READ")
    def test_store_consistent_read(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        opener = getattr(store, "consistent_read", None)
        requirement.check(callable(opener), f"{type(store).__name__} has no consistent_read()")
        old = store.add_chunk("kiwi standing fact", "fact", "operator")
        doubt = store.add_chunk("kiwi doubtful note", "general", "extracted")
        with store.consistent_read() as view:  # type: ignore[attr-defined]
            before_list = _ids(view.list_chunks(deliverable=True))
            before_hits = {h.chunk.id for h in view.search("kiwi", 50)}
            new = store.supersede(old, "kiwi replacement fact")
            store.set_review_state(doubt, "rejected")
            added = store.add_chunk("kiwi added later", "fact", "operator")
            listed = _ids(view.list_chunks(deliverable=True))
            hits = {h.chunk.id for h in view.search("kiwi", 50)}
            seen_old = view.get(old)
            seen_new = view.get(new)
        requirement.check(
            before_list == {old, doubt} and before_hits == {old, doubt},
            f"the view opened on rows {sorted({old, doubt})} but listed {sorted(before_list)} and "
            f"found {sorted(before_hits)}",
        )
        requirement.check(
            listed == {old, doubt},
            f"after a supersession, a rejection and an add committed while the view was open, "
            f"view.list_chunks(deliverable=True) returned {sorted(listed)}, not {sorted({old, doubt})}",
        )
        requirement.check(
            hits == {old, doubt}, f"view.search saw writes made after it opened: {sorted(hits)}"
        )
        requirement.check(
            seen_old is not None and seen_old.invalidated_at is None,
            f"view.get({old!r}) saw the supersession committed after the view opened: {seen_old!r}",
        )
        requirement.check(seen_new is None, f"view.get({new!r}) returned a row written after it opened")
        now = _ids(store.list_chunks(deliverable=True))
        requirement.check(
            now == {new, added},
            f"after the view closed the store lists {sorted(now)}; the writes made meanwhile "
            f"({sorted({new, added})} deliverable) must all be visible",
        )


class StoreAsyncChecks(_StoreBase):
    """The async forms composition and the memory tools await (``contextplane.store.aio``)."""

    @checks("STORE-ASYNC-PARITY")
    def test_store_async_parity(self, store: KnowledgeStore, requirement: Requirement) -> None:
        asyncio.run(self._async_parity(store, requirement))

    async def _async_parity(self, store: KnowledgeStore, req: Requirement) -> None:
        # Each write is made twice, once through each form, on twin rows; the twins must end up
        # alike. What the lifecycle itself must do is the other checks' business. The twins'
        # texts differ, so consolidation on write (an exact duplicate returns the existing row)
        # keeps them two rows.
        scope = "project:a"
        ids = {
            "sync": store.add_chunk("kiwi orchard east", "general", "operator", namespace=scope),
            "async": await aio.aadd_chunk(store, "kiwi orchard west", "general", "operator", namespace=scope),
        }
        await aio.aadd_chunk(store, "banana stand", "hot", "operator")
        store.add_chunk("kiwi pending note", "general", "extracted")
        sync_row, async_row = _get(store, ids["sync"], req), _get(store, ids["async"], req)
        req.check(
            _shape(async_row) == _shape(sync_row),
            f"aadd_chunk wrote {_shape(async_row)}, add_chunk wrote {_shape(sync_row)}",
        )
        await self._reads_agree(store, req, "after the writes")
        sync_review = store.set_review_state(ids["sync"], "rejected")
        async_review = await aio.aset_review_state(store, ids["async"], "rejected")
        req.check(
            _shape(async_review) == _shape(sync_review),
            f"aset_review_state returned {_shape(async_review)}, set_review_state {_shape(sync_review)}",
        )
        twins = [
            store.add_chunk(f"plum tree pruning {side}", "general", "operator") for side in ("north", "south")
        ]
        successors = (
            store.supersede(twins[0], "plum tree pruning north in March"),
            await aio.asupersede(store, twins[1], "plum tree pruning south in March"),
        )
        for what, pair in (("the old row", twins), ("the successor", successors)):
            a, b = store.get(pair[0]), store.get(pair[1])
            req.check(
                (a is None) == (b is None) and (a is None or b is None or _shape(a) == _shape(b)),
                f"after supersede / asupersede {what} is {a and _shape(a)} / {b and _shape(b)}",
            )
        await self._reads_agree(store, req, "after review and supersession")

    @staticmethod
    async def _reads_agree(store: KnowledgeStore, req: Requirement, when: str) -> None:
        for query, options in (
            ("kiwi", {}),
            ("kiwi", {"namespaces": ["project:a"]}),
            ("kiwi", {"namespaces": []}),
            ("plum", {"include_superseded": True}),
            ("banana", {"deliverable": False}),
            ("", {}),
        ):
            sync = [(h.chunk.id, h.rank) for h in store.search(query, 5, **options)]
            other = [(h.chunk.id, h.rank) for h in await aio.asearch(store, query, 5, **options)]
            req.check(other == sync, f"{when}: asearch({query!r}, {options}) returned {other}, search {sync}")
        for filters in ({}, {"deliverable": True}, {"delivery_policy": "always"}, {"namespace": "project:a"}):
            listed = [c.id for c in store.list_chunks(**filters)]
            alisted = [c.id for c in await aio.alist_chunks(store, **filters)]
            req.check(
                alisted == listed, f"{when}: alist_chunks({filters}) returned {alisted}, list_chunks {listed}"
            )


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


class StoreHistoryChecks(_StoreBase):
    """The lifecycle history and as-of reads: what the store can say about the past."""

    @checks("STORE-HISTORY-APPEND")
    def test_store_history_append(self, store: KnowledgeStore, requirement: Requirement) -> None:
        history = _history_of(store, requirement)
        a = store.add_chunk("kiwi history one", "fact", "extracted")
        b = store.add_chunk("kiwi history two", "fact", "operator")
        store.set_review_state(a, "confirmed", by="curator-kit")
        store.set_expires_at(a, datetime(2031, 1, 1, tzinfo=UTC), by="curator-kit")
        store.set_expires_at(a, None, by="curator-kit")
        c = store.supersede(b, "kiwi history three")
        gone = store.add_chunk("kiwi history doomed", "fact", "operator")
        store.invalidate_chunk(gone, reason="kit says wrong", by="curator-kit")
        before = [(e.seq, e.event, e.review_state) for e in history.history(a)]
        expected = [
            ("created", "pending", None, None),
            ("review", "confirmed", None, "curator-kit"),
            ("expiry", "confirmed", datetime(2031, 1, 1, tzinfo=UTC), "curator-kit"),
            ("expiry", "confirmed", None, "curator-kit"),
        ]
        got = [
            (e.event, e.review_state, e.expires_at, e.actor if e.event != "created" else None)
            for e in history.history(a)
        ]
        requirement.check(
            got == expected,
            f"history({a!r}) reads {got}; expected (event, review_state, expires_at, actor) {expected}",
        )
        seqs = [e.seq for e in history.history(a)]
        requirement.check(
            seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"event seqs {seqs} are not increasing"
        )
        old = [(e.event, e.superseded_by) for e in history.history(b)]
        requirement.check(
            old[-1] == ("superseded", c),
            f"history({b!r}) ends with {old[-1]}; a supersede must append ('superseded', {c!r})",
        )
        requirement.check(
            [e.event for e in history.history(c)][:1] == ["created"],
            f"the superseding row {c!r} has history {[e.event for e in history.history(c)]}",
        )
        dropped = history.history(gone)
        requirement.check(
            [e.event for e in dropped] == ["created", "invalidated"]
            and dropped[-1].invalidation_reason == "kit says wrong"
            and dropped[-1].actor == "curator-kit",
            f"history({gone!r}) after invalidate_chunk(reason=..., by='curator-kit') reads "
            f"{[(e.event, e.invalidation_reason, e.actor) for e in dropped]}",
        )
        store.purge()
        after_purge = history.history(gone)
        requirement.check(
            [e.event for e in after_purge] == ["created", "invalidated", "purged"],
            f"after purge() the purged row's history reads {[e.event for e in after_purge]}; it must remain "
            "and end with 'purged'",
        )
        requirement.check(
            [(e.seq, e.event, e.review_state) for e in history.history(a)] == before,
            "earlier events of a row changed after later writes; the history must only be appended to",
        )
        position = history.history_position()
        requirement.check(
            position.seq >= max(e.seq for e in after_purge),
            f"history_position() is {position.seq}, before the latest event "
            f"{max(e.seq for e in after_purge)}",
        )

    @checks("STORE-ASOF-LIFECYCLE")
    def test_store_asof_lifecycle(self, store: KnowledgeStore, requirement: Requirement) -> None:
        rejected = store.add_chunk("kiwi asof rejected later", "fact", "extracted")
        superseded = store.add_chunk("kiwi asof superseded later", "fact", "operator")
        invalidated = store.add_chunk("kiwi asof invalidated later", "fact", "operator")
        confirmed = store.add_chunk("kiwi asof confirmed later", "fact", "extracted")
        position = _history_of(store, requirement).history_position()
        store.set_review_state(rejected, "rejected")
        successor = store.supersede(superseded, "kiwi asof the successor")
        store.invalidate_chunk(invalidated, reason="later found wrong")
        store.set_review_state(confirmed, "confirmed")
        then = {rejected, superseded, invalidated, confirmed}
        with _as_of(store, position, requirement) as view:
            listed = _ids(view.list_chunks(deliverable=True))
            requirement.check(
                listed == then,
                "as of the position before the changes list_chunks(deliverable=True) returned "
                f"{sorted(listed)}; "
                f"expected {sorted(then)} (rejected, superseded and invalidated only afterwards)",
            )
            found = {h.chunk.id for h in view.search("kiwi asof", 50)}
            requirement.check(
                found == then, f"as-of search('kiwi asof') returned {sorted(found)}, expected {sorted(then)}"
            )
            old = view.get(superseded)
            requirement.check(
                old is not None and old.invalidated_at is None and old.superseded_by is None,
                f"as-of get({superseded!r}) reads {old!r}; it was not superseded then",
            )
            pending = view.get(confirmed)
            requirement.check(
                pending is not None and pending.review_state == "pending",
                f"as-of get({confirmed!r}) has review_state {getattr(pending, 'review_state', None)!r}; "
                "it was confirmed only after the position",
            )
            gone = view.get(rejected)
            requirement.check(
                gone is not None and gone.review_state == "pending",
                f"as-of get({rejected!r}) has review_state {getattr(gone, 'review_state', None)!r}, "
                "not 'pending'",
            )
            requirement.check(
                successor not in listed,
                f"the successor {successor!r} written later is listed as of before it",
            )
        now = _ids(store.list_chunks(deliverable=True))
        requirement.check(
            now == {confirmed, successor},
            f"the live store lists {sorted(now)} after the changes; "
            f"expected {sorted({confirmed, successor})}",
        )

    @checks("STORE-ASOF-MEMBERSHIP")
    def test_store_asof_membership(self, store: KnowledgeStore, requirement: Requirement) -> None:
        early = store.add_chunk("kiwi member early", "fact", "operator")
        position = _history_of(store, requirement).history_position()
        late = store.add_chunk("kiwi member late", "fact", "operator")
        late_rejected = store.add_chunk(
            "kiwi member late rejected", "fact", "extracted", review_state="rejected"
        )
        with _as_of(store, position, requirement) as view:
            for cid in (late, late_rejected):
                requirement.check(
                    view.get(cid) is None, f"as-of get({cid!r}) returned a row written after the position"
                )
            every = _ids(view.list_chunks())
            requirement.check(
                every == {early}, f"as-of list_chunks() returned {sorted(every)}, expected [{early!r}]"
            )
            hits = {h.chunk.id for h in view.search("kiwi member", 50, deliverable=False)}
            requirement.check(
                hits == {early},
                f"as-of search(deliverable=False) returned {sorted(hits)}, expected [{early!r}]",
            )

    @checks("STORE-ASOF-EXPIRY")
    def test_store_asof_expiry(self, store: KnowledgeStore, requirement: Requirement) -> None:
        soon = datetime.now(UTC) + timedelta(seconds=2)
        fleeting = store.add_chunk("kiwi expiry fleeting", "fact", "operator", expires_at=soon)
        moved = store.add_chunk("kiwi expiry moved", "fact", "operator")
        cleared = store.add_chunk("kiwi expiry cleared", "fact", "operator", expires_at=soon)
        position = _history_of(store, requirement).history_position()
        store.set_expires_at(moved, datetime.now(UTC) - timedelta(hours=1))
        store.set_expires_at(cleared, None)
        later = soon + timedelta(days=1)
        now = _ids(store.list_chunks(deliverable=True, now=later))
        requirement.check(
            now == {cleared}, f"the live store at a later time lists {sorted(now)}, expected [{cleared!r}]"
        )
        with _as_of(store, position, requirement) as view:
            listed = _ids(view.list_chunks(deliverable=True))
            requirement.check(
                listed == {fleeting, moved, cleared},
                f"as of the position (before {soon.isoformat()}) list_chunks(deliverable=True) returned "
                f"{sorted(listed)}; every row was deliverable then",
            )
            row = view.get(cleared)
            requirement.check(
                row is not None and row.expires_at == soon,
                f"as-of get({cleared!r}) has expires_at {getattr(row, 'expires_at', None)!r}; "
                f"it was {soon!r} then",
            )
            found = {h.chunk.id for h in view.search("kiwi expiry", 50)}
            requirement.check(found == {fleeting, moved, cleared}, f"as-of search returned {sorted(found)}")

    @checks("STORE-ASOF-REPLAY")
    def test_store_asof_replay(self, store: KnowledgeStore, requirement: Requirement) -> None:
        rows = [
            store.add_chunk(f"kiwi replay {word}", "fact", src)
            for word, src in (
                ("alpha", "operator"),
                ("beta", "extracted"),
                ("gamma", "operator"),
                ("delta", "ingest"),
            )
        ]
        store.set_review_state(rows[1], "confirmed")
        opener = getattr(store, "consistent_read", None)
        requirement.check(callable(opener), f"{type(store).__name__} has no consistent_read()")
        with store.consistent_read() as seen:  # type: ignore[attr-defined]
            position_of = getattr(seen, "history_position", None)
            requirement.check(callable(position_of), "the consistent_read() view has no history_position()")
            position = seen.history_position()
            then_list = [c.id for c in seen.list_chunks(deliverable=True)]
            then_hits = [(h.chunk.id, h.rank) for h in seen.search("kiwi replay gamma", 10)]
            then_row = seen.get(rows[1])
        store.set_review_state(rows[0], "rejected")
        store.supersede(rows[2], "kiwi replay gamma again")
        store.add_chunk("kiwi replay gamma gamma gamma", "fact", "operator")
        store.set_expires_at(rows[3], datetime.now(UTC) - timedelta(minutes=1))
        with _as_of(store, position, requirement) as view:
            again_list = [c.id for c in view.list_chunks(deliverable=True)]
            again_hits = [(h.chunk.id, h.rank) for h in view.search("kiwi replay gamma", 10)]
            again_row = view.get(rows[1])
            requirement.check(
                again_list == then_list,
                f"as of the recorded position list_chunks(deliverable=True) gives {again_list}; "
                "the consistent "
                f"view gave {then_list}",
            )
            requirement.check(
                again_hits == then_hits,
                f"as of the recorded position search gives {again_hits}; "
                f"the consistent view gave {then_hits}",
            )
            requirement.check(
                again_row == then_row, f"as-of get({rows[1]!r}) reads {again_row!r}, then {then_row!r}"
            )
            inner = getattr(view, "history_position", None)
            requirement.check(
                callable(inner) and view.history_position() == position,
                "the as-of view does not report the position it was opened at",
            )

    @checks("STORE-ASOF-TIME")
    def test_store_asof_time(self, store: KnowledgeStore, requirement: Requirement) -> None:
        first = store.add_chunk("kiwi clock first", "fact", "extracted")
        _pause()
        moment = datetime.now(UTC)
        _pause()
        store.set_review_state(first, "rejected")
        second = store.add_chunk("kiwi clock second", "fact", "operator")
        with _as_of(store, moment, requirement) as view:
            listed = _ids(view.list_chunks(deliverable=True))
            requirement.check(
                listed == {first},
                f"as_of(<time between the writes>) lists {sorted(listed)} as deliverable; "
                f"expected [{first!r}] "
                f"(rejected and {second!r} came later)",
            )
        try:
            with _as_of(store, moment.replace(tzinfo=None), requirement):
                pass
        except Exception as exc:
            requirement.check(
                "timezone" in str(exc) or "aware" in str(exc),
                f"as_of(<naive time>) raised {type(exc).__name__}: {exc}; "
                "the message must say it needs an aware time",
            )
        else:
            requirement.fail("as_of(<naive datetime>) was accepted; a time without a timezone is ambiguous")


def _outcome(written: str) -> tuple[Any, ...]:
    """What a write said it did: (id, outcome, duplicate_of, superseded, near_duplicates)."""
    return (
        str(written),
        getattr(written, "outcome", None),
        getattr(written, "duplicate_of", None),
        tuple(getattr(written, "superseded", ()) or ()),
        tuple(getattr(written, "near_duplicates", ()) or ()),
    )


class StoreConsolidationChecks(_StoreBase):
    """Consolidation on write (ADR D7): duplicates, same-subject supersession, near duplicates."""

    @checks("STORE-CONSOLIDATE-DUPLICATE")
    def test_store_consolidate_duplicate(self, store: KnowledgeStore, requirement: Requirement) -> None:
        first = store.add_chunk("kiwi dup orchard  north\tfield", "fact", "operator", namespace="project:a")
        again = store.add_chunk("kiwi dup orchard north field ", "fact", "operator", namespace="project:a")
        got = _outcome(again)
        requirement.check(
            got[:3] == (first, "duplicate", first),
            f"writing {first!r}'s text again (whitespace aside) returned (id, outcome, duplicate_of) "
            f"{got[:3]}; expected ({first!r}, 'duplicate', {first!r})",
        )
        others = {
            "another scope": store.add_chunk(
                "kiwi dup orchard north field", "fact", "operator", namespace="project:b"
            ),
            "another provenance": store.add_chunk(
                "kiwi dup orchard north field", "fact", "extracted", namespace="project:a"
            ),
            "another case": store.add_chunk(
                "Kiwi dup orchard north field", "fact", "operator", namespace="project:a"
            ),
        }
        for what, written in others.items():
            requirement.check(
                str(written) != first and _outcome(written)[1] != "duplicate",
                f"the same text from {what} returned {_outcome(written)[:3]}; it is a new row, not "
                f"a duplicate of {first!r}",
            )
        store.set_review_state(first, "rejected")
        revived = store.add_chunk("kiwi dup orchard north field", "fact", "operator", namespace="project:a")
        requirement.check(
            str(revived) != first and _outcome(revived)[1] != "duplicate",
            f"copying the rejected row {first!r} returned {_outcome(revived)[:3]}; only a deliverable "
            "row absorbs copies",
        )
        ids = [str(i) for i in _ids(store.list_chunks())]
        requirement.check(
            len(ids) == 5 and first in ids and str(revived) in ids,
            f"list_chunks() holds {sorted(ids)} after six writes, one a duplicate; expected 5 rows",
        )
        batch = store.add_chunks(
            [
                {"content": "kiwi batch twin", "domain": "fact", "source_type": "operator"},
                {"content": "kiwi  batch twin", "domain": "fact", "source_type": "operator"},
                {"content": "kiwi batch other", "domain": "fact", "source_type": "operator"},
            ]
        )
        requirement.check(
            len(batch) == 3 and batch[0] == batch[1] != batch[2] and _outcome(batch[1])[1] == "duplicate",
            f"add_chunks with two copies of one text returned {[_outcome(b)[:2] for b in batch]}; the "
            "copy must return the first row's id, with outcome 'duplicate'",
        )

    @checks("STORE-CONSOLIDATE-OUTDATED")
    def test_store_consolidate_outdated(self, store: KnowledgeStore, requirement: Requirement) -> None:
        old = store.add_chunk("kiwi window is Tuesday", "fact", "operator", namespace="project:a")
        middle = store.supersede(old, "kiwi window is Wednesday", source_type="operator")
        head = store.supersede(middle, "kiwi window is Thursday", source_type="operator")
        again = store.add_chunk("kiwi window is  Tuesday", "fact", "operator", namespace="project:a")
        got = _outcome(again)
        requirement.check(
            got[:3] == (str(head), "outdated", old),
            f"writing the text of {old!r} (superseded by {middle!r}, then by {head!r}) again returned "
            f"(id, outcome, duplicate_of) {got[:3]}; expected ({str(head)!r}, 'outdated', {old!r}): "
            "storing it would deliver two rows that contradict each other",
        )
        live = [c.id for c in store.list_chunks(deliverable=True, namespace="project:a")]
        requirement.check(
            live == [str(head)],
            f"after the write the deliverable rows of the scope are {live}; "
            f"expected only the head {str(head)!r}",
        )
        elsewhere = store.add_chunk("kiwi window is Tuesday", "fact", "operator", namespace="project:b")
        requirement.check(
            str(elsewhere) not in (old, str(head)) and _outcome(elsewhere)[1] != "outdated",
            f"the same text in another scope returned {_outcome(elsewhere)[:3]}; it is a new row",
        )
        store.set_review_state(str(head), "rejected")
        revived = store.add_chunk("kiwi window is Tuesday", "fact", "operator", namespace="project:a")
        requirement.check(
            str(revived) not in (old, str(middle), str(head))
            and _outcome(revived)[1] not in ("outdated", "duplicate"),
            f"with the head {str(head)!r} rejected, writing {old!r}'s text returned {_outcome(revived)[:3]}; "
            "nothing contradicts it any more, so it is stored",
        )

    @checks("STORE-CONSOLIDATE-SUBJECT")
    def test_store_consolidate_subject(self, store: KnowledgeStore, requirement: Requirement) -> None:
        def tool(text: str, **kw: Any) -> str:
            return store.add_chunk(text, "fact", "operator", subject="deploy-tool", **kw)

        old = tool("The deploy tool is Jenkins", namespace="project:a")
        elsewhere = tool("The deploy tool is Bamboo", namespace="project:b")
        decision = tool("We decided to keep Jenkins", namespace="project:a", memory_kind="decision")
        new = tool("The deploy tool is Argo", namespace="project:a")
        got = _outcome(new)
        requirement.check(
            got[0] != old and got[1] == "superseded" and got[3] == (old,),
            f"a write naming {old!r}'s subject in its scope and kind returned (id, outcome, superseded) "
            f"{(got[0], got[1], got[3])}; expected a new id, 'superseded', ({old!r},)",
        )
        kept = store.get(old)
        requirement.check(
            kept is not None and kept.superseded_by == str(new) and not kept.is_deliverable(),
            f"after the same-subject write get({old!r}) reads {kept!r}; it must be kept, invalidated "
            f"with superseded_by {str(new)!r}",
        )
        for what, other in (("another scope", elsewhere), ("another kind", decision)):
            row = store.get(other)
            requirement.check(
                row is not None and row.is_deliverable(),
                f"the row with the same subject in {what} ({other!r}) reads {row!r}; it must be left alone",
            )
        chain = store.add_chunks(
            [
                {
                    "content": f"Releases go out on {day}",
                    "domain": "fact",
                    "source_type": "operator",
                    "subject": "release-day",
                    "namespace": "project:a",
                }
                for day in ("Monday", "Wednesday", "Friday")
            ]
        )
        links = [getattr(store.get(c), "superseded_by", "missing") for c in chain]
        requirement.check(
            links == [str(chain[1]), str(chain[2]), None],
            f"add_chunks naming subject 'release-day' three times left superseded_by links {links}; "
            f"expected [{chain[1]!r}, {chain[2]!r}, None] (a linear chain)",
        )
        heads = [
            c.id
            for c in store.list_chunks(deliverable=True, namespace="project:a")
            if c.subject == "release-day"
        ]
        requirement.check(heads == [str(chain[2])], f"deliverable rows of the subject are {heads}")
        said = [_outcome(c)[1:4:2] for c in chain]
        requirement.check(
            said == [(None, ()), ("superseded", (str(chain[0]),)), ("superseded", (str(chain[1]),))]
            or said == [("stored", ()), ("superseded", (str(chain[0]),)), ("superseded", (str(chain[1]),))],
            f"the batch's outcomes (outcome, superseded) were {said}",
        )

    @checks("STORE-CONSOLIDATE-NEAR")
    def test_store_consolidate_near(self, store: KnowledgeStore, requirement: Requirement) -> None:
        base = store.add_chunk(
            "Kiwi orchard north field harvest starts in early May every year",
            "fact",
            "operator",
            namespace="project:a",
        )
        store.add_chunk("kiwi orchard pruning happens in winter", "fact", "operator", namespace="project:a")
        store.add_chunk(
            "kiwi orchard north field harvest starts in early May each year",
            "fact",
            "operator",
            namespace="project:b",
        )
        # 10 shared words of 12 in either: Jaccard 0.833, at or above 0.8
        near = store.add_chunk(
            "kiwi orchard north field harvest starts in early May each year",
            "fact",
            "operator",
            namespace="project:a",
        )
        got = _outcome(near)
        pairs = [(str(i), float(v)) for i, v in got[4]]
        requirement.check(
            got[0] != base and got[1] == "near_duplicate" and [i for i, _ in pairs] == [base],
            f"a write sharing 10 of 12 words with {base!r} returned (id, outcome, near_duplicates) "
            f"{(got[0], got[1], got[4])}; expected a new id, 'near_duplicate', [({base!r}, 0.83)]",
        )
        requirement.check(
            all(abs(v - 10 / 12) < 0.01 for _, v in pairs),
            f"the reported similarity is {pairs}; the Jaccard index of the two word sets is 10/12",
        )
        both = _ids(store.list_chunks(deliverable=True, namespace="project:a"))
        requirement.check(
            {base, str(near)} <= both, f"deliverable rows of the scope are {sorted(both)}: nothing is merged"
        )
        apart = store.add_chunk("kiwi orchard north field notes", "fact", "operator", namespace="project:a")
        requirement.check(
            _outcome(apart)[1] in (None, "stored"),
            f"a write sharing 5 of 13 words returned outcome {_outcome(apart)[1]!r} "
            f"with {_outcome(apart)[4]}; below the threshold it is simply stored",
        )

    @checks("STORE-CONSOLIDATE-HISTORY")
    def test_store_consolidate_history(self, store: KnowledgeStore, requirement: Requirement) -> None:
        history = _history_of(store, requirement)
        first = store.add_chunk("kiwi history dup", "fact", "operator")
        store.add_chunk("kiwi history dup", "fact", "operator")
        events = [e.event for e in history.history(first)]
        requirement.check(
            events == ["created", "consolidated"],
            f"history({first!r}) after a duplicate write reads {events}; "
            "expected ['created', 'consolidated']",
        )
        old = store.add_chunk("Standup is at 9:30", "fact", "operator", subject="standup")
        new = store.add_chunk("Standup moved to 10:00", "fact", "operator", subject="standup")
        created = history.history(str(new))[:1]
        requirement.check(
            [(e.event, e.detail.get("outcome")) for e in created] == [("created", "superseded")],
            f"the superseding row's first event is {[(e.event, dict(e.detail)) for e in created]}; expected "
            "'created' with outcome 'superseded' in its detail",
        )
        last = history.history(old)[-1]
        requirement.check(
            (last.event, last.superseded_by) == ("superseded", str(new)),
            f"history({old!r}) ends with {(last.event, last.superseded_by)}; "
            f"expected ('superseded', {new!r})",
        )
        base = store.add_chunk(
            "the kiwi crates are stacked by the north gate every evening", "fact", "operator"
        )
        near = store.add_chunk(
            "the kiwi crates are stacked by the north gate each evening", "fact", "operator"
        )
        detail = history.history(str(near))[0].detail
        listed = [str(pair[0]) for pair in detail.get("near_duplicates", ())]
        requirement.check(
            listed == [base],
            f"the near duplicate's created event has detail {dict(detail)}; "
            f"its near_duplicates must list {base!r}",
        )

    @checks("STORE-CONSOLIDATE-RACE")
    def test_store_consolidate_race(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        doubled: list[str] = []
        for n in range(RACING_PAIRS):
            subject, scope = f"racing-{n}", "project:race"
            head = store.add_chunk(f"kiwi race {n} v0", "fact", "operator", subject=subject, namespace=scope)
            start = threading.Barrier(2)
            errors: list[str] = []

            def supersede(head: str = str(head), n: int = n) -> None:
                start.wait()
                try:
                    store.supersede(head, f"kiwi race {n} superseded", source_type="operator")
                except StoreError:
                    pass  # the write came first and invalidated the head: the documented refusal
                except BaseException as exc:
                    errors.append(f"supersede raised {type(exc).__name__}: {exc}")

            def add(subject: str = subject, n: int = n) -> None:
                start.wait()
                try:
                    store.add_chunk(
                        f"kiwi race {n} added", "fact", "operator", subject=subject, namespace=scope
                    )
                except BaseException as exc:
                    errors.append(f"add_chunk raised {type(exc).__name__}: {exc}")

            racers = [threading.Thread(target=supersede), threading.Thread(target=add)]
            for t in racers:
                t.start()
            for t in racers:
                t.join(60)
            requirement.check(not errors, f"racing pair {n}: {errors}")
            rows = store.list_chunks(deliverable=True, namespace=scope)
            heads = sorted(c.id for c in rows if c.subject == subject)
            if len(heads) != 1:
                doubled.append(f"{subject}: {heads}")
        requirement.check(
            not doubled,
            f"{len(doubled)} of {RACING_PAIRS} subjects did not end with exactly one deliverable row after "
            f"a supersede and a same-subject add raced (subject: deliverable ids): {doubled[:3]}",
        )


#: STORE-EVENT-TIME-*: when the kit's conversation turns were said (as LoCoMo dates them).
_MAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
_JUNE = datetime(2023, 6, 1, tzinfo=UTC)
_JULY = datetime(2023, 7, 14, 9, 30, tzinfo=UTC)


class StoreEventTimeChecks(_StoreBase):
    """The event time (``occurred_at``): written by every write, kept by supersession, filtered
    on, and refused when it is not an aware time."""

    @checks("STORE-EVENT-TIME-ROUND-TRIP")
    def test_store_event_time_round_trip(self, store: KnowledgeStore, requirement: Requirement) -> None:
        before = datetime.now(UTC)
        text = _get(
            store,
            store.add_chunk(
                "kiwi said in may", "general", "operator", occurred_at="2023-05-08T15:56:00+02:00"
            ),
            requirement,
        )
        tokyo = timezone(timedelta(hours=9))
        aware = _get(
            store,
            store.add_chunk("kiwi said in july", "general", "operator", occurred_at=_JULY.astimezone(tokyo)),
            requirement,
        )
        plain = _get(store, store.add_chunk("kiwi said some time", "general", "operator"), requirement)
        for chunk, want, how in ((text, _MAY, "ISO text with +02:00"), (aware, _JULY, "a +09:00 datetime")):
            requirement.check(
                chunk.occurred_at == want and _aware_utc(chunk.occurred_at),
                f"occurred_at written as {how} for {want.isoformat()} read back as {chunk.occurred_at!r}",
            )
        requirement.check(
            plain.occurred_at is None, f"a row written without occurred_at reads {plain.occurred_at!r}"
        )
        requirement.check(
            before - _SLACK <= text.created_at <= datetime.now(UTC) + _SLACK,
            f"created_at is {text.created_at.isoformat()}, not the time of the write: the event time "
            "must not replace it",
        )
        ids = store.add_chunks(
            [
                {"content": "kiwi batch may", "source_type": "operator", "occurred_at": _MAY},
                {
                    "content": "kiwi batch june",
                    "source_type": "operator",
                    "occurred_at": "2023-06-01T00:00:00Z",
                },
                {"content": "kiwi batch none", "source_type": "operator"},
            ]
        )
        got = [_get(store, cid, requirement).occurred_at for cid in ids]
        requirement.check(
            got == [_MAY, _JUNE, None], f"add_chunks: occurred_at read back as {got}, not [May, June, None]"
        )

    @checks("STORE-EVENT-TIME-DISTINCT")
    def test_store_event_time_distinct(self, store: KnowledgeStore, requirement: Requirement) -> None:
        first = store.add_chunk("Caroline: thanks, see you!", "general", "conversation", occurred_at=_MAY)
        again = store.add_chunk("Caroline: thanks, see you!", "general", "conversation", occurred_at=_JULY)
        requirement.check(
            str(first) != str(again),
            f"the same turn said on {_MAY.date()} and {_JULY.date()} returned one id ({first!r}): the "
            "second event was folded into the first",
        )
        times = (_get(store, first, requirement).occurred_at, _get(store, again, requirement).occurred_at)
        requirement.check(times == (_MAY, _JULY), f"the two turns read back with occurred_at {times}")

    @checks("STORE-EVENT-TIME-SUPERSEDE")
    def test_store_event_time_supersede(self, store: KnowledgeStore, requirement: Requirement) -> None:
        head = store.add_chunk("kiwi party at the old hall", "general", "operator", occurred_at=_MAY)
        got = []
        for content, given in (
            ("kiwi party at the old hall, room 2", {}),
            ("kiwi party moved to the new hall", {"occurred_at": _JULY}),
            ("kiwi party moved to the new hall, room 3", {"occurred_at": None}),
        ):
            head = store.supersede(head, content, **given)
            got.append(_get(store, head, requirement).occurred_at)  # each read as it is written
        requirement.check(
            got == [_MAY, _JULY, _JULY],
            f"superseding rows read occurred_at {got}: expected the older row's (May) when none is "
            "given, the newer row's own (July) when given, and the older one's again for None",
        )

    @checks("STORE-EVENT-TIME-FILTER")
    def test_store_event_time_filter(self, store: KnowledgeStore, requirement: Requirement) -> None:
        scope = "project:kit-time"
        may = store.add_chunk("kiwi picnic in may", "general", "operator", namespace=scope, occurred_at=_MAY)
        june = store.add_chunk(
            "kiwi picnic in june", "general", "operator", namespace=scope, occurred_at=_JUNE
        )
        july = store.add_chunk(
            "kiwi picnic in july", "general", "operator", namespace=scope, occurred_at=_JULY
        )
        store.add_chunk("kiwi picnic some day", "general", "operator", namespace=scope)
        other = store.add_chunk("kiwi picnic elsewhere", "general", "operator", occurred_at=_JUNE)
        windows: tuple[tuple[dict[str, Any], set[str]], ...] = (
            ({"occurred_after": _JUNE}, {june, july, other}),
            ({"occurred_after": "2023-06-01T00:00:00Z"}, {june, july, other}),
            ({"occurred_before": "2023-06-01T02:00:00+02:00"}, {may}),
            ({"occurred_after": "2023-05-09T00:00:00Z", "occurred_before": _JULY}, {june, other}),
            ({"occurred_after": _JUNE, "namespaces": [scope]}, {june, july}),
            ({"occurred_after": _JULY + timedelta(days=1)}, set()),
        )
        for options, want in windows:
            listed = _ids(store.list_chunks(**options))
            requirement.check(
                listed == want, f"list_chunks({options}) returned {sorted(listed)}, not {sorted(want)}"
            )
            found = _hit_ids(store, "kiwi picnic", **options)
            requirement.check(
                found == want,
                f"search('kiwi picnic', {options}) returned {sorted(found)}, not {sorted(want)}",
            )

    @checks("STORE-EVENT-TIME-INVALID")
    def test_store_event_time_invalid(self, store: KnowledgeStore, requirement: Requirement) -> None:
        store.add_chunk("kiwi already there", "general", "operator")
        count = len(store.list_chunks())
        bad: tuple[object, ...] = (
            "2023-05-08",
            "2023-05-08T13:56:00",
            "next tuesday",
            datetime(2023, 5, 8),
            20230508,
        )
        for value in bad:
            for how, write in (
                (
                    "add_chunk",
                    lambda v: store.add_chunk("kiwi bad time", "general", "operator", occurred_at=v),
                ),
                (
                    "add_chunks",
                    lambda v: store.add_chunks(
                        [
                            {"content": "kiwi good row", "source_type": "operator", "occurred_at": _MAY},
                            {"content": "kiwi bad row", "source_type": "operator", "occurred_at": v},
                        ]
                    ),
                ),
            ):
                try:
                    write(value)
                except Exception as exc:
                    requirement.check(
                        "occurred_at" in str(exc),
                        f"{how} refused occurred_at={value!r} with {exc!r}, not naming it",
                    )
                else:
                    requirement.fail(f"{how} accepted occurred_at={value!r}, which is not an aware time")
                after = len(store.list_chunks())
                requirement.check(
                    after == count, f"{how} with occurred_at={value!r} stored {after - count} rows"
                )
        for name in ("occurred_after", "occurred_before"):
            bound: dict[str, Any] = {name: "not a time"}
            for read in ("list_chunks", "search"):
                try:
                    if read == "list_chunks":
                        store.list_chunks(**bound)
                    else:
                        store.search("kiwi", 5, **bound)
                except Exception as exc:
                    requirement.check(
                        name in str(exc), f"{read}({name}='not a time') raised {exc!r}, not naming it"
                    )
                else:
                    requirement.fail(f"{read}({name}='not a time') was accepted")


class KitEmbedder:
    """A deterministic embedder for the vector-space checks: hashed words, so a row's own text
    is its nearest neighbour; ``name`` and ``dimensions`` as given."""

    def __init__(self, name: str, dimensions: int) -> None:
        self.name = name
        self.dimensions = dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                slot = int.from_bytes(digest[:4], "little") % self.dimensions
                vector[slot] += 1.0 if digest[4] & 1 else -1.0
            out.append(vector)
        return out


class StoreVectorSpaceChecks(_StoreBase):
    """The recorded vector space: which embedder made a store's vectors, and the way to change it."""

    def _reopen(self, request: pytest.FixtureRequest) -> Callable[[Embedder | None], Any]:
        reopen: Callable[[Embedder | None], Any] = request.getfixturevalue("reopen")
        return reopen

    @checks("STORE-VECTOR-SPACE-RECORDED")
    def test_store_vector_space_recorded(
        self, request: pytest.FixtureRequest, requirement: Requirement
    ) -> None:
        self._require(requirement)
        reopen = self._reopen(request)
        plain = reopen(None)
        plain.add_chunk("written before any embedder", source_type="operator")
        store = reopen(KitEmbedder("kit:model-a", 12))
        store.add_chunk(RELEVANCE_FILLER[0], source_type="operator")
        store.add_chunk(RELEVANCE_FILLER[1], source_type="operator")
        requirement.check(
            tuple(store.vector_space()) == ("kit:model-a", 12),
            f"vector_space() is {store.vector_space()!r}, not ('kit:model-a', 12)",
        )
        requirement.check(
            store.vectorless_count() == 1,
            f"vectorless_count() is {store.vectorless_count()}: one row was written without an embedder",
        )

    @checks("STORE-VECTOR-SPACE-MISMATCH")
    def test_store_vector_space_mismatch(
        self, request: pytest.FixtureRequest, requirement: Requirement
    ) -> None:
        from contextplane.errors import VectorSpaceError

        self._require(requirement)
        reopen = self._reopen(request)
        reopen(KitEmbedder("kit:model-a", 12)).add_chunk(RELEVANCE_FILLER[0], source_type="operator")
        for other in (KitEmbedder("kit:model-b", 12), KitEmbedder("kit:model-a", 16)):
            try:
                reopen(other)
            except VectorSpaceError as exc:
                text = str(exc)
                requirement.check(
                    "kit:model-a" in text and other.name in text and str(other.dimensions) in text,
                    f"the error does not name both embedders: {text}",
                )
                requirement.check(
                    "contextplane memory reindex --rebuild" in text,
                    f"the error does not name the fix: {text}",
                )
            else:
                requirement.check(False, f"opening with {other.name!r} ({other.dimensions}) was not refused")
        space = tuple(reopen(None).vector_space())
        requirement.check(space == ("kit:model-a", 12), f"a refused open changed the space to {space!r}")

    @checks("STORE-VECTOR-REBUILD")
    def test_store_vector_rebuild(self, request: pytest.FixtureRequest, requirement: Requirement) -> None:
        from contextplane.errors import VectorSpaceError

        self._require(requirement)
        reopen = self._reopen(request)
        first = reopen(KitEmbedder("kit:model-a", 12))
        ids = [first.add_chunk(fact, source_type="operator") for fact in RELEVANCE_FILLER[:4]]
        new = KitEmbedder("kit:model-b", 20)
        done = reopen(None).rebuild_vectors(new)
        requirement.check(done == len(ids), f"rebuild_vectors embedded {done} rows, not {len(ids)}")
        store = reopen(new)
        requirement.check(
            tuple(store.vector_space()) == ("kit:model-b", 20) and store.vectorless_count() == 0,
            f"after the rebuild: space {store.vector_space()!r}, "
            f"{store.vectorless_count()} rows without a vector",
        )
        nearest = store.vector_neighbours(RELEVANCE_FILLER[2], 1)
        requirement.check(
            [str(i) for i in nearest] == [str(ids[2])],
            f"the vector leg found {nearest} for its own row {ids[2]}",
        )
        try:
            reopen(KitEmbedder("kit:model-a", 12))
        except VectorSpaceError:
            pass
        else:
            requirement.check(False, "after the rebuild the old embedder still opens the store")


def _restore_rows() -> list[dict[str, Any]]:
    """STORE-RESTORE-EXACT's export: a row of each lifecycle shape, ids a fresh store has not
    handed out, times of their own (as ``memory export`` writes them: ISO text)."""
    at = "2024-03-0{}T10:1{}:05.123456Z".format
    base = {"domain": "general", "source_type": "operator", "memory_kind": "fact", "delivery_policy": None,
            "review_state": "confirmed", "namespace": "", "heading": "", "source": "", "subject": "",
            "epoch": "", "invalidated_at": None, "invalidation_reason": None, "expires_at": None,
            "occurred_at": None}
    return [
        {**base, "id": "101", "content": "the kiwi crate ships on monday", "subject": "kiwi-ship",
         "created_at": at(1, 0), "updated_at": at(2, 1), "invalidated_at": at(2, 1),
         "invalidation_reason": "superseded_by:102"},
        {**base, "id": "102", "content": "the kiwi crate ships on tuesday", "subject": "kiwi-ship",
         "created_at": at(2, 1), "updated_at": at(2, 1), "occurred_at": "2023-05-08T13:56:00.000000Z",
         "heading": "Shipping", "source": "runbook.md", "epoch": "q2"},
        {**base, "id": "104", "content": "a mango fact found to be wrong", "created_at": at(3, 2),
         "updated_at": at(4, 3), "invalidated_at": at(4, 3), "invalidation_reason": "found wrong"},
        {**base, "id": "105", "content": "a papaya promotion that expired", "created_at": at(3, 3),
         "updated_at": at(3, 3), "expires_at": "2024-04-01T00:00:00.000000Z", "memory_kind": "note"},
        {**base, "id": "107", "content": "prefers lychee in session notes", "source_type": "extracted",
         "review_state": "pending", "namespace": "session:s-1", "memory_kind": "profile",
         "delivery_policy": "always", "created_at": at(5, 4), "updated_at": at(6, 5)},
        {**base, "id": "108", "content": "a rejected guava note", "source_type": "agent",
         "review_state": "rejected", "memory_kind": "note", "namespace": "project:p-1",
         "delivery_policy": "on_demand", "created_at": at(6, 5), "updated_at": at(7, 6)},
    ]


def _as_written(row: dict[str, Any]) -> dict[str, Any]:
    """A restore row with its times as the aware datetimes ``get`` must return."""
    return {
        k: datetime.fromisoformat(v) if k.endswith("_at") and v is not None else v for k, v in row.items()
    }


class StoreRestoreChecks(_StoreBase):
    """Exact restore (``ExactRestore``): what ``memory import`` needs to round-trip an export."""

    @checks("STORE-RESTORE-EXACT")
    def test_store_restore_exact(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        restore = getattr(store, "restore_chunks", None)
        if restore is None:
            requirement.fail("the store declares exact_restore but has no restore_chunks(rows)")
        rows = _restore_rows()
        started = datetime.now(UTC)
        ids = [str(i) for i in restore(rows, by="kit")]
        requirement.check(ids == [r["id"] for r in rows], f"restore_chunks returned {ids}, not the ids given")
        for row in rows:
            chunk = _get(store, row["id"], requirement)
            for name, value in _as_written(row).items():
                got = getattr(chunk, name)
                requirement.check(
                    got == value,
                    f"row {row['id']}: {name} was restored as {value!r} and read back as {got!r}",
                )
        listed = [c.id for c in store.list_chunks()]
        requirement.check(listed == ids, f"list_chunks() gives {listed} after the restore, not {ids}")
        found = [h.chunk.id for h in store.search("kiwi crate ships", 10)]
        requirement.check(found == ["102"], f"search for the restored head found {found}, not ['102']")
        if isinstance(store, MemoryHistory):
            for row in rows:
                events = store.history(row["id"])
                first = events[0] if events else None
                requirement.check(
                    len(events) == 1 and first is not None and first.event == "created",
                    f"row {row['id']}: history {[e.event for e in events]}, not one 'created' event",
                )
                assert first is not None
                requirement.check(
                    first.at >= started - _SLACK and "restored" in str(first.detail.get("note", "")),
                    f"row {row['id']}: its 'created' event is at {first.at} with detail "
                    f"{dict(first.detail)}, not at the restore with a note saying it was restored",
                )
                requirement.check(
                    first.invalidated_at == _as_written(row)["invalidated_at"]
                    and first.review_state == row["review_state"],
                    f"row {row['id']}: its 'created' event leaves state {first.review_state}, "
                    f"{first.invalidated_at}, not the row's as restored",
                )
        new = store.add_chunk("a fresh kiwi memory written after the restore", source_type="operator")
        requirement.check(str(new) not in ids, f"a write after the restore got id {new}, a restored row's")
        requirement.check(
            _get(store, rows[1]["id"], requirement).content == rows[1]["content"],
            "a write after the restore changed a restored row",
        )
        clash = [{**rows[1], "content": "a different text under a held id"}, {**rows[1], "id": "990"}]
        clash[1]["content"] = "a row that must not be stored"
        try:
            restore(clash)
        except StoreError as exc:
            requirement.check(
                rows[1]["id"] in str(exc), f"the refusal does not name id {rows[1]['id']}: {exc}"
            )
        else:
            requirement.fail(f"restoring id {rows[1]['id']}, which the store holds, was not refused")
        kept = _get(store, rows[1]["id"], requirement).content
        requirement.check(
            store.get("990") is None and kept == rows[1]["content"],
            "a refused restore stored or changed rows",
        )


class KnowledgeStoreConformance(
    StoreRestoreChecks,
    StoreEventTimeChecks,
    StoreVectorSpaceChecks,
    StoreConsolidationChecks,
    StoreAsyncChecks,
    StoreHistoryChecks,
    StoreConsistencyChecks,
    StoreRobustnessChecks,
    StoreMigrationChecks,
    StoreScopeChecks,
    StoreLifecycleChecks,
    StoreDeliveryChecks,
    StoreWriteChecks,
):
    """Every store check. Subclass it, define ``store`` (and ``legacy_store`` with the
    "migration" capability), and list ``known_gaps`` you accept for now. Bases are listed
    last-first because pytest collects the most basic class's checks first."""
