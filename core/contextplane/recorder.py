"""The sans-IO recorder (ADR D5, issue 25): a projection and a model call become rows.

Recording a turn is two jobs: deciding what the rows hold (the injection-log row, the turn's
manifest and trajectory entry, its inputs, each call's prompt snapshot, the stable prefix
once per hash) and writing them. Before issue 25 the two were one, written twice: a sync
``PromptRecorder`` and an async twin of every method, and the observer's ``observe_*`` and
``aobserve_*`` bodies. Here only the first job is done, once: a ``Recorder`` *plan* is a
generator that yields one ``Write`` per row and is sent back what the write returned (a
trajectory entry's reference, which later rows cite). It opens no file and calls no store.
``contextplane.records.plans`` drives a plan against a backend, synchronously or on an
event loop (a part's native async methods, or the rest of the plan in one worker thread), so
both paths write the same rows by construction.

A recorder belongs to one backend and one recording policy (full text, trajectory,
redaction): it remembers which stable prefixes each session has registered, so a prefix's text
is stored and appended to the trajectory once per session and hash, not once per call.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import attrs

from contextplane.observability.redaction import Redactor, capture_text
from contextplane.observability.turn_inputs import turn_inputs
from contextplane.records.cache_prefix import CachePrefix, CacheTracker
from contextplane.records.injections import InjectionRow
from contextplane.records.plans import Plan, Write
from contextplane.records.snapshots import PrefixRef, SnapshotRow, StrippedFrame
from contextplane.records.turn_inputs import TurnInputs
from contextplane.request import ProjectionRequest
from contextplane.types import ModelCall, PrefixSection, ProjectedContext, StablePrefix

__all__ = [
    "Plan",
    "Policy",
    "Recorder",
    "TurnRecord",
    "Write",
    "budget_rows",
    "injection_row",
    "policy_of",
    "rows_of",
    "shed_steps",
]

#: What decides how a turn is recorded: full text, trajectory, redaction patterns, the
#: default patterns, the full text's bound in bytes.
Policy = tuple[bool, bool, tuple[str, ...], bool, int]

T = TypeVar("T")


@attrs.frozen
class TurnRecord:
    """What every call of one turn shares: built once per composition, not once per call."""

    session_id: str
    turn_index: int
    mode: str
    incognito: bool
    projection_sha256: str | None
    sections_json: str
    budget_chars: int | None
    used_chars: int
    text: str
    trajectory_ref: str | None = None


def policy_of(request: ProjectionRequest) -> Policy:
    """The request's recording policy (what a recorder is chosen by)."""
    cfg = request.config
    obs = cfg.observability
    return (
        cfg.context.capture_full_text,
        obs.trajectory,
        tuple(obs.redact_patterns),
        obs.redact_defaults,
        obs.full_text_max_bytes,
    )


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def injection_row(projection: ProjectedContext) -> InjectionRow:
    """The injection-log row of a composed projection (it has an ``injection`` record)."""
    record = projection.injection
    if record is None:
        raise ValueError("a projection composed with record=False has no injection-log row")
    return InjectionRow(
        session_id=record.session_id,
        turn_index=record.turn_index,
        at=record.at,
        mode=projection.mode,
        approx_tokens=record.approx_tokens,
        used_chars=projection.used_chars,
        budget_chars=projection.budget_chars,
        delivered=record.delivered,
    )


def budget_rows(projection: ProjectedContext, *, errors: bool = True) -> list[dict[str, Any]]:
    """The budget table of one projection as JSON-ready rows, one per section in draft order:
    what each offered and kept, its size, and why it was shed, suppressed or failed.

    Kept in the trajectory beside the text so an inspector can show a recorded turn's budget
    exactly as the preview shows a fresh one. ``errors=False`` leaves out error text (it may
    quote a provider's data), for incognito turns."""
    return [
        {
            "name": s.name,
            "plugin": s.plugin,
            "priority": s.priority,
            "offered": s.offered,
            "kept": len(s.item_ids),
            "chars": s.chars,
            "truncated": s.truncated,
            "suppressed": s.suppressed,
            "error": (s.error if errors else "error") if s.error is not None else None,
        }
        for s in projection.sections
    ]


def shed_steps(projection: ProjectedContext) -> list[dict[str, Any]]:
    """What fitting shed, in the order it was shed (ADR D6): section, action, items, chars."""
    return [attrs.asdict(step) for step in projection.overflow]


