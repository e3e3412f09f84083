"""The D4 backfill (and the D7 review-state backfill) for a store with an earlier schema, checked
through the author's ``legacy_store`` fixture (capability "migration").

Why its own module: only a store that had a pre-D4 schema declares it, and its rows are the
version-1 shape (``LegacyRow``), not anything a current write makes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from contextplane.store.protocol import KnowledgeStore
from contextplane.testing._base import checks
from contextplane.testing.requirements import Requirement
from contextplane.testing.stores.common import D4_TABLE, LegacyRow, _as_of, _history_of, _ids, _StoreBase


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
