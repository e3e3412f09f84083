"""``run_config``: a ``RunConfig`` whose ``call_model_input_filter`` is contextplane's.

One filter per run (or per session whose runs follow one another): a filter keeps the turn
it is delivering, so concurrent runs of different sessions each get their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from agents import RunConfig
from agents.memory import Session
from agents.memory.session_settings import resolve_session_limit

from contextplane.runtime import Runtime
from contextplane.types import StablePrefix
from contextplane_openai_agents.input_filter import ContextPlaneInputFilter, Flag


def run_config(
    runtime: Runtime,
    *,
    session: Session | None = None,
    session_id: str | None = None,
    base: RunConfig | None = None,
    incognito: Flag = False,
    goal_turn: Flag = False,
    state: Mapping[str, Any] | Callable[[Any], Mapping[str, Any]] | None = None,
    budget_tokens: int | None = None,
    context_window: int | None = None,
    project: str | None = None,
    prefix: StablePrefix | str | None = None,
) -> RunConfig:
    """``base`` (default ``RunConfig()``) with a new ``ContextPlaneInputFilter`` as its
    ``call_model_input_filter``; a filter ``base`` already has runs first (``inner``).

    The records are kept under ``session_id``, else the SDK ``session``'s id. When the model
    input may hold only part of ``session``'s history (the session has a ``limit``, or ``base``
    a ``session_input_callback``), the filter numbers turns from the whole session."""
    if session_id is None:
        session_id = session.session_id if session is not None else ""
    base = base if base is not None else RunConfig()
    flt = ContextPlaneInputFilter(
        runtime,
        session_id=session_id,
        incognito=incognito,
        goal_turn=goal_turn,
        state=state,
        budget_tokens=budget_tokens,
        context_window=context_window,
        project=project,
        prefix=prefix,
        inner=base.call_model_input_filter,
        session=session if session is not None and _trims(session, base) else None,
    )
    return dataclasses.replace(base, call_model_input_filter=flt)


def _trims(session: Session, base: RunConfig) -> bool:
    """Whether the model input may hold only part of ``session``'s history."""
    settings = getattr(session, "session_settings", None)
    return base.session_input_callback is not None or resolve_session_limit(None, settings) is not None


__all__ = ["run_config"]
