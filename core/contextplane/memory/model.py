"""The memory row (ADR D4): orthogonal attributes, each valued independently of the others.

``MemoryChunk`` is an immutable value. Validation lives in small functions that name the
field they reject, so the store, the CLI and the caller-facing API share one wording.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final, Literal, cast, get_args

import attrs

from contextplane.errors import ValidationError
from contextplane.memory.trust import (
    SOURCE_TYPE_TIERS,
    UNKNOWN_SOURCE_TIER,
    TrustLabel,
    TrustTier,
    trust_label,
)

MemoryKind = Literal["profile", "standing", "fact", "decision", "note", "episode", "reference", "legacy"]
DeliveryPolicy = Literal["always", "retrieved", "on_demand"]
ReviewState = Literal["confirmed", "pending", "rejected"]

MEMORY_KINDS: Final[frozenset[str]] = frozenset(get_args(MemoryKind))
DELIVERY_POLICIES: Final[frozenset[str]] = frozenset(get_args(DeliveryPolicy))
REVIEW_STATES: Final[frozenset[str]] = frozenset(get_args(ReviewState))

#: Scope prefixes (D4). The empty namespace is global.
SCOPE_PREFIXES: Final[tuple[str, ...]] = ("project:", "session:")

#: Supersession is recorded in ``invalidation_reason`` as ``superseded_by:<id>`` (D7).
SUPERSEDED_PREFIX: Final[str] = "superseded_by:"


def _choices(values: frozenset[str]) -> str:
    return ", ".join(sorted(values))


def _check_choice(field: str, value: object, allowed: frozenset[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValidationError(f"{field}: {value!r} is not one of {_choices(allowed)}")
    return value


def validate_memory_kind(value: object, field: str = "memory_kind") -> MemoryKind:
    """Return ``value`` as a memory kind, or raise naming ``field`` and the allowed kinds."""
    return cast(MemoryKind, _check_choice(field, value, MEMORY_KINDS))


def validate_delivery_policy(value: object, field: str = "delivery_policy") -> DeliveryPolicy:
    """Return ``value`` as a delivery policy, or raise naming ``field`` and the allowed policies."""
    return cast(DeliveryPolicy, _check_choice(field, value, DELIVERY_POLICIES))


def validate_review_state(value: object, field: str = "review_state") -> ReviewState:
    """Return ``value`` as a review state, or raise naming ``field`` and the allowed states."""
    return cast(ReviewState, _check_choice(field, value, REVIEW_STATES))


def validate_text(value: object, field: str, *, allow_empty: bool = True, storable: bool = True) -> str:
    """Text attributes must be ``str``; bytes or numbers are a caller bug worth naming.

    ``storable`` text must also encode as UTF-8: a lone surrogate (what ``surrogateescape``
    makes of bytes that are not UTF-8) would be refused by SQLite at the write, or fail a turn
    later at the first ``encode()``, so it is refused here, at the store boundary, naming where
    it is. Search text is not stored (``storable=False``): its surrogates simply match nothing.
    """
    if not isinstance(value, str):
        raise ValidationError(f"{field}: expected text (str), got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise ValidationError(f"{field}: must not be empty")
    if storable and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValidationError(
                f"{field}: holds U+{ord(value[exc.start]):04X} at character {exc.start}, a lone surrogate "
                "that is not text (bytes that are not UTF-8, decoded with surrogateescape); "
                "re-encode the input as UTF-8 or remove that character"
            ) from None
    return value


def validate_namespace(value: object, field: str = "namespace") -> str:
    """A scope is global (``""``), ``project:<id>`` or ``session:<id>`` (D4)."""
    text = validate_text(value, field)
    if text == "":
        return text
    for prefix in SCOPE_PREFIXES:
        if text.startswith(prefix) and len(text) > len(prefix) and text.strip() == text:
            return text
    raise ValidationError(
        f"{field}: {text!r} is not a scope; use '' (global), 'project:<id>' or 'session:<id>'"
    )


def utc_now() -> datetime:
    """The current time, timezone-aware in UTC."""
    return datetime.now(UTC)


def to_utc(value: datetime, field: str) -> datetime:
    """Normalise an aware datetime to UTC; naive datetimes are ambiguous and refused."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{field}: {value.isoformat()!r} has no timezone; pass an aware datetime")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValidationError(
            f"{field}: {value.isoformat()!r} is outside the representable range once converted to UTC "
            "(years 1 to 9999); pass an earlier time"
        ) from None


