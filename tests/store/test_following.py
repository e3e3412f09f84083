"""``following`` on the embedded SQLite store and the in-memory one, after every public write
(the kit's STORE-FOLLOWING* run in tests/conformance/test_store_kit.py): a conversation's turns
written one by one and in batches, interleaved with another's, then superseded, rejected,
invalidated and expired; the file reopened; bad arguments refused in one line."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from contextplane.errors import ValidationError
from contextplane.store import SQLiteKnowledgeStore
from tests.store.helpers import opened_store

A = {"namespace": "session:caroline"}
B = {"namespace": "session:jon"}


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    with opened_store(request.param, tmp_path) as opened:
        yield opened


def _next(store: Any, ids: list[str], **options: Any) -> dict[str, str]:
    return {k: v.id for k, v in store.following(ids, **options).items()}


def test_a_conversation_round_trip_through_every_write(store: Any) -> None:
    ask = store.add_chunk("Caroline: when is the support group?", **A)
    aside = store.add_chunk("Jon: the studio opens Monday", **B)
    answer, wrong, expiring = store.add_chunks(
        [
            {"content": "Melanie: Tuesdays at six", **A},
            {"content": "Melanie: or Wednesdays, I forget", **A, "source_type": "extracted"},
            {
                "content": "Melanie: the room is booked until June",
                **A,
                "expires_at": datetime(2031, 1, 1, tzinfo=UTC),
            },
        ]
    )
    (aside_reply,) = store.add_chunks([{"content": "Jon: and closes in August", **B}])
    thanks = store.add_chunk("Caroline: thanks!", **A)
    # the note extracted in between is another source: the answer's next is the booking
    assert _next(store, [ask, answer, wrong, expiring, thanks, aside, aside_reply]) == {
        ask: answer,
        answer: expiring,
        expiring: thanks,
        aside: aside_reply,
    }
    store.set_review_state(wrong, "rejected", by="curator")
    corrected = store.supersede(answer, "Melanie: Tuesdays at seven")
    store.invalidate_chunk(thanks, reason="not said")
    later = datetime(2032, 1, 1, tzinfo=UTC)
    assert _next(store, [ask, answer, expiring]) == {ask: expiring, answer: expiring, expiring: corrected}
    # At a time past its expiry the booking is stepped over too: the answer's next is the
    # correction, written last (a supersede writes a new row; it takes no earlier place).
    assert _next(store, [ask], now=later) == {ask: corrected}
    assert _next(store, [ask, answer, wrong], deliverable=False) == {ask: answer, answer: expiring}
    found = store.following([ask])[ask]
    assert found == store.get(expiring) and found.content == "Melanie: the room is booked until June"


def test_the_answer_survives_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with SQLiteKnowledgeStore(path) as first:
        ask = first.add_chunk("Caroline: when is the support group?", **A)
        first.add_chunk("Jon: the studio opens Monday", **B)
        answer = first.add_chunk("Melanie: Tuesdays at six", **A)
    with SQLiteKnowledgeStore(path) as again:
        assert _next(again, [ask]) == {ask: answer}
        with again.consistent_read() as view:
            assert _next(view, [ask, answer]) == {ask: answer}


@pytest.mark.parametrize(
    ("bad", "named"),
    [("12", "a single string"), (None, "NoneType"), (12, "int"), (b"12", "bytes")],
    ids=["str", "None", "int", "bytes"],
)
def test_a_bad_argument_is_refused_in_one_line(store: Any, bad: object, named: str) -> None:
    store.add_chunk("kiwi", **A)
    with pytest.raises(ValidationError) as err:
        store.following(bad)
    message = str(err.value)
    assert message == f"chunk_ids: expected a list of memory ids, got {named}" and "\n" not in message


def test_ids_that_name_no_row_are_absent_on_every_store(store: Any) -> None:
    """Not text (an int, None, a list), malformed, unknown: absent, never an error, and alike on
    both stores (the embedded one read an int as a row key, the in-memory one did not)."""
    first = store.add_chunk("kiwi one", **A)
    second = store.add_chunk("kiwi two", **A)
    odd: list[Any] = [int(first), None, [first], 1.0, "", "x", "-1", "99999999999999999999", first, first]
    assert _next(store, odd) == {first: second}
    assert store.following(iter([first])).keys() == {first}  # any iterable of ids, read once
    assert store.following([]) == {}
