"""The event time (``occurred_at``): written by every write, kept by supersession, filtered on,
and refused when it is not an aware time.

Why its own module: the event time is when what a memory describes happened, not when it was
written; these checks use their own dated conversation (``_MAY`` .. ``_JULY``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from contextplane.store.protocol import KnowledgeStore
from contextplane.testing._base import checks
from contextplane.testing.requirements import Requirement
from contextplane.testing.stores.common import _SLACK, _aware_utc, _get, _hit_ids, _ids, _StoreBase

#: STORE-EVENT-TIME-*: when the kit's conversation turns were said (as LoCoMo dates them).
_MAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
_JUNE = datetime(2023, 6, 1, tzinfo=UTC)
_JULY = datetime(2023, 7, 14, 9, 30, tzinfo=UTC)


class StoreEventTimeChecks(_StoreBase):
    """The event time (``occurred_at``): written by every write, kept by supersession, filtered
    on, and refused when it is not an aware time."""

    @checks("STORE-EVENT-TIME-ROUND-TRIP")
    def test_store_event_time_round_trip(self, store: KnowledgeStore, requirement: Requirement) -> None:
        before = datetime.now(UTC)
        text = _get(
            store,
            store.add_chunk(
                "kiwi said in may", "general", "operator", occurred_at="2023-05-08T15:56:00+02:00"
            ),
            requirement,
        )
        tokyo = timezone(timedelta(hours=9))
        aware = _get(
            store,
            store.add_chunk("kiwi said in july", "general", "operator", occurred_at=_JULY.astimezone(tokyo)),
            requirement,
        )
        plain = _get(store, store.add_chunk("kiwi said some time", "general", "operator"), requirement)
        for chunk, want, how in ((text, _MAY, "ISO text with +02:00"), (aware, _JULY, "a +09:00 datetime")):
            requirement.check(
                chunk.occurred_at == want and _aware_utc(chunk.occurred_at),
                f"occurred_at written as {how} for {want.isoformat()} read back as {chunk.occurred_at!r}",
            )
        requirement.check(
            plain.occurred_at is None, f"a row written without occurred_at reads {plain.occurred_at!r}"
        )
        requirement.check(
            before - _SLACK <= text.created_at <= datetime.now(UTC) + _SLACK,
            f"created_at is {text.created_at.isoformat()}, not the time of the write: the event time "
            "must not replace it",
        )
        ids = store.add_chunks(
            [
                {"content": "kiwi batch may", "source_type": "operator", "occurred_at": _MAY},
                {
                    "content": "kiwi batch june",
                    "source_type": "operator",
                    "occurred_at": "2023-06-01T00:00:00Z",
                },
                {"content": "kiwi batch none", "source_type": "operator"},
            ]
        )
        got = [_get(store, cid, requirement).occurred_at for cid in ids]
        requirement.check(
            got == [_MAY, _JUNE, None], f"add_chunks: occurred_at read back as {got}, not [May, June, None]"
        )

    @checks("STORE-EVENT-TIME-DISTINCT")
    def test_store_event_time_distinct(self, store: KnowledgeStore, requirement: Requirement) -> None:
        first = store.add_chunk("Caroline: thanks, see you!", "general", "conversation", occurred_at=_MAY)
        again = store.add_chunk("Caroline: thanks, see you!", "general", "conversation", occurred_at=_JULY)
        requirement.check(
            str(first) != str(again),
            f"the same turn said on {_MAY.date()} and {_JULY.date()} returned one id ({first!r}): the "
            "second event was folded into the first",
        )
        times = (_get(store, first, requirement).occurred_at, _get(store, again, requirement).occurred_at)
        requirement.check(times == (_MAY, _JULY), f"the two turns read back with occurred_at {times}")

    @checks("STORE-EVENT-TIME-SUPERSEDE")
    def test_store_event_time_supersede(self, store: KnowledgeStore, requirement: Requirement) -> None:
        head = store.add_chunk("kiwi party at the old hall", "general", "operator", occurred_at=_MAY)
        got = []
        for content, given in (
            ("kiwi party at the old hall, room 2", {}),
            ("kiwi party moved to the new hall", {"occurred_at": _JULY}),
            ("kiwi party moved to the new hall, room 3", {"occurred_at": None}),
        ):
            head = store.supersede(head, content, **given)
            got.append(_get(store, head, requirement).occurred_at)  # each read as it is written
        requirement.check(
            got == [_MAY, _JULY, _JULY],
            f"superseding rows read occurred_at {got}: expected the older row's (May) when none is "
            "given, the newer row's own (July) when given, and the older one's again for None",
        )

    @checks("STORE-EVENT-TIME-FILTER")
    def test_store_event_time_filter(self, store: KnowledgeStore, requirement: Requirement) -> None:
        scope = "project:kit-time"
        may = store.add_chunk("kiwi picnic in may", "general", "operator", namespace=scope, occurred_at=_MAY)
        june = store.add_chunk(
            "kiwi picnic in june", "general", "operator", namespace=scope, occurred_at=_JUNE
        )
        july = store.add_chunk(
            "kiwi picnic in july", "general", "operator", namespace=scope, occurred_at=_JULY
        )
        store.add_chunk("kiwi picnic some day", "general", "operator", namespace=scope)
        other = store.add_chunk("kiwi picnic elsewhere", "general", "operator", occurred_at=_JUNE)
        windows: tuple[tuple[dict[str, Any], set[str]], ...] = (
            ({"occurred_after": _JUNE}, {june, july, other}),
            ({"occurred_after": "2023-06-01T00:00:00Z"}, {june, july, other}),
            ({"occurred_before": "2023-06-01T02:00:00+02:00"}, {may}),
            ({"occurred_after": "2023-05-09T00:00:00Z", "occurred_before": _JULY}, {june, other}),
            ({"occurred_after": _JUNE, "namespaces": [scope]}, {june, july}),
            ({"occurred_after": _JULY + timedelta(days=1)}, set()),
        )
        for options, want in windows:
            listed = _ids(store.list_chunks(**options))
            requirement.check(
                listed == want, f"list_chunks({options}) returned {sorted(listed)}, not {sorted(want)}"
            )
            found = _hit_ids(store, "kiwi picnic", **options)
            requirement.check(
                found == want,
                f"search('kiwi picnic', {options}) returned {sorted(found)}, not {sorted(want)}",
            )

    @checks("STORE-EVENT-TIME-INVALID")
    def test_store_event_time_invalid(self, store: KnowledgeStore, requirement: Requirement) -> None:
        store.add_chunk("kiwi already there", "general", "operator")
        count = len(store.list_chunks())
        bad: tuple[object, ...] = (
            "2023-05-08",
            "2023-05-08T13:56:00",
            "next tuesday",
            datetime(2023, 5, 8),
            20230508,
        )
        for value in bad:
            for how, write in (
                (
                    "add_chunk",
                    lambda v: store.add_chunk("kiwi bad time", "general", "operator", occurred_at=v),
                ),
                (
                    "add_chunks",
                    lambda v: store.add_chunks(
                        [
                            {"content": "kiwi good row", "source_type": "operator", "occurred_at": _MAY},
                            {"content": "kiwi bad row", "source_type": "operator", "occurred_at": v},
                        ]
                    ),
                ),
            ):
                try:
                    write(value)
                except Exception as exc:
                    requirement.check(
                        "occurred_at" in str(exc),
                        f"{how} refused occurred_at={value!r} with {exc!r}, not naming it",
                    )
                else:
                    requirement.fail(f"{how} accepted occurred_at={value!r}, which is not an aware time")
                after = len(store.list_chunks())
                requirement.check(
                    after == count, f"{how} with occurred_at={value!r} stored {after - count} rows"
                )
        for name in ("occurred_after", "occurred_before"):
            bound: dict[str, Any] = {name: "not a time"}
            for read in ("list_chunks", "search"):
                try:
                    if read == "list_chunks":
                        store.list_chunks(**bound)
                    else:
                        store.search("kiwi", 5, **bound)
                except Exception as exc:
                    requirement.check(
                        name in str(exc), f"{read}({name}='not a time') raised {exc!r}, not naming it"
                    )
                else:
                    requirement.fail(f"{read}({name}='not a time') was accepted")
