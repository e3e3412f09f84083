"""How a composed turn becomes a ``TurnInputs`` record (the recording policy, not the storage).

Everything here is data the request and the projection already hold; the per-turn cost is
JSON for the working state and the section manifest (the configuration's JSON is made once per
runtime). Never called for an incognito turn.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from contextplane.config import Config
from contextplane.memory.model import format_timestamp
from contextplane.records.turn_inputs import TurnInputs
from contextplane.request import ProjectionRequest, thaw
from contextplane.types import ProjectedContext

_INTERNAL = ("base_dir", "source")


def config_data(config: Config) -> dict[str, Any]:
    """The configuration as the data ``config.structure`` rebuilds it from (no internal fields)."""
    data = attrs.asdict(config)
    for name in _INTERNAL:
        data.pop(name, None)
    return data


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def config_json(config: Config) -> tuple[str, str]:
    """(JSON, sha256) of the configuration. Not memoised (~60 µs): a ``Runtime`` dumps its
    configuration once (``dump_config``) and hands it down, so only a turn composed without one
    pays this, and no process-wide table keyed by the configuration's identity is kept."""
    return dump_config(config)


def dump_config(config: Config) -> tuple[str, str]:
    """(JSON, sha256) of the configuration, uncached."""
    text = _dumps(config_data(config))
    return text, hashlib.sha256(text.encode()).hexdigest()


def _json_or_repr(value: Any) -> tuple[str, bool]:
    """JSON of plain data; a value that is not JSON data is recorded as its ``repr`` (and the
    record says the value cannot be rebuilt)."""
    plain = thaw(value)
    # Key order is kept: a section may render the state in the order it was given.
    try:
        return json.dumps(plain, separators=(",", ":"), ensure_ascii=False), True
    except (TypeError, ValueError):
        return json.dumps(plain, separators=(",", ":"), ensure_ascii=False, default=repr), False


def _skill(value: Any) -> Any:
    if attrs.has(type(value)):
        return attrs.asdict(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return repr(value)


def manifest(projection: ProjectedContext) -> list[dict[str, Any]]:
    """Per section: label, plugin, chars, sha256, delivered ids, offered count, truncated,
    suppressed, error (what a replay compares, and explains a difference by)."""
    return [
        {
            "label": s.name,
            "plugin": s.plugin,
            "chars": s.chars,
            "sha256": s.sha256,
            "ids": list(s.item_ids),
            "offered": s.offered,
            "truncated": s.truncated,
            "suppressed": s.suppressed,
            "error": s.error,
        }
        for s in projection.sections
    ]


def turn_inputs(
    projection: ProjectedContext,
    request: ProjectionRequest,
    *,
    trajectory_ref: str | None = None,
    projection_sha256: str | None = None,
    config: tuple[str, str] | None = None,
    created_at: float | None = None,
) -> TurnInputs:
    """The record of one composed, recorded, non-incognito turn (``projection_sha256``: the
    text's hash when the caller has it already; ``config``: the request's configuration as
    ``dump_config`` gives it, when the caller has it already; ``created_at``: now)."""
    state, exact = _json_or_repr(request.state)
    config_text, config_sha = config if config is not None else config_json(request.config)
    position = projection.as_of
    skills = None if request.skills_index is None else _dumps([_skill(s) for s in request.skills_index])
    return TurnInputs(
        session_id=request.session_id,
        turn_index=request.turn_index,
        created_at=time.time() if created_at is None else created_at,
        query=request.query,
        state=state,
        state_exact=exact,
        surface=request.surface.value,
        goal_turn=request.goal_turn,
        project=request.project,
        only_sections=None if request.only_sections is None else _dumps(sorted(request.only_sections)),
        budget_tokens=request.budget_tokens,
        context_window=request.context_window,
        skills_index=skills,
        extra=_json_or_repr(request.extra)[0],
        config=config_text,
        config_sha256=config_sha,
        config_base_dir=request.config.base_dir,
        plugins=_dumps(dict(projection.plugins)),
        history_seq=None if position is None else int(position.seq),
        history_at=None if position is None else format_timestamp(position.at),
        projection_sha256=projection_sha256
        or (hashlib.sha256(projection.text.encode()).hexdigest() if projection.text else None),
        sections=_dumps(manifest(projection)),
        budget_chars=projection.budget_chars,
        used_chars=projection.used_chars,
        trajectory_ref=trajectory_ref,
    )
