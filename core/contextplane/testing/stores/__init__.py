"""Conformance checks for knowledge stores: the D4 attributes, the D6 deliverable filter and the
D7 write lifecycle, plus search safety, concurrency and round-trips.

The expected values are written out here from the ADR's tables rather than imported from
``contextplane.memory``: the kit states the contract, so a store that shares a bug with the
reference implementation's helpers still fails. Every check talks to the store only through
the ``KnowledgeStore`` protocol.

Split by job, one group of checks a module (``writes``, ``delivery``, ``migration``,
``robustness``, ``history``, ``consolidation``, ``event_time``, ``vectors``, ``restore``,
``following``) over
what they share (``common``); ``KnowledgeStoreConformance`` below is every group at once. This
package is the import path the kit had as one module: every name it had is re-exported (a store
author's ``from contextplane.testing import ...`` and the requirement ids are unchanged), and a
name set here is set too in the module that reads it (``contextplane.shims``). Being a package,
its modules are covered by the kit's assertion rewriting.
"""

from __future__ import annotations

from contextplane.shims import patch_through
from contextplane.testing.stores import (
    common,
    consolidation,
    delivery,
    event_time,
    following,
    history,
    migration,
    restore,
    robustness,
    vectors,
    writes,
)
from contextplane.testing.stores.common import (
    _SLACK,
    D4_TABLE,
    HOSTILE_QUERIES,
    RACING_PAIRS,
    RELEVANCE_FILLER,
    REVIEW_BY_SOURCE,
    LegacyRow,
    _as_of,
    _aware_utc,
    _get,
    _history_of,
    _hit_ids,
    _ids,
    _pause,
    _shape,
    _StoreBase,
)
from contextplane.testing.stores.consolidation import (
    StoreConsolidationChecks,
    _outcome,
)
from contextplane.testing.stores.delivery import (
    StoreDeliveryChecks,
    StoreScopeChecks,
)
from contextplane.testing.stores.event_time import (
    _JULY,
    _JUNE,
    _MAY,
    StoreEventTimeChecks,
)
from contextplane.testing.stores.following import (
    UNKNOWN_IDS,
    StoreFollowingChecks,
)
from contextplane.testing.stores.history import (
    StoreHistoryChecks,
)
from contextplane.testing.stores.migration import (
    StoreMigrationChecks,
)
from contextplane.testing.stores.restore import (
    StoreRestoreChecks,
    _as_written,
    _restore_rows,
)
from contextplane.testing.stores.robustness import (
    StoreAsyncChecks,
    StoreConsistencyChecks,
    StoreRobustnessChecks,
)
from contextplane.testing.stores.vectors import (
    KitEmbedder,
    StoreVectorSpaceChecks,
)
from contextplane.testing.stores.writes import (
    StoreLifecycleChecks,
    StoreWriteChecks,
)


class KnowledgeStoreConformance(
    StoreFollowingChecks,
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


patch_through(
    __name__,
    (
        common,
        writes,
        delivery,
        migration,
        robustness,
        history,
        consolidation,
        event_time,
        vectors,
        restore,
        following,
    ),
)

__all__ = [
    "D4_TABLE",
    "HOSTILE_QUERIES",
    "RACING_PAIRS",
    "RELEVANCE_FILLER",
    "REVIEW_BY_SOURCE",
    "UNKNOWN_IDS",
    "_JULY",
    "_JUNE",
    "_MAY",
    "_SLACK",
    "KitEmbedder",
    "KnowledgeStoreConformance",
    "LegacyRow",
    "StoreAsyncChecks",
    "StoreConsistencyChecks",
    "StoreConsolidationChecks",
    "StoreDeliveryChecks",
    "StoreEventTimeChecks",
    "StoreFollowingChecks",
    "StoreHistoryChecks",
    "StoreLifecycleChecks",
    "StoreMigrationChecks",
    "StoreRestoreChecks",
    "StoreRobustnessChecks",
    "StoreScopeChecks",
    "StoreVectorSpaceChecks",
    "StoreWriteChecks",
    "_StoreBase",
    "_as_of",
    "_as_written",
    "_aware_utc",
    "_get",
    "_history_of",
    "_hit_ids",
    "_ids",
    "_outcome",
    "_pause",
    "_restore_rows",
    "_shape",
    "common",
    "consolidation",
    "delivery",
    "event_time",
    "following",
    "history",
    "migration",
    "restore",
    "robustness",
    "vectors",
    "writes",
]
