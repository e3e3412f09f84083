"""Issue 24's cacheable-prefix claim, read from what the backend recorded: the figures each
snapshot keeps (``PromptSnapshot.cache``), through the public snapshot read API.

Every adapter's 20-turn session checks the same thing: on every model call after the session's
first, with no prefix input changed, the call shares all of the previous call's cacheable
prefix, >= 99 % of its own; and on the call after one prefix section's input changed, the
snapshot names exactly that section.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextplane.records.cache_prefix import CachePrefix
from contextplane.records.snapshots import PromptSnapshot


def assert_recorded_shares(
    snapshots: Sequence[PromptSnapshot], *, changed_turn: int, section: str, calls: int
) -> list[CachePrefix]:
    """``snapshots``: one session's, in order (``backend.snapshots.list(session)``), ``calls``
    of them; the prefix section ``section`` changed before turn ``changed_turn``'s first call."""
    assert len(snapshots) == calls, [s.key for s in snapshots]
    caches = [s.cache for s in snapshots]
    assert all(c is not None for c in caches), "a snapshot without its cacheable-prefix figures"
    figures: list[CachePrefix] = [c for c in caches if c is not None]
    assert figures[0].first, figures[0]
    named = 0
    for snap, before, now in zip(snapshots[1:], figures[:-1], figures[1:], strict=True):
        if snap.turn_index == changed_turn and snap.call_index == 0:
            named += 1
            assert now.sections == (section,), (snap.key, now)
            assert now.shared is not None and now.shared < before.chars and not now.unchanged
            assert now.line().endswith(f"broken by section '{section}'"), now.line()
            continue
        assert now.unchanged and now.shared == before.chars, (snap.key, now)
        assert now.shared / now.chars >= 0.99, (snap.key, now.shared, now.chars)
        assert now.line() == f"cacheable prefix: {now.chars} chars, unchanged since the previous call"
    assert named == 1, f"no call of turn {changed_turn} was recorded"
    return figures
