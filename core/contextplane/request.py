"""What a section provider is handed: the build context and the per-turn projection request.

The request is the single input of composition. Adapters build one; the core derives every
mode rule from it, in one place (``ProjectionRequest.suppression``). It is immutable all the
way down: ``state`` and ``extra`` are frozen deeply, so one provider cannot change what the
next one sees, whatever it does to the mappings and lists it is handed.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:
    from contextplane.config import Config
    from contextplane.records.protocol import Backend
    from contextplane.store.protocol import KnowledgeStore


class Surface(enum.Enum):
    """Which runtime surface composes the turn (ADR "Authority and persistence boundaries").

    Incognito and goal turns are not surfaces: they are independent flags on the request, so
    an incognito goal turn on an external runtime is one request, not a conflict to resolve.
    """

    NATIVE = "native"
    EXTERNAL = "external"
    SUBAGENT = "subagent"


class FrozenDict(Mapping[str, Any]):
    """A read-only mapping whose values are frozen too (see ``deep_freeze``).

    Hashable only when its values are; compares equal to any mapping with the same items.
    """

    __slots__ = ("_data",)
    _data: dict[str, Any]

    def __init__(self, data: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        object.__setattr__(self, "_data", {k: deep_freeze(v) for k, v in dict(data).items()})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FrozenDict is read-only")

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._data) == dict(other)
        return NotImplemented

    def thaw(self) -> dict[str, Any]:
        """A mutable deep copy (for a provider that wants to build on the state)."""
        return {k: thaw(v) for k, v in self._data.items()}


def deep_freeze(value: Any) -> Any:
    """Mappings become ``FrozenDict``, lists and tuples tuples, sets frozensets, recursively.

    Other objects are passed through as they are: the request cannot freeze an arbitrary
    object, so working state should be plain data (which is what the envelopes render).
    """
    if isinstance(value, FrozenDict):
        return value
    if isinstance(value, Mapping):
        return FrozenDict(value)
    if isinstance(value, list | tuple):
        return tuple(deep_freeze(v) for v in value)
    if isinstance(value, set | frozenset):
        return frozenset(deep_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The inverse of ``deep_freeze``: plain dicts and lists again."""
    if isinstance(value, FrozenDict):
        return value.thaw()
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    if isinstance(value, frozenset):
        return {thaw(v) for v in value}
    return value


class SectionFlags(Protocol):
    """What ``ProjectionRequest.suppression`` reads of a section (``ContextSection`` is one). A
    protocol, not the class: a section's ``draft`` takes the request, so ``sections`` imports
    this module, and this module must not import it back."""

    @property
    def name(self) -> str: ...

    @property
    def carries_memory(self) -> bool: ...

    @property
    def goal_suppressed(self) -> bool: ...


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _frozen_mapping(value: Mapping[str, Any] | None) -> FrozenDict:
    return value if isinstance(value, FrozenDict) else FrozenDict(value or {})


def _optional_tuple(value: Iterable[Any] | None) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


def _optional_names(value: Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset((value,))
    return frozenset(value)


@attrs.frozen
class BuildContext:
    """Inputs of the stable prefix, known once when the runtime is built (ADR D1)."""

    config: Config
    #: Names of the tools bound at build time; tool guidance must name no other tool.
    tools: tuple[str, ...] = attrs.field(converter=_names, factory=tuple)
    #: Tool descriptions by name, when the runtime has them.
    tool_descriptions: Mapping[str, str] = attrs.field(factory=FrozenDict, converter=_frozen_mapping)
    extra: Mapping[str, Any] = attrs.field(factory=FrozenDict, converter=_frozen_mapping)


@attrs.frozen(eq=False)
class ProjectionRequest:
    """One turn's inputs to composition: what the turn is, and where its records go.

    ``knowledge_store`` is what memory sections read. During composition the core replaces it
    with a point-in-time view of the store (``KnowledgeStore.consistent_read``), so every
    section of one projection sees the same committed state. ``backend`` is where the records
    of the turn go (injection log, session summaries, snapshots); ``None`` records nothing.
    Both are wiring, not turn data: a ``contextplane.runtime.Runtime`` resolves them once and
    passes them here (``Runtime.request``), because sections read them from the request. An
    adapter should not set them itself; it passes them to ``open_runtime`` (a request built
    by hand with its own store and no backend still has its backend resolved per composition).

    ``namespaces`` is the scope allow-list for memory reads: global (``""``) plus the turn's
    project and session scopes. Providers must never read outside it.
    """

    query: str
    config: Config
    knowledge_store: KnowledgeStore | None = None
    #: The skills the skills section lists: whatever entries it accepts (its ``Skill``, mappings).
    skills_index: Sequence[object] | None = attrs.field(default=None, converter=_optional_tuple)
    state: Mapping[str, Any] = attrs.field(factory=FrozenDict, converter=_frozen_mapping)
    session_id: str = ""
    turn_index: int = 0
    project: str | None = None
    surface: Surface = attrs.field(default=Surface.NATIVE, converter=Surface)
    incognito: bool = False
    goal_turn: bool = False
    #: The sections a subagent contract opted into; ``None`` means every registered section.
    only_sections: frozenset[str] | None = attrs.field(default=None, converter=_optional_names)
    budget_tokens: int | None = None
    context_window: int | None = None
    #: False composes without notifying observers (previews): nothing is recorded.
    record: bool = True
    backend: Backend | None = None
    extra: Mapping[str, Any] = attrs.field(factory=FrozenDict, converter=_frozen_mapping)

    @property
    def namespaces(self) -> tuple[str, ...]:
        scopes = [""]
        if self.project:
            scopes.append(f"project:{self.project}")
        if self.session_id:
            scopes.append(f"session:{self.session_id}")
        return tuple(scopes)

    @property
    def mode(self) -> str:
        """One label for logs and records: incognito wins, then goal turn, then the surface."""
        if self.incognito:
            return "incognito"
        if self.goal_turn:
            return "goal_turn"
        return self.surface.value

    def suppression(self, section: SectionFlags) -> str | None:
        """Why ``section`` must not be drafted this turn, or None. The one place mode rules live:
        a subagent's subset, incognito (no memory, ADR D6), goal turn (no digest, ADR D9)."""
        if self.only_sections is not None and section.name not in self.only_sections:
            return "not_selected"
        if self.incognito and section.carries_memory:
            return "incognito"
        if self.goal_turn and section.goal_suppressed:
            return "goal_turn"
        return None

    def with_store(self, store: KnowledgeStore) -> ProjectionRequest:
        """The same request reading memory through ``store`` (the core's consistent view)."""
        return attrs.evolve(self, knowledge_store=store)
