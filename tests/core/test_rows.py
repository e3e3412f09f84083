"""Rows as drafted: a row given no meta shares one read-only empty mapping, and the one-pass
check of a draft accepts exactly what the rule-by-rule checks accept."""

from __future__ import annotations

import pytest

from contextplane import Draft, Row, ValidationError
from contextplane.projection import _as_rows


def test_a_row_given_no_meta_shares_one_read_only_empty_mapping() -> None:
    a, b = Row("a", 1, "x"), Row("b", 2, "y")
    assert a.meta == {} and a.meta is b.meta  # no dict allocated per drafted row
    with pytest.raises(TypeError):
        a.meta["kind"] = "fact"  # type: ignore[index]
    assert a == Row("a", 1, "x")  # meta takes no part in equality, as before


def test_a_row_given_meta_keeps_its_own() -> None:
    meta = {"kind": "fact"}
    row = Row("a", 1, "x", meta=meta)
    assert row.meta is meta and Row("b", 1, "y").meta == {}


class TaggedRow(Row):
    pass


@pytest.mark.parametrize(
    "result", [[Row("a", 1, "x"), TaggedRow("b", 2, "y")], Draft([TaggedRow("a", 1, "x")])]
)
def test_a_row_subclass_passes_the_rule_by_rule_checks(result) -> None:
    rows, _meta = _as_rows(result, "s")
    assert [r.id for r in rows] == [r.id for r in (result.rows if isinstance(result, Draft) else result)]


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (
            [Row("a", 1, "x"), TaggedRow("a", 2, "y")],
            "section 's' returned the row id 'a' twice; ids must be unique",
        ),
        (
            [Row("a", 1, "x"), object()],
            "section 's' returned object at position 1; expected contextplane.Row",
        ),
        (
            (Row("a", 1, "x"), Row("a", 1, "x")),
            "section 's' returned the row id 'a' twice; ids must be unique",
        ),
    ],
)
def test_a_draft_the_one_pass_check_rejects_gets_the_rule_that_names_the_culprit(result, expected) -> None:
    with pytest.raises(ValidationError) as err:
        _as_rows(result, "s")
    assert str(err.value) == expected
