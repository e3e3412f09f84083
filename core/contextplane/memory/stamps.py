"""Creation stamps (ADR D7): what every new row carries, decided once, before it is stored.

Two tables live here because both stores and the migration must apply them identically:
the D4 legacy-domain table (a domain names a kind and sometimes a delivery policy) and the
expiry rules. Review state comes from the trust tier in ``trust.py``; an explicit value wins.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

import attrs

from contextplane.errors import ValidationError
from contextplane.memory.model import (
    DeliveryPolicy,
    MemoryKind,
    ReviewState,
    parse_timestamp,
    validate_delivery_policy,
    validate_memory_kind,
    validate_review_state,
    validate_text,
)
from contextplane.memory.trust import initial_review_state, normalize_source_type, trust_tier

MIN_EXPIRES_IN_DAYS: Final[int] = 1
MAX_EXPIRES_IN_DAYS: Final[int] = 3650


@attrs.frozen
class DomainRule:
    """One row of the ADR D4 backfill table. ``source_type=None`` means "any source type"."""

    label: str
    domain: str | None  # None: any domain not matched above (the "anything else" row)
    source_type: str | None
    memory_kind: MemoryKind
    delivery_policy: DeliveryPolicy | None


#: The ADR D4 table, in match order (first match wins). The migration generates its SQL
#: ``CASE`` and its dry-run counts from this tuple, so it is the only statement of the rule.
LEGACY_DOMAIN_TABLE: Final[tuple[DomainRule, ...]] = (
    DomainRule("hot", "hot", None, "standing", "always"),
    DomainRule("preferences", "preferences", None, "profile", None),
    DomainRule("general/conversation", "general", "conversation", "note", None),
    DomainRule("general/other", "general", None, "reference", None),
    DomainRule("finding", "finding", None, "fact", None),
    DomainRule("fact", "fact", None, "fact", None),
    DomainRule("conversation", "conversation", None, "note", None),
    DomainRule("anything else", None, None, "legacy", None),
)


def legacy_rule(domain: str, source_type: str | None) -> DomainRule:
    """The first D4 table row that matches a (domain, source_type) pair."""
    normalized = normalize_source_type(source_type)
    for rule in LEGACY_DOMAIN_TABLE:
        if rule.domain is not None and rule.domain != domain:
            continue
        if rule.source_type is not None and rule.source_type != normalized:
            continue
        return rule
    return LEGACY_DOMAIN_TABLE[-1]


def legacy_kind_and_policy(domain: str, source_type: str | None) -> tuple[MemoryKind, DeliveryPolicy | None]:
    """Kind and delivery policy the D4 table assigns to a legacy ``domain`` value."""
    rule = legacy_rule(domain, source_type)
    return rule.memory_kind, rule.delivery_policy


def validate_expires_in_days(value: object) -> int:
    """A whole number of days in 1..3650; booleans and fractions are refused, not rounded."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            f"expires_in_days: expected a whole number of days, got {type(value).__name__} {value!r}"
        )
    if not MIN_EXPIRES_IN_DAYS <= value <= MAX_EXPIRES_IN_DAYS:
        raise ValidationError(
            f"expires_in_days: {value} is outside {MIN_EXPIRES_IN_DAYS}..{MAX_EXPIRES_IN_DAYS} days"
        )
    return value


def resolve_expiry(expires_at: object, expires_in_days: object, now: datetime) -> datetime | None:
    """UTC expiry from either an absolute time or a day count; giving both is ambiguous."""
    if expires_at is not None and expires_in_days is not None:
        raise ValidationError("expires_at: give either expires_at or expires_in_days, not both")
    if expires_in_days is not None:
        return now + timedelta(days=validate_expires_in_days(expires_in_days))
    if expires_at is None:
        return None
    return parse_timestamp(expires_at, "expires_at")


@attrs.frozen
class CreationStamp:
    """The lifecycle attributes a write is stamped with (D7 step 1)."""

    memory_kind: MemoryKind
    delivery_policy: DeliveryPolicy | None
    review_state: ReviewState
    expires_at: datetime | None


def creation_stamps(
    *,
    domain: object = "general",
    source_type: object = "",
    memory_kind: object = None,
    delivery_policy: object = None,
    review_state: object = None,
    expires_at: object = None,
    expires_in_days: object = None,
    now: datetime,
) -> CreationStamp:
    """Decide kind, delivery policy, review state and expiry for a new row.

    - kind: explicit, else the D4 table applied to ``domain``;
    - delivery policy: explicit, else ``always`` for ``domain="hot"``, else NULL (= retrieved);
    - review state: explicit (validated), else from the trust tier of ``source_type``;
    - expiry: ``expires_at`` (stored UTC) or ``expires_in_days`` (1..3650).
    """
    domain_text = validate_text(domain, "domain")
    source_text = validate_text(source_type, "source_type")
    default_kind, default_policy = legacy_kind_and_policy(domain_text, source_text)
    kind = default_kind if memory_kind is None else validate_memory_kind(memory_kind)
    policy = default_policy if delivery_policy is None else validate_delivery_policy(delivery_policy)
    state: ReviewState = (
        initial_review_state(trust_tier(source_text))
        if review_state is None
        else validate_review_state(review_state)
    )
    return CreationStamp(
        memory_kind=kind,
        delivery_policy=policy,
        review_state=state,
        expires_at=resolve_expiry(expires_at, expires_in_days, now),
    )
