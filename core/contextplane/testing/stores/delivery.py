"""ADR D6's deliverable filter (rejected, expired and invalidated rows are never delivered) and
D4's scope allow-list, for listing and searching alike.

Why together: both decide which rows a composition may see at all; a store that fails them
leaks a row into a prompt, whatever it does otherwise.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from contextplane.store.protocol import KnowledgeStore
from contextplane.testing._base import checks
from contextplane.testing.requirements import Requirement
from contextplane.testing.stores.common import _get, _hit_ids, _ids, _StoreBase


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
