"""``explain``: for one memory and one turn, exactly one verdict with its evidence.

"Why wasn't this memory used?" has one answer per turn, found by asking in the order the
pipeline decides (the first rule that applies is the verdict):

1. **delivered**: in the section, at a place, taking so many chars (for a past turn, from
   the turn's recorded manifest: what was delivered, not what would be now);
2. **filtered** because of the memory's state then: ``purged``, ``not_written_yet``,
   ``rejected``, ``superseded`` (by #id), ``invalidated``, ``expired``; because of the turn:
   ``incognito``, ``out_of_scope`` (not in the turn's scopes), ``policy_on_demand``,
   ``below_min_trust``, ``below_min_relevance`` (the search found it, but the question's best
   match was under ``context.min_relevance``, so nothing was retrieved); or because the section
   that carries its policy did not run:
   ``goal_turn``, ``not_selected`` (a subagent's contract), ``section_disabled``,
   ``section_failed``;
3. **shed**: the section drafted it, the budget shed it (which step, under which budget); or
   the search ranked it within the section's depth, but the rows above it already filled the
   budget, so it was never offered;
4. **never retrieved**: its rank for the turn's query in each retrieval leg and in the final
   list, and the cut-off it missed;
5. **not offered**: none of the above explains it (a section's own rule left it out).

A past turn is judged from its recorded inputs against the store as of the history position
it read (``explain.turns``), so the answer is about what happened then; ``--query`` judges a
turn composed now.

Split by job: ``evidence`` (the ``Verdict`` and what rules share), ``filters`` (delivered and
filtered), ``ranking`` (shed, below relevance, past budget, never retrieved); this module asks
them in the pipeline's order (``judge``) and is the entry point (``explain``). It re-exports the
names it had as one module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from contextplane.config import Config
from contextplane.errors import ValidationError
from contextplane.explain import evidence, filters, ranking
from contextplane.explain.evidence import (
    POLICY_SECTIONS,
    Verdict,
    VerdictKind,
    _event_evidence,
    _filtered,
    _frozen,
    _last,
    _plain,
    _row_of,
    _Turn,
)
from contextplane.explain.filters import (
    _delivered,
    _gone,
    _lifecycle,
    _request_rules,
    _section_rules,
    _would_offer,
)
from contextplane.explain.ranking import (
    _below_relevance,
    _cut_off,
    _never_retrieved,
    _past_budget,
    _retrieval,
    _shed,
)
from contextplane.explain.turns import (
    TurnNotRecorded,
    config_for,
    events_of,
    load_inputs,
    past_view,
    position_of,
    request_for,
)
from contextplane.memory.history import HistoryEvent
from contextplane.plugins import PluginHost, get_host
from contextplane.projection import compose
from contextplane.request import ProjectionRequest
from contextplane.shims import patch_through


def judge(turn: _Turn, memory_id: str, host: PluginHost, events: Sequence[HistoryEvent]) -> Verdict:
    """The verdict for one memory in one (rebuilt) turn."""
    if turn.request.incognito:
        return _filtered(
            turn, memory_id, "incognito", "the turn was incognito: no memory section is composed", {}
        )
    chunk = turn.view.get(memory_id)
    projection = compose(turn.request, host=host, strict=False)
    found = _delivered(turn, projection, memory_id)
    if found is not None:
        return found
    if chunk is None:
        return _gone(turn, events, memory_id)
    verdict = (
        _lifecycle(turn, chunk, events, memory_id)
        or _request_rules(turn, chunk, memory_id)
        or _section_rules(turn, projection, chunk, memory_id, host)
        or _shed(turn, projection, memory_id)
        or _below_relevance(turn, projection, chunk, memory_id)
        or _past_budget(turn, projection, chunk, memory_id)
        or _never_retrieved(turn, projection, chunk, memory_id)
    )
    if verdict is not None:
        return verdict
    return Verdict(
        memory_id,
        "not_offered",
        None,
        f"memory {memory_id} was deliverable and in scope, but no section offered it this turn",
        {"delivery_policy": chunk.effective_delivery_policy},
        turn.info,
    )


@contextlib.contextmanager
def _now_view(backend: Any) -> Iterator[Any]:
    store = backend.memories
    opener = getattr(store, "consistent_read", None)
    if opener is None:
        yield store
        return
    with opener() as view:
        yield view


def explain(
    memory_id: str,
    *,
    backend: Any,
    host: PluginHost | None = None,
    session_id: str | None = None,
    turn_index: int | None = None,
    query: str | None = None,
    project: str | None = None,
    incognito: bool = False,
    goal_turn: bool = False,
    config: Config | None = None,
    exact_ranking: bool = True,
) -> Verdict:
    """Why memory ``memory_id`` was (or was not) delivered in one turn.

    A recorded turn: ``session_id`` and ``turn_index``; it is judged from its recorded
    inputs against the store as of that turn. A turn composed now: ``query`` (with the
    optional ``session_id``, ``project``, ``incognito`` and ``goal_turn`` of that turn)."""
    if not isinstance(memory_id, str) or not memory_id.strip():
        raise ValidationError(f"memory_id: expected a memory id, got {memory_id!r}")
    host = host if host is not None else get_host()
    past = turn_index is not None
    if past == (query is not None):
        raise ValidationError(
            "explain: give either a recorded turn (session_id and turn_index) "
            "or a query (a turn composed now)"
        )
    events = events_of(backend.memories, memory_id)
    if past:
        if session_id is None:
            raise ValidationError("explain: turn_index needs the session_id of the turn")
        assert turn_index is not None
        try:
            inputs = load_inputs(backend, session_id, turn_index)
        except TurnNotRecorded as exc:
            if "was incognito" in str(exc):
                info = {"session_id": session_id, "turn_index": turn_index, "basis": "recorded"}
                return Verdict(
                    memory_id,
                    "filtered",
                    "incognito",
                    f"memory {memory_id} was filtered: the turn was incognito, "
                    "so no memory section was composed",
                    {"recorded": "nothing but a snapshot of references (incognito)"},
                    info,
                )
            raise
        notes: list[str] = []
        cfg = config if config is not None else config_for(inputs, host.config, notes)
        with past_view(backend, inputs, exact_ranking=exact_ranking) as (view, past_backend):
            position = position_of(inputs)
            request = request_for(inputs, cfg, store=view, backend=past_backend)
            info = {
                "session_id": session_id,
                "turn_index": turn_index,
                "query": inputs.query,
                "basis": "recorded",
                "history_position": None if position is None else position.to_dict(),
                **({"notes": notes} if notes else {}),
            }
            turn = _Turn(request, view, inputs.section_manifest(), position, info)
            return judge(turn, memory_id, host, events)
    assert query is not None
    cfg = config if config is not None else host.config
    with _now_view(backend) as view:
        position = view.history_position() if hasattr(type(view), "history_position") else None
        request = ProjectionRequest(
            query=query,
            config=cfg,
            knowledge_store=view,
            session_id=session_id or "",
            project=project if project is not None else cfg.context.project,
            incognito=incognito,
            goal_turn=goal_turn,
            record=False,
            backend=backend,
        )
        info = {
            "session_id": session_id or "",
            "query": query,
            "basis": "now",
            "history_position": None if position is None else position.to_dict(),
        }
        return judge(_Turn(request, view, None, position, info), memory_id, host, events)


patch_through(__name__, (evidence, filters, ranking))

__all__ = [
    "POLICY_SECTIONS",
    "Verdict",
    "VerdictKind",
    "_Turn",
    "_below_relevance",
    "_cut_off",
    "_delivered",
    "_event_evidence",
    "_filtered",
    "_frozen",
    "_gone",
    "_last",
    "_lifecycle",
    "_never_retrieved",
    "_now_view",
    "_past_budget",
    "_plain",
    "_request_rules",
    "_retrieval",
    "_row_of",
    "_section_rules",
    "_shed",
    "_would_offer",
    "explain",
    "judge",
]
