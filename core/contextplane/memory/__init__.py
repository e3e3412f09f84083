"""The memory model (ADR D4/D7): what a memory row is, how much to trust it, and how it is stamped.

Storage-agnostic on purpose: the SQLite store and a future PostgreSQL store share these rules.
"""

from __future__ import annotations

from contextplane.memory.model import (
    DELIVERY_POLICIES,
    MEMORY_KINDS,
    REVIEW_STATES,
    DeliveryPolicy,
    MemoryChunk,
    MemoryKind,
    ReviewState,
)
from contextplane.memory.stamps import CreationStamp, creation_stamps, legacy_kind_and_policy
from contextplane.memory.trust import initial_review_state, trust_label, trust_tier

__all__ = [
    "DELIVERY_POLICIES",
    "MEMORY_KINDS",
    "REVIEW_STATES",
    "CreationStamp",
    "DeliveryPolicy",
    "MemoryChunk",
    "MemoryKind",
    "ReviewState",
    "creation_stamps",
    "initial_review_state",
    "legacy_kind_and_policy",
    "trust_label",
    "trust_tier",
]
