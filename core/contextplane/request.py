"""What a section provider is handed: the build context and the per-turn projection request.

Both are frozen so one provider cannot change what the next one sees.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from contextplane.config import Config


class Mode(enum.Enum):
    """The runtime mode of a turn (ADR "Authority and persistence boundaries")."""

    NATIVE = "native"
    EXTERNAL = "external"
    SUBAGENT = "subagent"
    GOAL_TURN = "goal_turn"
    INCOGNITO = "incognito"


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


@attrs.frozen
class BuildContext:
    """Inputs of the stable prefix, known once when the runtime is built (ADR D1)."""

    config: Config
    #: Names of the tools bound at build time; tool guidance must name no other tool.
    tools: tuple[str, ...] = attrs.field(converter=_names, factory=tuple)
    #: Tool descriptions by name, when the runtime has them.
    tool_descriptions: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping)
    extra: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)


@attrs.frozen
class ProjectionRequest:
    """One turn's inputs to ``compose_projected_context``.

    ``namespaces`` is the scope allow-list for memory reads: global (``""``) plus the turn's
    project and session scopes. Providers must never read outside it.
    """

    query: str
    config: Config
    knowledge_store: Any = None
    skills_index: Sequence[Any] | None = None
    state: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    session_id: str = ""
    turn_index: int = 0
    project: str | None = None
    incognito: bool = False
    goal_turn: bool = False
    mode: Mode = Mode.NATIVE
    extra: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)

    @property
    def namespaces(self) -> tuple[str, ...]:
        scopes = [""]
        if self.project:
            scopes.append(f"project:{self.project}")
        if self.session_id:
            scopes.append(f"session:{self.session_id}")
        return tuple(scopes)