def parse_timestamp(value: object, field: str) -> datetime:
    """Accept an aware ``datetime`` or ISO-8601 text with an offset (``Z`` allowed); return UTC."""
    if isinstance(value, datetime):
        return to_utc(value, field)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValidationError(
                f"{field}: {value!r} is not an ISO-8601 timestamp (e.g. 2027-01-31T12:00:00Z)"
            ) from None
        if parsed.tzinfo is None:
            # The suggestion is a full timestamp that parses: "2027-01-31" + "Z" would not.
            fixed = parsed.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")
            raise ValidationError(f"{field}: {value!r} has no timezone; for UTC write {fixed!r}")
        return to_utc(parsed, field)
    raise ValidationError(f"{field}: expected a datetime or ISO-8601 text, got {type(value).__name__}")


def parse_occurred_at(value: object) -> datetime | None:
    """The event time of a write: ``None`` (not given), or an aware datetime / ISO-8601 text with
    an offset, returned in UTC; a naive or unparsable value is refused naming ``occurred_at``."""
    return None if value is None else parse_timestamp(value, "occurred_at")


def format_timestamp(value: datetime) -> str:
    """Fixed-width UTC text, so stored timestamps compare correctly as strings in SQL."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def read_timestamp(value: str | None) -> datetime | None:
    """Read a stored timestamp leniently: legacy rows may lack an offset (read as UTC)."""
    if value is None or value == "":
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


@attrs.frozen
class MemoryChunk:
    """One memory row. Each attribute answers one question (D4); none is derived from another,
    except trust tier/label (from provenance) and ``superseded_by`` (from the invalidation reason)."""

    id: str
    content: str
    created_at: datetime
    updated_at: datetime
    domain: str = "general"
    source_type: str = ""
    memory_kind: MemoryKind = attrs.field(
        default="legacy", validator=lambda _i, _a, v: validate_memory_kind(v)
    )
    delivery_policy: DeliveryPolicy | None = attrs.field(
        default=None, validator=lambda _i, _a, v: v is None or validate_delivery_policy(v)
    )
    review_state: ReviewState = attrs.field(
        default="pending", validator=lambda _i, _a, v: validate_review_state(v)
    )
    namespace: str = ""
    heading: str = ""
    source: str = ""
    subject: str = ""
    epoch: str = ""
    invalidated_at: datetime | None = None
    invalidation_reason: str | None = None
    expires_at: datetime | None = None
    #: Event time (beyond D4's table): when what the memory describes happened; for a
    #: conversation turn, when it was said. ``None`` when the writer did not say.
    #:
    #: Why separate from ``created_at``: ``created_at`` is when the row was *written*, which for
    #: an imported conversation can be years after the words were said. A question like "what did
    #: she do the week after the trip?" is answered from when things happened, not from when the
    #: store learned of them; stamping the write time in their place would date every turn of a
    #: May-2023 conversation "2026-12-01". Neither is derived from the other, and lifecycle rules
    #: (expiry, history, purge) keep reading ``created_at``/``updated_at`` only.
    occurred_at: datetime | None = None

    @property
    def effective_delivery_policy(self) -> DeliveryPolicy:
        """NULL delivery policy means ``retrieved`` (D4)."""
        return self.delivery_policy or "retrieved"

    @property
    def trust_tier(self) -> TrustTier:
        # ``trust.trust_tier`` inlined: read several times per row per turn (filters, fusion's
        # tie-break, the label), it was 4% of a turn's compose at 100k memories
        return SOURCE_TYPE_TIERS.get(self.source_type or "", UNKNOWN_SOURCE_TIER)

    @property
    def trust_label(self) -> TrustLabel:
        return trust_label(self.trust_tier)

    @property
    def superseded_by(self) -> str | None:
        """The id of the row that replaced this one, parsed from ``superseded_by:<id>``."""
        reason = self.invalidation_reason or ""
        if self.invalidated_at is not None and reason.startswith(SUPERSEDED_PREFIX):
            return reason[len(SUPERSEDED_PREFIX) :] or None
        return None

    @property
    def is_superseded(self) -> bool:
        return self.superseded_by is not None

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or utc_now())

    def is_deliverable(self, now: datetime | None = None) -> bool:
        """Deliverable (D6): not rejected, not expired, not superseded or otherwise invalidated."""
        return self.review_state != "rejected" and self.invalidated_at is None and not self.is_expired(now)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: timestamps as ISO text, plus the derived trust and supersession fields."""
        out: dict[str, Any] = {}
        for field in attrs.fields(MemoryChunk):
            value = getattr(self, field.name)
            out[field.name] = format_timestamp(value) if isinstance(value, datetime) else value
        out["effective_delivery_policy"] = self.effective_delivery_policy
        out["trust_tier"] = self.trust_tier
        out["trust_label"] = self.trust_label
        out["superseded_by"] = self.superseded_by
        return out
