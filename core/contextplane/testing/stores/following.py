"""The memory written right after another in its scope (capability "following",
``FollowingReads``): what the retrieved section offers beside a hit, since in a conversation the
turn that matches a question best is often the one that echoes it and the answer comes next.

Why its own module: only a store that declares the capability is checked, and "next" has to
mean the same thing on every store (write order within one scope, the deliverable filter
applied, the view's state through a view) or a composition delivers different turns on each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from contextplane.errors import ValidationError
from contextplane.memory.model import MemoryChunk
from contextplane.store import aio
from contextplane.store.protocol import KnowledgeStore
from contextplane.testing._base import checks
from contextplane.testing.requirements import ConformanceFailure, Requirement
from contextplane.testing.stores.common import _as_of, _history_of, _StoreBase

#: Ids that name no row of a fresh store: unknown, malformed, empty, hostile.
UNKNOWN_IDS: tuple[str, ...] = ("999999999", "not-an-id", "", " 1 x", "-1", "1; DROP TABLE chunks", "1.5")


def _following(reader: Any, ids: Sequence[str], req: Requirement, **options: Any) -> dict[str, str]:
    """``reader.following(ids, **options)`` as {id: id of the row after it}, or a failure naming
    what is missing or wrong about the answer."""
    method = getattr(reader, "following", None)
    if not callable(method):
        req.fail(f"{type(reader).__name__} has no following(chunk_ids, *, deliverable=True, now=None)")
    got = method(list(ids), **options)
    return _ids_of(got, f"following({list(ids)}, {options})", req)


def _ids_of(got: object, call: str, req: Requirement) -> dict[str, str]:
    if not isinstance(got, Mapping):
        req.fail(f"{call} returned {type(got).__name__}, not a dict of id -> MemoryChunk")
    out: dict[str, str] = {}
    for key, chunk in got.items():
        req.check(
            isinstance(chunk, MemoryChunk),
            f"{call} maps {key!r} to {type(chunk).__name__}, not a MemoryChunk",
        )
        out[str(key)] = chunk.id
    return out


class StoreFollowingChecks(_StoreBase):
    """Capability "following": the next memory of a scope, in write order."""

    @checks("STORE-FOLLOWING")
    def test_store_following(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        a1 = store.add_chunk("kiwi turn one asks when the crates leave", namespace="session:a")
        b1 = store.add_chunk("mango turn in another conversation", namespace="session:b")
        # the same scope, another source: a note extracted from the turn, another writer's row
        noted = store.add_chunk("kiwi crates note", source_type="extracted", namespace="session:a")
        other = store.add_chunk("kiwi from another chat", source="chat-2", namespace="session:a")
        a2, b2 = store.add_chunks(
            [
                {"content": "kiwi turn two says at dawn", "namespace": "session:a"},
                {"content": "mango turn two in the other one", "namespace": "session:b"},
            ]
        )
        plain = store.add_chunk("a papaya note in the default scope")
        a3 = store.add_chunk("kiwi turn three thanks", namespace="session:a")
        expected = {a1: a2, a2: a3, b1: b2}
        got = _following(store, [a1, a2, a3, b1, b2, plain, noted, other], requirement)
        requirement.check(
            got == expected,
            f"following([a1, a2, a3, b1, b2, plain, noted, other]) gave {got}; expected {expected} (the "
            f"next row of each id's own scope and source: {noted!r} (source type 'extracted') and "
            f"{other!r} (source 'chat-2') are stepped over and have no later row of theirs; a3={a3!r}, "
            f"b2={b2!r} and plain={plain!r} are the last of theirs)",
        )
        row = store.following([a1])[a1]  # type: ignore[attr-defined]
        written = store.get(a2)
        requirement.check(
            row == written, f"following([{a1!r}]) returned {row!r}; get({a2!r}) reads {written!r}"
        )
        twice = _following(store, [a2, a2, a1], requirement)
        requirement.check(
            twice == {a2: a3, a1: a2}, f"following([a2, a2, a1]) gave {twice}; a repeated id is one entry"
        )
        requirement.check(_following(store, [], requirement) == {}, "following([]) is not empty")
        for bogus in UNKNOWN_IDS:
            try:
                found = _following(store, [bogus, a1], requirement)
            except ConformanceFailure:
                raise
            except Exception as exc:
                requirement.fail(f"following([{bogus!r}, a1]) raised {type(exc).__name__}: {exc}")
            requirement.check(
                found == {a1: a2},
                f"following([{bogus!r}, {a1!r}]) gave {found}; an id naming no row must be absent",
            )
        try:
            store.following(a1)  # type: ignore[attr-defined]
        except ValidationError as exc:
            requirement.check(
                "chunk_ids" in str(exc) or "list" in str(exc),
                f"following({a1!r}) (a string) raised ValidationError without saying a list of ids is "
                f"wanted: {exc}",
            )
        except Exception as exc:
            requirement.fail(
                f"following({a1!r}) (one string, not a list) raised {type(exc).__name__}: {exc}; "
                "expected contextplane.errors.ValidationError"
            )
        else:
            requirement.fail(
                f"following({a1!r}) (one string, not a list) was accepted; it would read its "
                "characters as ids"
            )

    @checks("STORE-FOLLOWING-DELIVERABLE")
    def test_store_following_deliverable(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        scope = "session:d"
        now = datetime.now(UTC)
        head = store.add_chunk("kiwi question about the orchard", namespace=scope)
        rejected = store.add_chunk("kiwi a reply later rejected", namespace=scope)
        expiring = store.add_chunk(
            "kiwi a reply expiring in an hour", expires_at=now + timedelta(hours=1), namespace=scope
        )
        expired = store.add_chunk(
            "kiwi a reply expired already", expires_at=now - timedelta(hours=1), namespace=scope
        )
        invalidated = store.add_chunk("kiwi a reply found wrong", namespace=scope)
        superseded = store.add_chunk("kiwi a reply replaced later", namespace=scope)
        answer = store.add_chunk("kiwi the answer that stands", namespace=scope)
        store.set_review_state(rejected, "rejected")
        store.invalidate_chunk(invalidated, reason="found wrong")
        successor = store.supersede(superseded, "kiwi the replacement reply")
        later = now + timedelta(hours=2)
        cases: tuple[tuple[str, dict[str, Any], dict[str, str], str], ...] = (
            ("head", {}, {head: expiring}, "the rejected row is stepped over; the expiring one is live now"),
            (
                "head",
                {"now": later},
                {head: answer},
                "at now+2h the rejected, expired, invalidated and superseded rows are stepped over",
            ),
            ("head", {"deliverable": False}, {head: rejected}, "deliverable=False returns the very next row"),
            (
                "expired",
                {"deliverable": False},
                {expired: invalidated},
                "deliverable=False returns an invalidated row",
            ),
            (
                "invalidated",
                {"deliverable": False},
                {invalidated: superseded},
                "deliverable=False returns a superseded row",
            ),
            ("rejected", {}, {rejected: expiring}, "an undeliverable id still has a next row"),
            ("answer", {}, {answer: successor}, "the superseding row is written last, after the answer"),
            ("successor", {}, {}, "the last row of the scope has none"),
        )
        names = {
            "head": head,
            "expired": expired,
            "invalidated": invalidated,
            "rejected": rejected,
            "answer": answer,
            "successor": successor,
        }
        for name, options, expected, why in cases:
            got = _following(store, [names[name]], requirement, **options)
            requirement.check(
                got == expected,
                f"following([{name}={names[name]!r}], {options}) gave {got}; expected {expected} ({why}; "
                f"rows in write order: head={head}, rejected={rejected}, expiring={expiring}, "
                f"expired={expired}, invalidated={invalidated}, superseded={superseded}, answer={answer}, "
                f"successor={successor})",
            )

    @checks("STORE-FOLLOWING-ASOF")
    def test_store_following_asof(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        if "consistent_read" in type(self).capabilities:
            scope = "session:v"
            first = store.add_chunk("kiwi the first turn", namespace=scope)
            second = store.add_chunk("kiwi the second turn", namespace=scope)
            with store.consistent_read() as view:  # type: ignore[attr-defined]
                third = store.add_chunk("kiwi a turn written while the view is open", namespace=scope)
                store.set_review_state(second, "rejected")
                seen = _following(view, [first, second], requirement)
            requirement.check(
                seen == {first: second},
                f"through a consistent_read() view opened before {third!r} was written and {second!r} "
                f"rejected, following([{first!r}, {second!r}]) gave {seen}; expected { ({first: second}) }",
            )
            live = _following(store, [first, second], requirement)
            requirement.check(
                live == {first: third, second: third},
                f"the store itself gave {live} after the view closed; expected "
                f"{ ({first: third, second: third}) } ({second!r} is rejected now)",
            )
        scope = "session:r"
        asked = store.add_chunk("kiwi asked before the position", namespace=scope)
        answered = store.add_chunk("kiwi answered before the position", namespace=scope)
        position = _history_of(store, requirement).history_position()
        store.set_review_state(answered, "rejected")
        after = store.add_chunk("kiwi a turn written after the position", namespace=scope)
        live = _following(store, [asked, answered], requirement)
        requirement.check(
            live == {asked: after, answered: after},
            f"the live store gave {live}; expected { ({asked: after, answered: after}) }",
        )
        with _as_of(store, position, requirement) as view:
            then = _following(view, [asked, answered], requirement)
            requirement.check(
                then == {asked: answered},
                f"as of the position, following([{asked!r}, {answered!r}]) gave {then}; expected "
                f"{ ({asked: answered}) }: {answered!r} was rejected only afterwards (deliverable then) "
                f"and {after!r} was written afterwards (no row then)",
            )
            every = _following(view, [asked, answered], requirement, deliverable=False)
            requirement.check(
                every == {asked: answered},
                f"as of the position, following(..., deliverable=False) gave {every}; {after!r} did not "
                "exist then, deliverable or not",
            )

    @checks("STORE-FOLLOWING-ASYNC")
    def test_store_following_async(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        scope = "session:x"
        rows = [
            store.add_chunk(f"kiwi async turn {word}", namespace=scope) for word in ("one", "two", "three")
        ]
        store.add_chunk("mango in another scope", namespace="session:y")
        store.set_review_state(rows[1], "rejected")
        asked = [*rows, "not-an-id"]
        for options in ({}, {"deliverable": False}, {"now": datetime.now(UTC) + timedelta(days=1)}):
            sync = _following(store, asked, requirement, **options)
            other = _ids_of(
                asyncio.run(aio.afollowing(store, asked, **options)),
                f"afollowing({asked}, {options})",
                requirement,
            )
            requirement.check(
                other == sync, f"afollowing({asked}, {options}) gave {other}; following gave {sync}"
            )
        requirement.check(
            _following(store, rows[:1], requirement) == {rows[0]: rows[2]},
            f"following([{rows[0]!r}]) did not step over the rejected {rows[1]!r} to {rows[2]!r}",
        )
