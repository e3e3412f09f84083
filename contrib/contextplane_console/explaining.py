"""The explain view: why one memory was, or was not, delivered in one turn.

The verdict is ``contextplane.explain.explain``'s, the one the ``contextplane explain`` command
prints: the console parses the request, calls it, and renders what it returns. It judges no
memory itself, so the page, the API and the command can never disagree. Its evidence is shown
generically (every key, lists of records as tables), so evidence a later version adds, such as
a search's term plan, appears without a change here; only memory ids are recognised, to link
them to their rows.

Two kinds of turn: a recorded one (``session`` and ``turn``: judged from its recorded inputs
against the store as of that turn), or one composed now for a ``query`` (with the turn's
``session``, ``project``, ``incognito`` and ``goal_turn``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from contextplane import Backend, PluginHost
from contextplane.explain import TurnNotRecorded, Verdict, explain
from contextplane_console.errors import refuse
from contextplane_console.lineage import events
from contextplane_console.params import checkbox, whole
from contextplane_console.preview import project_id

#: The query parameters ``GET /api/explain`` and ``GET /explain`` read.
PARAMS: Final[tuple[str, ...]] = ("memory", "session", "turn", "query", "project", "incognito", "goal_turn")
#: Evidence keys whose values are memory ids (linked to their rows).
MEMORY_ID_KEYS: Final[frozenset[str]] = frozenset({"superseded_by", "results", "memory_id", "supersedes"})
#: How many recent recorded turns the explain form offers to pick from.
RECENT_TURNS: Final[int] = 40


@attrs.frozen
class ExplainRequest:
    memory_id: str
    session_id: str | None = None
    turn_index: int | None = None
    query: str | None = None
    project: str | None = None
    incognito: bool = False
    goal_turn: bool = False

    @property
    def recorded(self) -> bool:
        return self.turn_index is not None

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> ExplainRequest:
        """Read one explain request, refusing by name: the memory, and either a recorded turn
        or a query, never both."""
        unknown = sorted(set(params) - set(PARAMS))
        if unknown:
            raise refuse(unknown[0], f"unknown parameter; explain reads {', '.join(PARAMS)}")
        memory = (params.get("memory") or "").strip()
        if not memory:
            raise refuse("memory", "required: the id of the memory to explain")
        session = (params.get("session") or "").strip() or None
        turn = whole(params, "turn", default=None, lo=0)
        raw_query = params.get("query")
        query = raw_query if raw_query is not None and raw_query.strip() else None
        if turn is not None and query is not None:
            raise refuse(
                "query",
                "give either a recorded turn (session and turn) or a query (a turn composed now), not both",
            )
        if turn is None and query is None:
            if session is not None:
                raise refuse("turn", f"required: which recorded turn of session {session!r} to explain")
            raise refuse(
                "query",
                "required: a query (explain a turn composed now), or session and turn (a recorded turn)",
            )
        if turn is not None and session is None:
            raise refuse("session", "required: the session of the recorded turn")
        project = (params.get("project") or "").strip() or None
        incognito, goal_turn = checkbox(params, "incognito"), checkbox(params, "goal_turn")
        if turn is not None:
            for name, given in (("project", project), ("incognito", incognito), ("goal_turn", goal_turn)):
                if given:
                    raise refuse(
                        name, "only with a query: a recorded turn is judged with its recorded options"
                    )
        project = project_id(params.get("project"))
        return cls(memory, session, turn, query, project, incognito, goal_turn)


def run_explain(backend: Backend, host: PluginHost, req: ExplainRequest) -> Verdict:
    """The verdict, or a refusal: 404 naming the memory (no row and no history of one) or the
    turn (nothing recorded for it, with the turns that were)."""
    store = backend.memories
    if store.get(req.memory_id) is None and not events(store, req.memory_id):
        raise refuse("memory", f"no memory with id {req.memory_id!r}", status=404)
    try:
        return explain(
            req.memory_id,
            backend=backend,
            host=host,
            session_id=req.session_id,
            turn_index=req.turn_index,
            query=req.query,
            project=req.project,
            incognito=req.incognito,
            goal_turn=req.goal_turn,
        )
    except TurnNotRecorded as exc:
        assert req.session_id is not None
        if not backend.snapshots.list(req.session_id, limit=1):
            raise refuse(
                "session", f"no recorded turns for session {req.session_id!r} (the sessions: /sessions)", 404
            ) from None
        raise refuse("turn", str(exc), status=404) from None


def verdict_json(verdict: Verdict) -> dict[str, Any]:
    """``Verdict.to_dict()``: what ``contextplane explain --json`` prints."""
    return verdict.to_dict()


def recent_turns(backend: Backend, limit: int = RECENT_TURNS) -> list[dict[str, Any]]:
    """The newest recorded turns (session, turn, incognito), for the form's picker."""
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    newest = sorted(backend.snapshots.list(None, limit=limit * 4), key=lambda s: -s.created_at)
    for snap in newest:
        key = (snap.session_id, snap.turn_index)
        if key not in seen:
            seen[key] = {
                "session_id": snap.session_id,
                "turn_index": snap.turn_index,
                "incognito": snap.incognito,
            }
    return list(seen.values())[:limit]


def is_record_list(value: Any) -> bool:
    """A list of records (rendered as a table, one column per key)."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def columns(rows: list[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(k for row in rows for k in row))
