"""Exact restore (capability "exact_restore", ``ExactRestore``): what ``memory import`` needs to
round-trip an export, ids, times and supersession links kept, and an id the store holds
refused.

Why its own module: only a store that restores exactly declares it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from contextplane.errors import StoreError
from contextplane.store.protocol import KnowledgeStore, MemoryHistory
from contextplane.testing._base import checks
from contextplane.testing.requirements import Requirement
from contextplane.testing.stores.common import _SLACK, _get, _StoreBase


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