def _prefix_sections_json(sections: Iterable[PrefixSection]) -> str:
    return json.dumps(
        [{"name": s.name, "plugin": s.plugin, "chars": s.chars, "sha256": s.sha256} for s in sections],
        separators=(",", ":"),
    )


def rows_of(plan: Plan[T], refs: Iterable[str] = ()) -> tuple[list[Write], T]:
    """Run ``plan`` against no backend at all: the rows it would write, and what it returns.
    Each trajectory entry gets the next of ``refs`` as its reference (None when they run out);
    every other write returns None. For tests and for inspecting what a turn would record."""
    given = iter(refs)
    writes: list[Write] = []
    try:
        write = next(plan)
        while True:
            writes.append(write)
            write = plan.send(next(given, None) if write.part == "trajectory" else None)
    except StopIteration as done:
        return writes, done.value


class Recorder:
    """Turns projections and model calls into rows under one recording policy; no I/O.

    ``trajectory``: the backend keeps a trajectory and the policy wants it (plans then yield
    its entries). ``clock`` stamps snapshot rows and turn inputs (``time.time``)."""

    def __init__(
        self,
        *,
        trajectory: bool = False,
        capture_full_text: bool = False,
        redactor: Redactor | None = None,
        full_text_max_bytes: int = 65_536,
        clock: Callable[[], float] = time.time,
        cache: CacheTracker | None = None,
    ) -> None:
        self.trajectory = trajectory
        self.capture_full_text = capture_full_text
        self.redactor = redactor if redactor is not None else Redactor.from_patterns()
        self.full_text_max_bytes = full_text_max_bytes
        self.clock = clock
        self._prefix_by_text: dict[str, tuple[str, str]] = {}
        self._session_prefix_refs: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()
        #: Each recently active session's previous call, for its next call's cacheable prefix
        #: (shared by the recorders of one backend: ``cache_prefix.tracker_of``).
        self.cache = cache if cache is not None else CacheTracker()

    @classmethod
    def of(cls, policy: Policy, *, trajectory: bool = True, cache: CacheTracker | None = None) -> Recorder:
        """The recorder of ``policy``; ``trajectory`` False when the backend keeps none;
        ``cache`` the backend's tracker (``cache_prefix.tracker_of``)."""
        capture, wanted, patterns, defaults, max_bytes = policy
        return cls(
            trajectory=wanted and trajectory,
            capture_full_text=capture,
            redactor=Redactor.from_patterns(list(patterns), defaults=defaults),
            full_text_max_bytes=max_bytes,
            cache=cache,
        )

    # --- per composition -------------------------------------------------------------------

    def projection(
        self,
        projection: ProjectedContext,
        request: ProjectionRequest,
        *,
        snapshots: bool = True,
        inputs: bool = True,
        config: tuple[str, str] | None = None,
        keep: Callable[[TurnRecord], None] | None = None,
    ) -> Plan[TurnRecord | None]:
        """A composed, recorded, non-incognito turn: its injection-log row; with ``snapshots``
        its manifest (returned, for the turn's calls, and handed to ``keep`` as soon as it is
        built, so a failed later row does not lose it) and trajectory entry; with ``inputs``
        also its ``TurnInputs`` (``config``: the configuration's JSON and hash, when dumped
        already)."""
        yield Write("injections", "record", (injection_row(projection),))
        if not snapshots:
            return None
        reason = str(request.extra.get("reason", "turn"))
        turn = yield from self.turn(projection, query=request.query, reason=reason)
        if keep is not None:
            keep(turn)
        if inputs:
            yield Write("snapshots", "put_inputs", (self.inputs(projection, request, turn, config),))
        return turn

    def turn(
        self, projection: ProjectedContext, *, query: str = "", reason: str = "turn"
    ) -> Plan[TurnRecord]:
        """The turn's shared manifest, and its trajectory entry (no text when incognito)."""
        incognito = projection.incognito
        sections = []
        for s in projection.sections:
            if s.suppressed is not None or s.error is not None:
                continue
            entry = {
                "label": s.name,
                "chars": s.chars,
                "sha256": None if incognito else getattr(s, "sha256", None),
                "ids": list(s.item_ids),
                "truncated": s.truncated,
            }
            if "fallback" in s.meta:  # the turn degraded (the embedder failed): say so
                entry["fallback"] = str(s.meta["fallback"])
            sections.append(entry)
        psha = None if incognito or not projection.text else _sha(projection.text)
        ref = None
        if self.trajectory:
            data: dict[str, Any] = {
                "turn_index": projection.turn_index,
                "reason": reason,
                "mode": projection.mode,
                "incognito": incognito,
                "sections": sections,
                "budget_chars": projection.budget_chars,
                "used_chars": projection.used_chars,
                "budget": budget_rows(projection, errors=not incognito),
                "overflow": shed_steps(projection),
            }
            if not incognito:
                data["query"] = query
                data["sha256"] = psha
                data["text"] = projection.text
            ref = _ref((yield Write("trajectory", "append", (projection.session_id, "projection", data))))
        return TurnRecord(
            session_id=projection.session_id,
            turn_index=projection.turn_index,
            mode=projection.mode,
            incognito=incognito,
            projection_sha256=psha,
            sections_json=json.dumps(sections, separators=(",", ":")),
            budget_chars=projection.budget_chars,
            used_chars=projection.used_chars,
            text="" if incognito else projection.text,
            trajectory_ref=ref,
        )

    def inputs(
        self,
        projection: ProjectedContext,
        request: ProjectionRequest,
        turn: TurnRecord,
        config: tuple[str, str] | None = None,
    ) -> TurnInputs:
        """The turn's ``TurnInputs`` (what ``explain`` and ``replay`` read back)."""
        return turn_inputs(
            projection,
            request,
            trajectory_ref=turn.trajectory_ref,
            projection_sha256=turn.projection_sha256,
            config=config,
            created_at=self.clock(),
        )

    # --- per model call --------------------------------------------------------------------

    def call(
        self,
        call: ModelCall,
        turn: TurnRecord | None,
        *,
        query: str = "",
        reason: str = "turn",
        keep: Callable[[TurnRecord], None] | None = None,
    ) -> Plan[TurnRecord]:
        """One model call's prompt snapshot, after the stable prefix (once per session and hash)
        and, for a turn not recorded at composition (``turn`` None: incognito, or recording
        turned on late), the turn's manifest (handed to ``keep`` once built). Returns the
        turn's record, for its next calls."""
        projection = call.projection
        if turn is None:
            turn = yield from self.turn(projection, query=query, reason=reason)
            if keep is not None:
                keep(turn)
        incognito = projection.incognito
        prefix = self._remembered(call.prefix, projection.session_id, incognito)
        if prefix is None:  # the session's first call with this prefix (or an incognito one)
            prefix = yield from self.prefix(
                call.prefix, session_id=projection.session_id, incognito=incognito
            )
        cache = self.cache_prefix(call)
        row = self.snapshot_row(
            session_id=projection.session_id,
            turn_index=projection.turn_index,
            call_index=call.call_index,
            prefix=prefix,
            turn=turn,
            stripped=call.stripped,
            history_messages=call.history_messages,
            history_chars=call.history_chars,
            incognito=incognito,
            mode=projection.mode,
            full_text=call.full_text,
            cache=cache,
        )
        yield Write("snapshots", "put", (row,))
        return turn

    def cache_prefix(self, call: ModelCall) -> CachePrefix | None:
        """The call's cacheable prefix (stable prefix + history as delivered) compared with the
        session's previous call; None when the call carries no history digests (an adapter
        that builds its ``ModelCall`` by hand)."""
        if call.history_digests is None:
            return None
        prefix = call.prefix
        sections: tuple[tuple[str, str], ...] = ()
        if prefix is None:
            text, sha = "", ""
        else:
            sha, _json, text = self._prefix_parts(prefix)  # hashed once per text
            if isinstance(prefix, StablePrefix):
                sections = tuple((s.name, s.sha256) for s in prefix.sections)
            else:
                sections = (("system_prompt", sha),)
        return self.cache.observe(
            call.session_id,
            # A session's first call: turn 0, or the first question with nothing before it.
            first_call=call.call_index == 0 and (call.turn_index == 0 or len(call.history_digests) <= 1),
            prefix_text=text,
            prefix_sha=sha,
            sections=sections,
            messages=call.history_digests,
            incognito=call.projection.incognito,
        )

    def _prefix_parts(self, prefix: StablePrefix | str) -> tuple[str, str, str]:
        """(sha256, section manifest JSON, text) of a prefix, hashed once per text."""
        if isinstance(prefix, StablePrefix):
            text = prefix.text
            cached = self._prefix_by_text.get(text)
            if cached is None:
                cached = self._prefix_by_text[text] = (prefix.sha256, _prefix_sections_json(prefix.sections))
        else:
            text = prefix
            cached = self._prefix_by_text.get(text)
            if cached is None:
                sha = _sha(text)
                sections = _prefix_sections_json([PrefixSection("system_prompt", "", len(text), sha)])
                cached = self._prefix_by_text[text] = (sha, sections)
        return cached[0], cached[1], text

    def _remembered(
        self, prefix: StablePrefix | str | None, session_id: str, incognito: bool
    ) -> PrefixRef | None:
        """The prefix's reference when this session has registered it already (no row to write)."""
        if prefix is None or incognito:
            return None
        sha, sections_json, _text = self._prefix_parts(prefix)
        ref = self._session_prefix_refs.get((session_id, sha))
        return None if ref is None else PrefixRef(sha, sections_json, ref or None)

    def prefix(
        self, prefix: StablePrefix | str | None, *, session_id: str = "", incognito: bool = False
    ) -> Plan[PrefixRef]:
        """The stable prefix by reference: its text registered once per session and hash (never
        for incognito, which registers the manifest only) with one trajectory entry. Two first
        calls of one session at once may both register it (registering is idempotent)."""
        if prefix is None:
            return PrefixRef(None, None)
        sha, sections_json, text = self._prefix_parts(prefix)
        if incognito:
            yield Write("snapshots", "register_prefix", (sha, None, sections_json))
            return PrefixRef(sha, sections_json)
        key = (session_id, sha)
        ref = self._session_prefix_refs.get(key)
        if ref is None:
            yield Write("snapshots", "register_prefix", (sha, text, sections_json))
            ref = ""
            if self.trajectory:
                data = {"sha256": sha, "text": text}
                ref = _ref((yield Write("trajectory", "append", (session_id, "stable_prefix", data)))) or ""
            with self._lock:  # the first to finish is what every later call cites
                ref = self._session_prefix_refs.setdefault(key, ref)
        return PrefixRef(sha, sections_json, ref or None)

    def snapshot_row(
        self,
        *,
        session_id: str,
        turn_index: int,
        call_index: int,
        prefix: PrefixRef,
        turn: TurnRecord | None,
        stripped: Sequence[StrippedFrame] = (),
        history_messages: int = 0,
        history_chars: int = 0,
        incognito: bool = False,
        mode: str = "native",
        full_text: Callable[[], str] | None = None,
        created_at: float | None = None,
        cache: CachePrefix | None = None,
    ) -> SnapshotRow:
        """One call's snapshot row. ``full_text`` is called only when capture is on and the call
        is not incognito, so the caller never builds the text otherwise."""
        incognito = incognito or (turn is not None and turn.incognito)
        refs = [r for r in (prefix.trajectory_ref, turn.trajectory_ref if turn else None) if r]
        frames = (
            "[]"
            if not stripped
            else json.dumps(
                [
                    {"id": f.message_id, "chars": f.chars, "sha256": None if incognito else f.sha256}
                    for f in stripped
                ],
                separators=(",", ":"),
            )
        )
        text = None
        if self.capture_full_text and not incognito and full_text is not None:
            text = capture_text(full_text(), self.redactor, self.full_text_max_bytes)
        return SnapshotRow(
            session_id,
            turn_index,
            call_index,
            self.clock() if created_at is None else created_at,
            turn.mode if turn is not None else mode,
            incognito,
            prefix.sha256,
            prefix.sections_json,
            turn.projection_sha256 if turn is not None else None,
            turn.sections_json if turn is not None else "[]",
            turn.budget_chars if turn is not None else None,
            turn.used_chars if turn is not None else 0,
            history_messages,
            history_chars,
            frames,
            json.dumps(refs) if refs else "[]",
            text,
            *(
                (None, None, None, None)
                if cache is None
                else (cache.sha256, cache.chars, cache.shared, cache.break_json())
            ),
        )


def _ref(sent: object) -> str | None:
    """A trajectory entry's reference as the writer sent it back."""
    return None if sent is None else str(sent)
