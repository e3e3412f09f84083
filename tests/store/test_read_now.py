"""A read's ``now`` (the time the D6 deliverable filter is evaluated at) is checked the same way
on every store: an aware datetime or ISO-8601 text with an offset; anything else is one
``ValidationError`` naming ``now`` (a string reached the embedded store's SQL as an
``AttributeError``; a naive time meant UTC on one store and failed on another)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from contextplane.errors import ValidationError
from tests.store.helpers import opened_store


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    with opened_store(request.param, tmp_path) as opened:
        yield opened


READS: dict[str, Callable[[Any, Any], object]] = {
    "list_chunks": lambda s, now: s.list_chunks(deliverable=True, now=now),
    "count_chunks": lambda s, now: s.count_chunks(deliverable=True, now=now),
    "search": lambda s, now: s.search("deploy window", 5, now=now),
    "following": lambda s, now: s.following(["1"], now=now),
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_bad_now_is_refused_by_name_on_every_read(store: Any, read: str) -> None:
    store.add_chunk("deploy window is Tuesday", expires_at=datetime(2031, 6, 1, tzinfo=UTC))
    store.add_chunk("deploy window moved", expires_at=datetime(2030, 6, 1, tzinfo=UTC))
    call = READS[read]
    for bad, says in (
        ("2030-01-01", "no timezone; for UTC write '2030-01-01T00:00:00Z'"),
        (datetime(2030, 1, 1), "no timezone; pass an aware datetime"),
        (5, "expected a datetime or ISO-8601 text, got int"),
    ):
        with pytest.raises(ValidationError, match=r"^now: ") as caught:
            call(store, bad)
        assert says in str(caught.value)
    # ISO text with an offset is a time like any other: evaluated at it, the second row expired
    after = call(store, "2030-12-01T00:00:00Z")
    assert after == call(store, datetime(2030, 12, 1, tzinfo=UTC))
    before = call(store, datetime(2029, 1, 1, tzinfo=UTC))
    if read in ("list_chunks", "search"):
        assert len(before) == 2 and len(after) == 1  # type: ignore[arg-type]
    elif read == "count_chunks":
        assert (before, after) == (2, 1)
    else:
        assert set(before) == {"1"} and after == {}  # type: ignore[arg-type]
