"""Trust tiers: THE one mapping from provenance (``source_type``) to how far the model may trust a row.

ADR D4 derives the tier from ``source_type``; the D7 amendment makes every tier below the
operator start ``pending`` review, so a write path that does not identify itself gets the
least trust rather than the benefit of the doubt. Every other module (creation stamps, the
review-state backfill SQL, the delivery layer's attribution) reads this table; nothing else
may restate it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

TrustTier = Literal[1, 2, 3]
TrustLabel = Literal["operator", "agent", "external"]

#: Provenance -> trust tier, matched exactly (see ``normalize_source_type``).
#: Anything absent from this table, including the empty string, is tier 1.
SOURCE_TYPE_TIERS: Final[Mapping[str, TrustTier]] = MappingProxyType(
    {
        "operator": 3,
        "manual": 3,
        "extracted": 2,
        "harvest": 2,
        "conversation": 2,
        "chat": 2,
        "ingest": 1,
        "ingested": 1,
        "external": 1,
        "background_report": 1,
    }
)

#: The tier given to unknown or empty provenance: least trust (D7 amendment).
UNKNOWN_SOURCE_TIER: Final[TrustTier] = 1

TRUST_LABELS: Final[Mapping[int, TrustLabel]] = MappingProxyType({3: "operator", 2: "agent", 1: "external"})


def normalize_source_type(source_type: str | None) -> str:
    """The lookup key for a source type: the value itself, ``None`` read as empty.

    Matching is exact on purpose: ``" Operator"`` is not a spelling of ``operator`` but an
    unknown provenance, and unknown provenance gets the least trust (D7 amendment). It also
    keeps the SQL backfill, which compares the stored text, identical to this function."""
    return source_type or ""


def trust_tier(source_type: str | None) -> TrustTier:
    """Trust tier (3 operator, 2 agent, 1 external/unknown) for a provenance value."""
    return SOURCE_TYPE_TIERS.get(normalize_source_type(source_type), UNKNOWN_SOURCE_TIER)


def trust_label(tier: int) -> TrustLabel:
    """The attribution label shown to the model for a tier: operator, agent or external."""
    return TRUST_LABELS.get(tier, "external")


def initial_review_state(tier: int) -> Literal["confirmed", "pending"]:
    """Review state a new row starts in: only operator-tier rows start confirmed (D7 + amendment)."""
    return "confirmed" if tier >= 3 else "pending"
