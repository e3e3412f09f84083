"""Deliberately faulty stores under the store kit (run by test_store_kit.py in a child pytest;
the file name keeps the main run from collecting it)."""

from __future__ import annotations

import pytest

from contextplane.testing import KnowledgeStoreConformance
from tests.conformance.memstores import (
    DeletesOnSupersedeStore,
    DropsEventTimeStore,
    FollowsAcrossScopesStore,
    FollowsThroughViewsStore,
    FollowsUndeliverableStore,
    IgnoresExpiryStore,
    NoRelevanceStore,
    PresentAsOfStore,
    ShallowPoolStore,
    StampsOnRestoreStore,
    StoresEveryWriteStore,
    UnlockedSupersedeStore,
)


class TestIgnoresExpiry(KnowledgeStoreConformance):
    @pytest.fixture
    def store(self) -> IgnoresExpiryStore:
        return IgnoresExpiryStore()


class TestDeletesOnSupersede(KnowledgeStoreConformance):
    @pytest.fixture
    def store(self) -> DeletesOnSupersedeStore:
        return DeletesOnSupersedeStore()


class TestPresentAsOf(KnowledgeStoreConformance):
    capabilities = frozenset({"concurrent_writes", "consistent_read", "following"})

    @pytest.fixture
    def store(self) -> PresentAsOfStore:
        return PresentAsOfStore()


class TestNoRelevance(KnowledgeStoreConformance):
    @pytest.fixture
    def store(self) -> NoRelevanceStore:
        return NoRelevanceStore()


class TestShallowPool(KnowledgeStoreConformance):
    @pytest.fixture
    def store(self) -> ShallowPoolStore:
        return ShallowPoolStore()


class TestStoresEveryWrite(KnowledgeStoreConformance):
    @pytest.fixture
    def store(self) -> StoresEveryWriteStore:
        return StoresEveryWriteStore()


class TestDropsEventTime(KnowledgeStoreConformance):
    @pytest.fixture
    def store(self) -> DropsEventTimeStore:
        return DropsEventTimeStore()

class TestUnlockedSupersede(KnowledgeStoreConformance):
    @pytest.fixture
    def store(self) -> UnlockedSupersedeStore:
        return UnlockedSupersedeStore()


class TestStampsOnRestore(KnowledgeStoreConformance):
    capabilities = frozenset({"concurrent_writes", "consistent_read", "exact_restore"})

    @pytest.fixture
    def store(self) -> StampsOnRestoreStore:
        return StampsOnRestoreStore()


class TestFollowsAcrossScopes(KnowledgeStoreConformance):
    capabilities = frozenset({"concurrent_writes", "consistent_read", "following"})

    @pytest.fixture
    def store(self) -> FollowsAcrossScopesStore:
        return FollowsAcrossScopesStore()


class TestFollowsUndeliverable(KnowledgeStoreConformance):
    capabilities = frozenset({"concurrent_writes", "consistent_read", "following"})

    @pytest.fixture
    def store(self) -> FollowsUndeliverableStore:
        return FollowsUndeliverableStore()


class TestFollowsThroughViews(KnowledgeStoreConformance):
    capabilities = frozenset({"concurrent_writes", "consistent_read", "following"})

    @pytest.fixture
    def store(self) -> FollowsThroughViewsStore:
        return FollowsThroughViewsStore()
