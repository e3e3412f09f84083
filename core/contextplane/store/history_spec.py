"""The history types every memory store with as-of reads shares (ADR D7's ``MemoryHistory``): the
lifecycle cells an event carries, and what an as-of view changed to show the past.

Why here: the embedded and PostgreSQL stores each defined both, the same, and a field added to
one overlay was a field ``explain`` could not read on the other store.
"""

from __future__ import annotations

from typing import Final

import attrs

from contextplane.memory.history import HistoryPosition

#: The lifecycle columns an event carries, in table order; an overlay replaces exactly these.
STATE_COLUMNS: Final[tuple[str, ...]] = (
    "review_state",
    "expires_at",
    "invalidated_at",
    "invalidation_reason",
    "updated_at",
)


@attrs.frozen
class AsOfOverlay:
    """What an as-of view changed to show the past, and what it could not restore."""

    position: HistoryPosition
    #: Rows whose state at the position differs from now (their events after it).
    changed: tuple[str, ...] = ()
    #: Rows written after the position (hidden).
    written_after: tuple[str, ...] = ()
    #: Rows purged after the position: present then, their text gone now.
    purged_after: tuple[str, ...] = ()
    #: True when full-text ranking weighs terms over the rows present at the position (the
    #: embedded store rebuilds its index for it when asked; PostgreSQL always counts on the
    #: view's corpus, which lacks only rows purged since).
    exact_ranking: bool = True
