"""Conformance checks for backends: the records a deployment keeps beside its memories.

A backend bundles four records (``contextplane.records``): the memory store (checked by the
store kit), session summaries (the prior-session digest's source, ADR D9), the injection log
(ADR D8) and prompt snapshots (ADR D5), plus optionally the trajectory. These checks talk to
each part only through its protocol, so the embedded SQLite backend, the kit's in-memory one
and a server backend are held to the same contract.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import attrs
import pytest

from contextplane.aio import run_to_completion
from contextplane.errors import ValidationError
from contextplane.hookspecs import hookimpl
from contextplane.records import (
    Backend,
    InjectionLog,
    InjectionRow,
    SessionSummaries,
    SnapshotRow,
    SnapshotStore,
    TurnInputs,
    TurnInputStore,
    check_backend,
)
from contextplane.records.aio import acall
from contextplane.records.cache_prefix import CachePrefix
from contextplane.sections import ContextSection, Envelope, Row, Shed
from contextplane.store.protocol import KnowledgeStore
from contextplane.testing._base import DeclaredCapabilities, checks, required_fixture
from contextplane.testing.requirements import RECORDS_CAPABILITIES, Requirement
from contextplane.testing.stores import HOSTILE_QUERIES

#: Text that storage engines have mangled: NUL, separators, emoji, quotes, combining marks.
AWKWARD_TEXT = "kiwi Ünïcödé 🥝 NUL\x00 \u2028 'single' \"double\" \\ back\nslash e\u0301"


def _snapshot(
    session: str, turn: int, call: int = 0, *, created_at: float = 1.0e9, **changes: Any
) -> SnapshotRow:
    row = SnapshotRow(
        session_id=session,
        turn_index=turn,
        call_index=call,
        created_at=created_at,
        mode="native",
        incognito=False,
        prefix_sha256="p" * 64,
        prefix_sections=json.dumps([{"name": "identity", "plugin": "p", "chars": 3, "sha256": "a" * 64}]),
        projection_sha256="b" * 64,
        projection=json.dumps([{"label": "retrieved", "chars": 10, "sha256": "c" * 64, "ids": ["1", "2"]}]),
        budget_chars=16_000,
        used_chars=10,
        history_messages=3,
        history_chars=42,
        stripped=json.dumps([{"id": "m-1", "chars": 5, "sha256": None}]),
        trajectory_refs=json.dumps(["1", "2"]),
        full_text=None,
    )
    return attrs.evolve(row, **changes)


class _BackendBase(DeclaredCapabilities):
    """The fixture every backend supplies, and the capability declaration."""

    known_capabilities: ClassVar[frozenset[str]] = RECORDS_CAPABILITIES
    #: Optional capabilities this backend has (see ``RECORDS_CAPABILITIES``).
    capabilities: ClassVar[frozenset[str]] = frozenset({"trajectory"})

    @pytest.fixture
    def backend(self) -> Backend:
        """Return (or yield, then close) a new, empty backend implementing
        ``contextplane.records.Backend``, private to one test."""
        raise required_fixture(self, "backend", _BackendBase.backend.__doc__)


class BackendShapeChecks(_BackendBase):
    @checks("RECORDS-BACKEND")
    def test_records_backend(self, backend: Backend, requirement: Requirement) -> None:
        problems = check_backend(backend)
        requirement.check(not problems, f"{type(backend).__name__}: {'; '.join(problems)}")
        requirement.check(
            isinstance(backend.name, str) and backend.name.strip(), f"name is {backend.name!r}, not text"
        )
        for part, proto in (
            (backend.memories, KnowledgeStore),
            (backend.summaries, SessionSummaries),
            (backend.injections, InjectionLog),
            (backend.snapshots, SnapshotStore),
        ):
            requirement.check(isinstance(part, proto), f"{type(part).__name__} is not a {proto.__name__}")
        trajectory = backend.trajectory
        requirement.check(
            trajectory is None
            or (
                callable(getattr(trajectory, "append", None)) and callable(getattr(trajectory, "read", None))
            ),
            f"trajectory {type(trajectory).__name__} has no append/read",
        )


class SummaryChecks(_BackendBase):
    @checks("RECORDS-SUMMARIES-NEWEST")
    def test_records_summaries_newest(self, backend: Backend, requirement: Requirement) -> None:
        s = backend.summaries
        requirement.check(s.count() == 0, f"a new backend holds {s.count()} summaries")
        ids = [
            s.add("s-old", "kiwi orchard planning", topic="orchard", at="2026-01-01T00:00:00+00:00"),
            s.add("s-mid", AWKWARD_TEXT, topic="awkward ∑", kind="handoff", at="2026-02-01T00:00:00+00:00"),
            s.add("s-new", "deploy window moved", at="2026-03-01T00:00:00+00:00"),
            s.add("s-new", "second summary of the same session", at="2026-03-01T00:00:00+00:00"),
        ]
        requirement.check(
            len(set(ids)) == 4 and all(isinstance(i, str) for i in ids), f"add returned ids {ids}"
        )
        requirement.check(s.count() == 4, f"count() is {s.count()} after four adds")
        newest = s.newest(10)
        requirement.check(
            [r.id for r in newest] == [ids[3], ids[2], ids[1], ids[0]],
            f"newest(10) returned ids {[r.id for r in newest]}, expected {[ids[3], ids[2], ids[1], ids[0]]} "
            "(newest created_at first, then the later insertion)",
        )
        requirement.check(
            [r.id for r in s.newest(2)] == [ids[3], ids[2]],
            f"newest(2) returned {[r.id for r in s.newest(2)]}",
        )
        excluded = s.newest(10, exclude_session="s-new")
        requirement.check(
            [r.id for r in excluded] == [ids[1], ids[0]],
            f"newest(10, exclude_session='s-new') returned {[(r.id, r.session_id) for r in excluded]}",
        )
        mid = next(r for r in newest if r.id == ids[1])
        got = (mid.session_id, mid.summary, mid.topic, mid.kind, mid.created_at)
        want = ("s-mid", AWKWARD_TEXT, "awkward ∑", "handoff", "2026-02-01T00:00:00+00:00")
        requirement.check(got == want, f"a summary was written as {want!r} and read back as {got!r}")

    @checks("RECORDS-SUMMARIES-RELEVANT")
    def test_records_summaries_relevant(self, backend: Backend, requirement: Requirement) -> None:
        s = backend.summaries
        both = s.add("s1", "kiwi harvest and kiwi pricing", topic="kiwi", at="2026-01-01T00:00:00+00:00")
        one = s.add("s2", "pricing of apples", at="2026-01-02T00:00:00+00:00")
        s.add("s3", "unrelated travel notes", at="2026-01-03T00:00:00+00:00")
        own = s.add("active", "kiwi kiwi kiwi pricing", topic="kiwi", at="2026-01-04T00:00:00+00:00")
        found = s.relevant("kiwi pricing", 10, exclude_session="active")
        requirement.check(
            [r.id for r in found] == [both, one],
            "relevant('kiwi pricing', exclude_session='active') returned "
            f"{[(r.id, r.summary) for r in found]}; "
            f"expected the summary matching both words ({both}) before the one matching one ({one}), "
            f"and never the active session's ({own})",
        )
        requirement.check(
            s.relevant("zebra", 10) == [], "relevant('zebra') matched summaries with no such word"
        )
        requirement.check(len(s.relevant("kiwi pricing", 1)) == 1, "relevant(..., 1) returned more than one")
        for query in HOSTILE_QUERIES:
            try:
                got = s.relevant(query, 5)
            except Exception as exc:
                requirement.fail(f"relevant({query[:60]!r}) raised {type(exc).__name__}: {exc}")
            requirement.check(
                isinstance(got, list), f"relevant({query[:60]!r}) returned {type(got).__name__}"
            )

    @checks("RECORDS-SUMMARIES-INVALID")
    def test_records_summaries_invalid(self, backend: Backend, requirement: Requirement) -> None:
        s = backend.summaries
        bad: list[dict[str, Any]] = [
            {"session_id": "", "summary": "x"},
            {"session_id": "s", "summary": "   "},
            {"session_id": "s", "summary": b"bytes"},
            {"session_id": 7, "summary": "x"},
            {"session_id": "s", "summary": "x", "topic": None},
            {"session_id": "s", "summary": "x", "kind": 3},
        ]
        for args in bad:
            session, summary = args.pop("session_id"), args.pop("summary")
            try:
                s.add(session, summary, **args)
            except ValidationError:
                continue
            except Exception as exc:
                requirement.fail(
                    f"add({session!r}, {summary!r}, {args}) raised {type(exc).__name__}, not ValidationError"
                )
            requirement.fail(f"add({session!r}, {summary!r}, {args}) was accepted")
        requirement.check(s.count() == 0, f"refused summaries were stored: count() is {s.count()}")


class InjectionChecks(_BackendBase):
    @checks("RECORDS-INJECTIONS-APPEND")
    def test_records_injections_append(self, backend: Backend, requirement: Requirement) -> None:
        log = backend.injections
        rows = [
            InjectionRow(
                "a", 0, "2026-01-01T00:00:00Z", "native", 100, 400, 16_000, {"retrieved": ["1", "2"]}
            ),
            InjectionRow("b", 0, "2026-01-01T00:00:01Z", "external", 5, 20, None, {}),
            InjectionRow(
                "a", 1, "2026-01-01T00:00:02Z", "subagent", 7, 28, 800, {"always_on": ["9"], "x": []}
            ),
        ]
        ids = [log.record(r) for r in rows]
        requirement.check(
            all(isinstance(i, int) for i in ids) and ids == sorted(set(ids)),
            f"record returned ids {ids}; expected distinct, increasing whole numbers",
        )
        stored = log.rows()
        requirement.check(
            [attrs.evolve(r, id=0) for r in stored] == rows,
            f"rows() read back {stored}, not the rows recorded (in order)",
        )
        requirement.check(
            [r.id for r in stored] == ids, f"rows() carry ids {[r.id for r in stored]}, not {ids}"
        )
        requirement.check(
            [r.turn_index for r in log.rows("a")] == [0, 1], f"rows('a') returned {log.rows('a')}"
        )
        requirement.check(log.rows("nobody") == [], "rows('nobody') returned rows")
        requirement.check(
            [r.id for r in log.rows(limit=2)] == ids[:2], f"rows(limit=2) returned {log.rows(limit=2)}"
        )


class _KitRow:
    """The one-row context section the durability check composes turns with."""

    plugin_name = "conformance_kit_row"

    @hookimpl
    def register_context_sections(self, register: Any) -> None:
        register(
            ContextSection(
                "kit_row", 50, Shed.DROP_SECTION, lambda _req: [Row("kit-1", 1, "kiwi")], Envelope("kit_row")
            )
        )


class DurabilityChecks(_BackendBase):
    @checks("RECORDS-DURABLE-OR-REPORTED")
    def test_records_durable_or_reported(self, backend: Backend, requirement: Requirement) -> None:
        from contextplane.plugins import plugin_host_with
        from contextplane.projection import compose_projected_context

        host = plugin_host_with([_KitRow()])

        def turn(index: int) -> Any:
            return compose_projected_context(
                "kiwi", backend, session_id="durable", turn_index=index, budget_tokens=1_000, host=host
            )

        first = turn(1)
        requirement.check(
            first.record_status == "recorded",
            f"a turn on the open backend has record_status {first.record_status!r}; expected 'recorded'",
        )
        kept = sorted(r.turn_index for r in backend.injections.rows("durable"))
        requirement.check(kept == [1], f"the recorded turn's injection-log rows read back as turns {kept}")
        snapshots = backend.snapshots
        if isinstance(snapshots, TurnInputStore):
            requirement.check(
                snapshots.get_inputs("durable", 1) is not None,
                "the recorded turn's inputs do not read back (get_inputs returned None)",
            )
        backend.close()
        second = turn(2)
        if second.record_status.startswith("failed"):
            return
        requirement.check(
            second.record_status == "recorded",
            f"a turn after close() has record_status {second.record_status!r}; expected 'recorded' "
            "(its records kept) or 'failed: ...'",
        )
        try:
            kept = sorted(r.turn_index for r in backend.injections.rows("durable"))
        except Exception as exc:
            requirement.fail(
                "a turn after close() said 'recorded', but its row cannot be read: "
                f"{type(exc).__name__}: {exc}"
            )
        requirement.check(
            kept == [1, 2],
            f"a turn after close() said 'recorded', but the injection log holds turns {kept}: its write "
            "returned without storing the row and without raising",
        )


class SnapshotChecks(_BackendBase):
    @checks("RECORDS-SNAPSHOTS-ROUND-TRIP")
    def test_records_snapshots_round_trip(self, backend: Backend, requirement: Requirement) -> None:
        snaps = backend.snapshots
        first = _snapshot("s1", 0, 0, full_text=AWKWARD_TEXT)
        snaps.put(first)
        snaps.put(_snapshot("s1", 0, 1, incognito=True, mode="incognito", projection_sha256=None))
        snaps.put(_snapshot("s2", 3, 0, budget_chars=None))
        snaps.flush()
        requirement.check(snaps.count() == 3, f"count() is {snaps.count()} after three puts")
        requirement.check(snaps.count("s1") == 2, f"count('s1') is {snaps.count('s1')}")
        got = snaps.get("s1", 0, 0)
        requirement.check(got is not None, "get('s1', 0, 0) returned None for a stored snapshot")
        assert got is not None
        requirement.check(got.full_text == AWKWARD_TEXT, f"full_text read back as {got.full_text!r}")
        requirement.check(
            (got.key, got.mode, got.incognito, got.used_chars, got.history_messages, got.history_chars)
            == (("s1", 0, 0), "native", False, 10, 3, 42),
            f"get('s1', 0, 0) read back {got}",
        )
        requirement.check(
            got.delivered_ids == {"retrieved": ("1", "2")}
            and [p.name for p in got.prefix_sections] == ["identity"],
            f"manifests read back as {got.sections} / {got.prefix_sections}",
        )
        requirement.check(
            [(f.message_id, f.chars) for f in got.stripped] == [("m-1", 5)]
            and got.trajectory_refs == ("1", "2"),
            f"stripped frames / trajectory refs read back as {got.stripped} / {got.trajectory_refs}",
        )
        incog = snaps.get("s1", 0, 1)
        requirement.check(
            incog is not None and incog.incognito and incog.projection_sha256 is None,
            f"an incognito snapshot read back as {incog}",
        )
        requirement.check(snaps.get("s1", 9, 9) is None, "get of a key never stored returned a snapshot")
        snaps.put(attrs.evolve(first, used_chars=99, full_text=None))
        snaps.flush()
        again = snaps.get("s1", 0, 0)
        requirement.check(
            again is not None and again.used_chars == 99 and again.full_text is None and snaps.count() == 3,
            "a second put of key ('s1', 0, 0) did not replace the first "
            f"(read back {again}, count {snaps.count()})",
        )
        requirement.check(
            [s.key for s in snaps.list("s1")] == [("s1", 0, 0), ("s1", 0, 1)],
            f"list('s1') returned keys {[s.key for s in snaps.list('s1')]}",
        )
        requirement.check(
            [s.key for s in snaps.list()] == [("s1", 0, 0), ("s1", 0, 1), ("s2", 3, 0)],
            f"list() returned keys {[s.key for s in snaps.list()]}, not in key order",
        )

    @checks("RECORDS-SNAPSHOTS-PREFIX")
    def test_records_snapshots_prefix(self, backend: Backend, requirement: Requirement) -> None:
        snaps = backend.snapshots
        manifest = json.dumps([{"name": "identity", "plugin": "p", "chars": 3, "sha256": "a"}])
        snaps.register_prefix("h1", None, manifest)
        requirement.check(snaps.prefix_text("h1") is None, "a text-less registration stored a text")
        snaps.register_prefix("h1", AWKWARD_TEXT, manifest)
        requirement.check(
            snaps.prefix_text("h1") == AWKWARD_TEXT,
            f"the first registration with a text left prefix_text {snaps.prefix_text('h1')!r}",
        )
        snaps.register_prefix("h1", "another text", manifest)
        snaps.register_prefix("h1", None, manifest)
        requirement.check(
            snaps.prefix_text("h1") == AWKWARD_TEXT,
            f"a stored prefix text was replaced: now {snaps.prefix_text('h1')!r}",
        )
        requirement.check(snaps.prefix_text("never") is None, "prefix_text of an unknown hash is not None")

    @checks("RECORDS-SNAPSHOTS-SESSIONS")
    def test_records_snapshots_sessions(self, backend: Backend, requirement: Requirement) -> None:
        snaps = backend.snapshots
        now = 1.9e9  # far in the future, so no retention policy drops them
        snaps.put(_snapshot("old", 0, created_at=now + 1))
        snaps.put(_snapshot("old", 1, created_at=now + 2))
        snaps.put(_snapshot("new", 0, created_at=now + 5))
        snaps.put(_snapshot("mid", 0, created_at=now + 3))
        snaps.flush()
        sessions = snaps.sessions()
        requirement.check(
            sessions == [("new", 1, now + 5), ("mid", 1, now + 3), ("old", 2, now + 2)],
            f"sessions() returned {sessions}",
        )
        newest = snaps.list(limit=2)
        requirement.check(
            [s.key for s in newest] == [("mid", 0, 0), ("new", 0, 0)],
            f"list(limit=2) returned keys {[s.key for s in newest]}; expected the two newest in key order",
        )

    @checks("RECORDS-SNAPSHOTS-CACHE-PREFIX")
    def test_records_snapshots_cache_prefix(self, backend: Backend, requirement: Requirement) -> None:
        snaps = backend.snapshots
        now = 1.9e9  # far in the future, so no retention policy drops them
        #: (turn, cache_prefix_sha256, cache_prefix_chars, cache_shared_chars, cache_break): a
        #: change named, an unknown share, a session's first call, an unchanged prefix, and an
        #: incognito call (no hash), a history rewrite.
        figures: list[tuple[int, str | None, int, int | None, str | None]] = [
            (0, "d" * 64, 5_010, 4_990, '{"sections":["tools"]}'),
            (1, "e" * 64, 300, None, '{"unknown":true}'),
            (2, "f" * 64, 120, 0, '{"first":true}'),
            (3, "0" * 64, 7_000, 7_000, None),
            (4, None, 80, 80, None),
            (5, "1" * 64, 9_000, 8_000, '{"history_at":2}'),
        ]
        for turn, sha, chars, shared, broken in figures:
            snaps.put(
                _snapshot(
                    "cache", turn, created_at=now + turn, cache_prefix_sha256=sha, cache_prefix_chars=chars,
                    cache_shared_chars=shared, cache_break=broken,
                )
            )  # fmt: skip
        snaps.put(_snapshot("cache", 6, created_at=now + 6))
        snaps.flush()
        want = {
            ("cache", t, 0): CachePrefix.of_row(sha, chars, shared, broken)
            for t, sha, chars, shared, broken in figures
        } | {("cache", 6, 0): None}
        for key, expected in want.items():
            got = snaps.get(*key)
            requirement.check(
                got is not None and got.cache == expected,
                f"get{key} read the cacheable prefix back as {None if got is None else got.cache}, "
                f"written as {expected}",
            )
        listed = {s.key: s.cache for s in snaps.list("cache")}
        requirement.check(
            listed == want, f"list('cache') read the cacheable prefixes back as {listed}, written as {want}"
        )
        snaps.put(_snapshot("cache", 0, created_at=now))
        snaps.flush()
        again = snaps.get("cache", 0, 0)
        requirement.check(
            again is not None and again.cache is None,
            "a second put of key ('cache', 0, 0) without cacheable-prefix figures read back with "
            f"{None if again is None else again.cache} (the first put's figures left over)",
        )


class AsyncRecordChecks(_BackendBase):
    @checks("RECORDS-ASYNC-PARITY")
    def test_records_async_parity(self, backend: Backend, requirement: Requirement) -> None:
        run_to_completion(_async_parity(backend, requirement))


async def _async_parity(backend: Backend, requirement: Requirement) -> None:
    summaries = backend.summaries
    first = str(
        await acall(
            summaries, "add", "a", "kiwi deploy window moved", topic="deploy", kind="session", at=None
        )
    )
    summaries.add("b", "kiwi canary before rollout", topic="canary")
    await acall(summaries, "add", "c", "invoices on the first day", topic="billing", kind="session", at=None)
    requirement.check(isinstance(first, str) and bool(first), f"aadd returned {first!r}, not an id")
    for exclude in (None, "b"):
        sync = summaries.newest(5, exclude_session=exclude)
        other = list(await acall(summaries, "newest", 5, exclude_session=exclude))
        requirement.check(
            other == sync,
            f"anewest(5, exclude_session={exclude!r}) returned {other}; newest gave {sync}",
        )
        sync = summaries.relevant("kiwi deploy", 5, exclude_session=exclude)
        other = list(await acall(summaries, "relevant", "kiwi deploy", 5, exclude_session=exclude))
        requirement.check(
            other == sync,
            f"arelevant('kiwi deploy', 5, exclude_session={exclude!r}) returned {other}; "
            f"relevant gave {sync}",
        )
    log = backend.injections
    rows = [
        InjectionRow("a", 0, "2026-01-01T00:00:00Z", "native", 10, 40, 1_000, {"retrieved": ["1"]}),
        InjectionRow("b", 0, "2026-01-01T00:00:01Z", "external", 5, 20, None, {}),
        InjectionRow("a", 1, "2026-01-01T00:00:02Z", "native", 7, 28, 800, {"always_on": ["9"]}),
    ]
    ids = [int(await acall(log, "record", rows[0])), log.record(rows[1])]
    ids.append(int(await acall(log, "record", rows[2])))
    requirement.check(all(isinstance(i, int) for i in ids), f"arecord and record returned ids {ids}")
    for session, limit in ((None, None), ("a", None), (None, 2)):
        sync_rows = log.rows(session, limit)
        got_rows = list(await acall(log, "rows", session, limit))
        requirement.check(
            got_rows == sync_rows,
            f"arows({session!r}, {limit!r}) returned {got_rows}; rows gave {sync_rows}",
        )
    snaps = backend.snapshots
    now = 1.9e9  # far in the future, so no retention policy drops them
    await acall(snaps, "put", _snapshot("as", 0, created_at=now, full_text=AWKWARD_TEXT))
    snaps.put(_snapshot("as", 1, created_at=now + 1))
    await acall(snaps, "flush")
    for key in (("as", 0, 0), ("as", 1, 0), ("as", 9, 9)):
        sync_one = snaps.get(*key)
        got_one = await acall(snaps, "get", *key)
        requirement.check(
            got_one == sync_one,
            f"aget{key} returned {got_one}; get gave {sync_one}",
        )
    sync_list = snaps.list("as")
    got_list = list(await acall(snaps, "list", "as", limit=None))
    requirement.check(
        got_list == sync_list,
        f"alist('as') returned {got_list}; list gave {sync_list}",
    )
    manifest = json.dumps([{"name": "identity", "plugin": "p", "chars": 3, "sha256": "a"}])
    await acall(snaps, "register_prefix", "async-h", AWKWARD_TEXT, manifest)
    requirement.check(
        snaps.prefix_text("async-h") == AWKWARD_TEXT,
        f"a prefix registered with aregister_prefix reads back as {snaps.prefix_text('async-h')!r}",
    )
    if isinstance(snaps, TurnInputStore):
        inputs = TurnInputs(
            "as", 3, now, "kiwi?", "{}", True, "native", False, None, None, None, None, None, "{}",
            "{}", "0" * 64, "", "{}", None, None, None, "[]", None, 0,
        )  # fmt: skip
        await acall(snaps, "put_inputs", inputs)
        got_inputs = await acall(snaps, "get_inputs", "as", 3)
        requirement.check(
            got_inputs == snaps.get_inputs("as", 3) == inputs,
            f"aget_inputs('as', 3) returned {got_inputs} after aput_inputs of {inputs}",
        )


class TrajectoryChecks(_BackendBase):
    @checks("RECORDS-TRAJECTORY")
    def test_records_trajectory(self, backend: Backend, requirement: Requirement) -> None:
        self._require(requirement)
        trajectory = backend.trajectory
        requirement.check(
            trajectory is not None, 'capability "trajectory" declared, but backend.trajectory is None'
        )
        refs = [
            trajectory.append("t1", "stable_prefix", {"sha256": "a", "text": AWKWARD_TEXT}),
            trajectory.append("t2", "projection", {"turn_index": 0}),
            trajectory.append("t1", "projection", {"turn_index": 1, "ids": ["1", "2"]}),
        ]
        requirement.check(
            refs == ["1", "1", "2"], f"append returned refs {refs}; expected ['1', '1', '2'] (per session)"
        )
        entries = trajectory.read("t1").entries
        got = [(e.ref, e.kind, e.data.get("text"), e.data.get("ids")) for e in entries]
        requirement.check(
            got == [("1", "stable_prefix", AWKWARD_TEXT, None), ("2", "projection", None, ["1", "2"])],
            f"read('t1') returned {got}",
        )
        requirement.check(
            len(trajectory.read("nobody").entries) == 0, "read of an unknown session has entries"
        )


class BackendConformance(
    TrajectoryChecks,
    AsyncRecordChecks,
    SnapshotChecks,
    DurabilityChecks,
    InjectionChecks,
    SummaryChecks,
    BackendShapeChecks,
):
    """Every records check. Subclass it and define ``backend``; run ``KnowledgeStoreConformance``
    on ``backend.memories`` for the memory contract. Bases are listed last-first because pytest
    collects the most basic class's checks first."""
