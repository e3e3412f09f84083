"""Writing a recorder's rows to a backend: the plan's sync and event-loop drivers.

They live in ``contextplane.records.plans`` (the plugin host performs a sans-IO observer's rows
with them, and the host must not import the record pipeline); this is their import path of
issue 25's step 2, kept for its callers.
"""

from __future__ import annotations

from contextplane.records.plans import awrite, perform, write

__all__ = ["awrite", "perform", "write"]
