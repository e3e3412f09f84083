"""``acompose_projected_context``: the same composition as ``projection``, for an event loop.

The composition itself is ``contextplane.engine``: ``engine.async_driver`` drives the one
drafting loop (``engine.drafting``) on an event loop, in one worker thread for a turn whose
memory is read in threads anyway, else with every section started at once (its module
docstring says which and why). ``acompose_projected_context`` (D8) runs on the default runtime
its store carries (``contextplane.default_runtime``). This module is the import path callers
have always used, and re-exports every name they import from it.
"""

from __future__ import annotations

from contextplane.default_runtime import acompose_projected_context
from contextplane.engine.async_driver import (
    acompose,
    acompose_turn,
    per_read,
    reads_in_threads,
)
from contextplane.engine.drafting import Outcome, stuck
from contextplane.engine.drafting import aview as aconsistent_view

__all__ = [
    "Outcome",
    "acompose",
    "acompose_projected_context",
    "acompose_turn",
    "aconsistent_view",
    "per_read",
    "reads_in_threads",
    "stuck",
]
