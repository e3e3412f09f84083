"""The memory model, the trust-tier table and the D7 creation stamps, without a store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest

from contextplane.errors import ValidationError
from contextplane.memory import (
    MEMORY_KINDS,
    MemoryChunk,
    creation_stamps,
    initial_review_state,
    legacy_kind_and_policy,
    trust_label,
    trust_tier,
)
from contextplane.memory.model import parse_timestamp, validate_namespace
from contextplane.memory.stamps import LEGACY_DOMAIN_TABLE, validate_expires_in_days
from contextplane.memory.trust import SOURCE_TYPE_TIERS

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("source_type", "tier", "label"),
    [
        ("operator", 3, "operator"),
        ("manual", 3, "operator"),
        ("extracted", 2, "agent"),
        ("harvest", 2, "agent"),
        ("conversation", 2, "agent"),
        ("chat", 2, "agent"),
        ("ingest", 1, "external"),
        ("ingested", 1, "external"),
        ("external", 1, "external"),
        ("background_report", 1, "external"),
        ("", 1, "external"),
        ("something-new", 1, "external"),
        (None, 1, "external"),
        ("  Operator ", 1, "external"),  # exact match only: an unlisted spelling is unknown
    ],
)
def test_trust_tier_table(source_type: str | None, tier: int, label: str) -> None:
    assert trust_tier(source_type) == tier
    assert trust_label(trust_tier(source_type)) == label


def test_only_operator_tier_starts_confirmed() -> None:
    assert initial_review_state(3) == "confirmed"
    assert initial_review_state(2) == "pending"
    assert initial_review_state(1) == "pending"


def test_tier_table_has_exactly_the_specified_rows() -> None:
    assert {k for k, v in SOURCE_TYPE_TIERS.items() if v == 3} == {"operator", "manual"}
    assert {k for k, v in SOURCE_TYPE_TIERS.items() if v == 2} == {
        "extracted",
        "harvest",
        "conversation",
        "chat",
    }


@pytest.mark.parametrize(
    ("domain", "source_type", "kind", "policy"),
    [
        ("hot", "", "standing", "always"),
        ("hot", "conversation", "standing", "always"),
        ("preferences", "", "profile", None),
        ("general", "conversation", "note", None),
        ("general", "ingest", "reference", None),
        ("general", "", "reference", None),
        ("finding", "", "fact", None),
        ("fact", "operator", "fact", None),
        ("conversation", "", "note", None),
        ("loop-lessons", "", "legacy", None),
        ("HOT", "", "legacy", None),
        ("", "", "legacy", None),
    ],
)
def test_legacy_domain_table(domain: str, source_type: str, kind: str, policy: str | None) -> None:
    assert legacy_kind_and_policy(domain, source_type) == (kind, policy)


def test_legacy_table_ends_with_the_catch_all() -> None:
    assert LEGACY_DOMAIN_TABLE[-1].domain is None and LEGACY_DOMAIN_TABLE[-1].memory_kind == "legacy"


class TestCreationStamps:
    def test_review_state_follows_tier(self) -> None:
        assert creation_stamps(source_type="operator", now=NOW).review_state == "confirmed"
        assert creation_stamps(source_type="extracted", now=NOW).review_state == "pending"
        assert creation_stamps(source_type="ingest", now=NOW).review_state == "pending"
        assert creation_stamps(source_type="", now=NOW).review_state == "pending"
        assert creation_stamps(source_type="mystery", now=NOW).review_state == "pending"

    def test_explicit_review_state_wins(self) -> None:
        assert (
            creation_stamps(source_type="operator", review_state="pending", now=NOW).review_state == "pending"
        )
        assert creation_stamps(source_type="", review_state="confirmed", now=NOW).review_state == "confirmed"

    def test_unknown_review_state_is_rejected_naming_the_field(self) -> None:
        with pytest.raises(
            ValidationError, match=r"^review_state: 'approved' is not one of confirmed, pending"
        ):
            creation_stamps(review_state="approved", now=NOW)

    def test_hot_implies_always_unless_given(self) -> None:
        assert creation_stamps(domain="hot", now=NOW).delivery_policy == "always"
        assert (
            creation_stamps(domain="hot", delivery_policy="on_demand", now=NOW).delivery_policy == "on_demand"
        )
        assert creation_stamps(domain="general", now=NOW).delivery_policy is None

    def test_kind_from_domain_unless_given(self) -> None:
        assert creation_stamps(domain="finding", now=NOW).memory_kind == "fact"
        assert creation_stamps(domain="finding", memory_kind="decision", now=NOW).memory_kind == "decision"

    def test_expires_at_is_stored_utc(self) -> None:
        plus_two = timezone(timedelta(hours=2))
        stamp = creation_stamps(expires_at=datetime(2027, 1, 1, 2, 0, tzinfo=plus_two), now=NOW)
        assert stamp.expires_at == datetime(2027, 1, 1, 0, 0, tzinfo=UTC)
        assert stamp.expires_at is not None and stamp.expires_at.utcoffset() == timedelta(0)
        text = creation_stamps(expires_at="2027-01-01T05:30:00+05:30", now=NOW).expires_at
        assert text == datetime(2027, 1, 1, 0, 0, tzinfo=UTC)

    @pytest.mark.parametrize("days", [1, 30, 3650])
    def test_expires_in_days(self, days: int) -> None:
        assert creation_stamps(expires_in_days=days, now=NOW).expires_at == NOW + timedelta(days=days)

    @pytest.mark.parametrize("days", [0, -1, 3651, 1.5, True, "3"])
    def test_expires_in_days_out_of_range(self, days: object) -> None:
        with pytest.raises(ValidationError, match=r"^expires_in_days: "):
            creation_stamps(expires_in_days=days, now=NOW)

    def test_both_expiry_forms_is_an_error(self) -> None:
        with pytest.raises(ValidationError, match=r"^expires_at: give either"):
            creation_stamps(expires_at=NOW, expires_in_days=3, now=NOW)

    @pytest.mark.parametrize(
        ("field", "value", "pattern"),
        [
            ("memory_kind", "thought", r"^memory_kind: 'thought' is not one of"),
            (
                "delivery_policy",
                "sometimes",
                r"^delivery_policy: 'sometimes' is not one of always, on_demand",
            ),
            ("review_state", "ok", r"^review_state: 'ok'"),
            ("expires_at", "next tuesday", r"^expires_at: 'next tuesday' is not an ISO-8601 timestamp"),
            ("expires_at", "2027-01-01T00:00:00", r"^expires_at: .* has no timezone"),
            ("expires_at", datetime(2027, 1, 1), r"^expires_at: .* has no timezone"),
            ("expires_at", 1_800_000_000, r"^expires_at: expected a datetime or ISO-8601 text, got int"),
            ("domain", b"hot", r"^domain: expected text \(str\), got bytes"),
            ("source_type", 3, r"^source_type: expected text \(str\), got int"),
        ],
    )
    def test_malformed_values_name_the_field(self, field: str, value: object, pattern: str) -> None:
        with pytest.raises(ValidationError, match=pattern):
            creation_stamps(**{field: value}, now=NOW)  # type: ignore[arg-type]


def test_validate_expires_in_days_message_says_the_range() -> None:
    with pytest.raises(ValidationError, match=r"-5 is outside 1\.\.3650 days"):
        validate_expires_in_days(-5)


@pytest.mark.parametrize("scope", ["", "project:a", "session:x-1"])
def test_valid_scopes(scope: str) -> None:
    assert validate_namespace(scope) == scope


@pytest.mark.parametrize("scope", ["global", "project:", "team:a", " project:a"])
def test_invalid_scopes_name_the_field(scope: str) -> None:
    with pytest.raises(ValidationError, match=r"^namespace: .* is not a scope"):
        validate_namespace(scope)


def _chunk(**overrides: object) -> MemoryChunk:
    base: dict[str, object] = {"id": "1", "content": "x", "created_at": NOW, "updated_at": NOW}
    base.update(overrides)
    return MemoryChunk(**base)  # type: ignore[arg-type]


class TestMemoryChunk:
    def test_frozen(self) -> None:
        chunk = _chunk()
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            chunk.content = "y"  # type: ignore[misc]

    def test_effective_delivery_policy(self) -> None:
        assert _chunk().effective_delivery_policy == "retrieved"
        assert _chunk(delivery_policy="always").effective_delivery_policy == "always"

    def test_superseded_by_is_parsed_from_the_reason(self) -> None:
        chunk = _chunk(invalidated_at=NOW, invalidation_reason="superseded_by:42")
        assert chunk.superseded_by == "42" and not chunk.is_deliverable(NOW)
        assert _chunk(invalidated_at=NOW, invalidation_reason="deleted").superseded_by is None

    def test_deliverable(self) -> None:
        assert _chunk().is_deliverable(NOW)
        assert not _chunk(review_state="rejected").is_deliverable(NOW)
        assert not _chunk(expires_at=NOW).is_deliverable(NOW)  # expires_at <= now is expired
        assert _chunk(expires_at=NOW + timedelta(seconds=1)).is_deliverable(NOW)
        assert not _chunk(invalidated_at=NOW, invalidation_reason="x").is_deliverable(NOW)

    def test_trust_properties(self) -> None:
        chunk = _chunk(source_type="harvest")
        assert (chunk.trust_tier, chunk.trust_label) == (2, "agent")

    def test_invalid_enums_rejected_naming_field(self) -> None:
        with pytest.raises(ValidationError, match=r"^memory_kind: "):
            _chunk(memory_kind="blob")
        with pytest.raises(ValidationError, match=r"^delivery_policy: "):
            _chunk(delivery_policy="never")

    def test_all_kinds_accepted(self) -> None:
        for kind in MEMORY_KINDS:
            assert _chunk(memory_kind=kind).memory_kind == kind

    def test_to_dict_is_json_ready(self) -> None:
        data = _chunk(expires_at=NOW).to_dict()
        assert data["expires_at"] == "2026-06-01T12:00:00.000000Z"
        assert data["trust_label"] == "external" and data["effective_delivery_policy"] == "retrieved"


def test_parse_timestamp_accepts_z() -> None:
    assert parse_timestamp("2027-01-01T00:00:00Z", "expires_at") == datetime(2027, 1, 1, tzinfo=UTC)
