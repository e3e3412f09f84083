"""The store kit on real stores (it must pass) and on faulty ones (it must fail, by id).

``TestSQLiteStore`` is how our embedded store runs the kit: one class, its fixtures, the
capabilities it declares. ``TestInMemoryStore`` runs the same kit on a second, independent
implementation, so a pass means "meets the contract", not "is SQLite".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest

from contextplane.store import SQLiteKnowledgeStore
from contextplane.store.migrate import V1_SCHEMA_SQL
from contextplane.testing import KnowledgeStoreConformance, LegacyRow, requirements_of
from tests.conformance.helpers import run_pytest
from tests.conformance.memstores import InMemoryKnowledgeStore

HERE = Path(__file__).resolve().parent


class TestSQLiteStore(KnowledgeStoreConformance):
    capabilities = frozenset(
        {"migration", "concurrent_writes", "consistent_read", "vector_space", "exact_restore", "following"}
    )

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SQLiteKnowledgeStore]:
        with SQLiteKnowledgeStore(tmp_path / "memory.sqlite3") as store:
            yield store

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Iterator[Callable[[Any], SQLiteKnowledgeStore]]:
        opened: list[SQLiteKnowledgeStore] = []

        def make(embedder: Any) -> SQLiteKnowledgeStore:
            opened.append(SQLiteKnowledgeStore(tmp_path / "vectors.sqlite3", embedder=embedder))
            return opened[-1]

        yield make
        for store in opened:
            store.close()

    @pytest.fixture
    def legacy_store(self, tmp_path: Path) -> Iterator[Callable[[Sequence[LegacyRow]], SQLiteKnowledgeStore]]:
        opened: list[SQLiteKnowledgeStore] = []

        def make(rows: Sequence[LegacyRow]) -> SQLiteKnowledgeStore:
            path = tmp_path / f"legacy-{len(opened)}.sqlite3"
            conn = apsw.Connection(str(path))
            conn.execute(V1_SCHEMA_SQL)
            conn.executemany(
                "INSERT INTO chunks(content, domain, source_type, created_at, updated_at) "
                "VALUES (?, ?, ?, '2025-01-01T00:00:00.000000Z', '2025-01-01T00:00:00.000000Z')",
                list(rows),
            )
            conn.close()
            opened.append(SQLiteKnowledgeStore(path))
            return opened[-1]

        yield make
        for store in opened:
            store.close()


class TestInMemoryStore(KnowledgeStoreConformance):
    capabilities = frozenset({"concurrent_writes", "consistent_read", "exact_restore", "following"})

    @pytest.fixture
    def store(self) -> InMemoryKnowledgeStore:
        return InMemoryKnowledgeStore()


def test_faulty_stores_fail_with_the_named_ids(tmp_path: Path) -> None:
    run = run_pytest([HERE / "cases_faulty_stores.py"], tmp_path)
    assert run.outcomes, run.stdout + run.stderr
    every = {r.id for r in requirements_of("store")}
    expiry = run.by_class("TestIgnoresExpiry")
    supersede = run.by_class("TestDeletesOnSupersede")
    assert set(expiry) == set(supersede) == every  # the whole kit ran on both
    # A store that forgets expiry fails it now and as of the past.
    assert run.failing("TestIgnoresExpiry") == {"STORE-DELIVERABLE-EXPIRED", "STORE-ASOF-EXPIRY"}
    # Deleting on supersede loses the audit trail, so the history and as-of checks that
    # supersede fail with the supersession ones.
    assert run.failing("TestDeletesOnSupersede") == {
        "STORE-DELIVERABLE-SUPERSEDED",
        "STORE-SUPERSEDE-ORDER",
        "STORE-SUPERSEDE-CHAIN",
        "STORE-HISTORY-APPEND",
        "STORE-ASOF-LIFECYCLE",
        "STORE-ASOF-REPLAY",
        # With the superseded row gone, its text written again is a second, contradicting head.
        "STORE-CONSOLIDATE-OUTDATED",
    }
    # The failure names the id and the contract sentence, then what the kit saw.
    message = expiry["STORE-DELIVERABLE-EXPIRED"].message
    assert message.startswith(
        "contextplane.testing.requirements.ConformanceFailure: [STORE-DELIVERABLE-EXPIRED] A row whose "
        "expires_at is at or before `now` is not deliverable"
    ), message
    assert "expired an hour ago" in message
    assert "supersede deleted the old row" in supersede["STORE-SUPERSEDE-ORDER"].message
    # A store whose as-of view shows the present fails every as-of requirement, and only those.
    present = run.by_class("TestPresentAsOf")
    assert set(present) == every
    assert run.failing("TestPresentAsOf") == {
        "STORE-ASOF-LIFECYCLE",
        "STORE-ASOF-MEMBERSHIP",
        "STORE-ASOF-EXPIRY",
        "STORE-ASOF-REPLAY",
        "STORE-ASOF-TIME",
        "STORE-FOLLOWING-ASOF",  # it declares "following": the next row as of the past too
    }
    assert "rejected, superseded and invalidated only afterwards" in present["STORE-ASOF-LIFECYCLE"].message
    assert "'6' was written afterwards (no row then)" in present["STORE-FOLLOWING-ASOF"].message
    # following: a next row from another scope, an undeliverable one, one the view cannot see.
    across = run.by_class("TestFollowsAcrossScopes")
    assert set(across) == every
    assert run.failing("TestFollowsAcrossScopes") == {"STORE-FOLLOWING"}
    assert "expected {'1': '5', '5': '8', '2': '6'} (the next row of each id's own scope and source" in (
        across["STORE-FOLLOWING"].message
    )
    assert run.failing("TestFollowsUndeliverable") == {
        "STORE-FOLLOWING-DELIVERABLE",
        "STORE-FOLLOWING-ASOF",
        "STORE-FOLLOWING-ASYNC",
    }
    assert "gave {'1': '2'}; expected {'1': '3'} (the rejected row is stepped over" in (
        run.by_class("TestFollowsUndeliverable")["STORE-FOLLOWING-DELIVERABLE"].message
    )
    assert run.failing("TestFollowsThroughViews") == {"STORE-FOLLOWING-ASOF"}
    assert "through a consistent_read() view opened before '3' was written" in (
        run.by_class("TestFollowsThroughViews")["STORE-FOLLOWING-ASOF"].message
    )
    # Hits without a relevance leave the floor nothing to apply: that requirement alone fails.
    blind = run.by_class("TestNoRelevance")
    assert set(blind) == every
    assert run.failing("TestNoRelevance") == {"STORE-SEARCH-RELEVANCE"}
    assert "relevance None; expected a float in [0, 1]" in blind["STORE-SEARCH-RELEVANCE"].message
    # A search whose pool stops growing with k fails the depth requirement alone.
    shallow = run.by_class("TestShallowPool")
    assert set(shallow) == every
    assert run.failing("TestShallowPool") == {"STORE-SEARCH-DEPTH"}
    assert "returned 12 of the 40 rows" in shallow["STORE-SEARCH-DEPTH"].message
    # A store that keeps every write as given fails the consolidation requirements, and only those.
    unconsolidated = run.by_class("TestStoresEveryWrite")
    assert set(unconsolidated) == every
    assert run.failing("TestStoresEveryWrite") == {
        "STORE-CONSOLIDATE-DUPLICATE",
        "STORE-CONSOLIDATE-OUTDATED",
        "STORE-CONSOLIDATE-SUBJECT",
        "STORE-CONSOLIDATE-NEAR",
        "STORE-CONSOLIDATE-HISTORY",
        "STORE-CONSOLIDATE-RACE",
    }
    assert "expected ('1', 'duplicate', '1')" in unconsolidated["STORE-CONSOLIDATE-DUPLICATE"].message
    # A store that takes occurred_at and drops it fails every event-time requirement, and only those.
    timeless = run.by_class("TestDropsEventTime")
    assert set(timeless) == every
    assert (
        run.failing("TestDropsEventTime")
        == {r for r in every if r.startswith("STORE-EVENT-TIME-")}
        == {
            "STORE-EVENT-TIME-ROUND-TRIP",
            "STORE-EVENT-TIME-DISTINCT",
            "STORE-EVENT-TIME-SUPERSEDE",
            "STORE-EVENT-TIME-FILTER",
            "STORE-EVENT-TIME-INVALID",
        }
    )
    assert "accepted occurred_at='2023-05-08'" in timeless["STORE-EVENT-TIME-INVALID"].message
    # A supersede that writes its row outside the lock same-subject writes decide under leaves
    # two heads when the two race (issue 26); nothing else notices.
    unlocked = run.by_class("TestUnlockedSupersede")
    assert set(unlocked) == every
    assert run.failing("TestUnlockedSupersede") == {"STORE-CONSOLIDATE-RACE"}
    assert "did not end with exactly one deliverable row" in unlocked["STORE-CONSOLIDATE-RACE"].message
    # A restore that stamps its own times fails exact restore alone (the capability declared).
    stamped = run.by_class("TestStampsOnRestore")
    assert set(stamped) == every
    assert run.failing("TestStampsOnRestore") == {"STORE-RESTORE-EXACT"}
    assert "row 101: created_at was restored as datetime.datetime(2024, 3, 1, 10, 10, 5, 123456" in (
        stamped["STORE-RESTORE-EXACT"].message
    )
    assert expiry["STORE-RESTORE-EXACT"].outcome == "skipped"
    assert "capability 'exact_restore' not declared" in expiry["STORE-RESTORE-EXACT"].message
    assert expiry["STORE-FOLLOWING"].outcome == "skipped"
    assert "capability 'following' not declared" in expiry["STORE-FOLLOWING"].message
    # Undeclared capabilities skip, naming the capability.
    assert expiry["STORE-BACKFILL-TABLE"].outcome == "skipped"
    assert "capability 'migration' not declared" in expiry["STORE-BACKFILL-TABLE"].message
    assert "requirement STORE-DELIVERABLE-EXPIRED: A row whose expires_at" in run.stdout  # plugin section
    # ... and where it is explained: a file the reader has (here the checkout's docs/).
    reference = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
    assert f"reference: {reference}#store-deliverable-expired" in run.stdout
