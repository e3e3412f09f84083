"""D7's write path: what a write stamps and the review state it starts in (steps 1 and 2), then
supersession (insert, then invalidate; never delete) and expiry (steps 3 and 4).

Why together: both are checked by writing through the protocol and reading the row back; every
later group (delivery, history, consolidation) assumes a store that passes these.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from contextplane.store.protocol import KnowledgeStore
from contextplane.testing._base import checks
from contextplane.testing.requirements import Requirement
from contextplane.testing.stores.common import (
    _SLACK,
    D4_TABLE,
    REVIEW_BY_SOURCE,
    _aware_utc,
    _get,
    _ids,
    _StoreBase,
)


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
