"""The SQL that derives a version-1 row's typed-memory cells (ADR D4: kind and delivery policy)
and its review state (D7) from its domain and provenance: one ``CASE`` per cell, generated from
the tables in ``memory/stamps.py`` and ``memory/trust.py`` so the backfill and a new write can
never disagree. The v2 passes (``backfill``) assign them with ``COALESCE``, so a rerun changes
no row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from contextplane.memory.stamps import LEGACY_DOMAIN_TABLE, DomainRule
from contextplane.memory.trust import SOURCE_TYPE_TIERS, UNKNOWN_SOURCE_TIER, initial_review_state
from contextplane.store.migrations.state import REVIEW_STATE_BACKFILL, TYPED_MEMORY_BACKFILL


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


#: Provenance is matched exactly, as ``trust.trust_tier`` does: an unlisted spelling is unknown
#: provenance and gets the least trust.
_SOURCE_KEY: Final[str] = "source_type"


def _rule_condition(rule: DomainRule) -> str:
    parts = []
    if rule.domain is not None:
        parts.append(f"domain = {_sql_literal(rule.domain)}")
    if rule.source_type is not None:
        parts.append(f"{_SOURCE_KEY} = {_sql_literal(rule.source_type)}")
    return " AND ".join(parts) or "1"


def _case_over_rules(value_of: Callable[[DomainRule], str | None]) -> str:
    """A searched CASE with the table's first-match semantics. Rules after the last one with a
    non-NULL value are left to the implicit ``ELSE NULL``; the catch-all becomes ``ELSE``.
    (Per-row expression cost is most of a 1M-row backfill, so the CASE is kept minimal.)"""
    rules = list(LEGACY_DOMAIN_TABLE)
    while rules and value_of(rules[-1]) is None:
        rules.pop()
    whens = []
    for rule in rules:
        value = value_of(rule)
        literal = "NULL" if value is None else _sql_literal(value)
        if rule.domain is None and rule.source_type is None:
            whens.append(f"ELSE {literal}")
            break
        whens.append(f"WHEN {_rule_condition(rule)} THEN {literal}")
    return "CASE " + " ".join(whens) + " END" if whens else "NULL"


#: SQL generated from the D4 table in ``memory/stamps.py`` and the tier table in ``memory/trust.py``.
KIND_CASE_SQL: Final[str] = _case_over_rules(lambda r: r.memory_kind)
POLICY_CASE_SQL: Final[str] = _case_over_rules(lambda r: r.delivery_policy)
RULE_LABEL_CASE_SQL: Final[str] = _case_over_rules(lambda r: r.label)


def _review_case_sql() -> str:
    default_state = initial_review_state(UNKNOWN_SOURCE_TIER)
    by_state: dict[str, list[str]] = {}
    for source, tier in sorted(SOURCE_TYPE_TIERS.items()):
        state = initial_review_state(tier)
        if state != default_state:
            by_state.setdefault(state, []).append(_sql_literal(source))
    whens = [
        f"WHEN {_SOURCE_KEY} IN ({', '.join(sources)}) THEN {_sql_literal(s)}"
        for s, sources in by_state.items()
    ]
    return f"CASE {' '.join(whens)} ELSE {_sql_literal(default_state)} END"


REVIEW_CASE_SQL: Final[str] = _review_case_sql()

#: Per v2 pass, the cells it fills (only NULL ones).
PASS_ASSIGNMENTS: Final[dict[str, str]] = {
    TYPED_MEMORY_BACKFILL: (
        f"memory_kind = COALESCE(memory_kind, {KIND_CASE_SQL}), "
        f"delivery_policy = COALESCE(delivery_policy, {POLICY_CASE_SQL})"
    ),
    REVIEW_STATE_BACKFILL: f"review_state = COALESCE(review_state, {REVIEW_CASE_SQL})",
}
