"""The value types of a turn: what composition, delivery and the record pipeline hand each other.

Why a module of its own: these types were defined beside the behaviour that makes them
(``ProjectedContext`` in ``projection``, ``ModelCall`` in ``delivery``, ``StablePrefix`` in
``authority``, ``Registered`` in ``plugins``), so every module that only *reads* one (the records
observer, the hook specs, the snapshot recorder) had to import the engine, and the engine
imports the plugin host, which registers the observer: three import cycles that closed only
under ``TYPE_CHECKING``, paid for in ``Any``. Here they import no behaviour: only ``attrs``, the
standard library and the other value modules (``request``: the turn's input; ``sections``: what
a section author declares), which import no behaviour either. ``tests/core/test_import_cycles.py``
keeps it so.

The old homes re-export every name (``from contextplane.projection import ProjectedContext``
keeps working); new code imports from here. The request and section types are re-exported here
too, so one import reaches the whole vocabulary.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import attrs

from contextplane.prompt_parts import PrefixSection, StrippedFrame
from contextplane.request import BuildContext, FrozenDict, ProjectionRequest, Surface
from contextplane.sections import ContextSection, Draft, Envelope, PromptSection, Row, Shed

__all__ = [
    "CHARS_PER_TOKEN",
    "BuildContext",
    "ContextSection",
    "Delivered",
    "Draft",
    "Envelope",
    "FrozenDict",
    "InjectionRecord",
    "ModelCall",
    "PluginFailure",
    "PrefixSection",
    "ProjectedContext",
    "ProjectionRequest",
    "PromptSection",
    "Registered",
    "ReportFields",
    "Row",
    "SectionReport",
    "Shed",
    "ShedStep",
    "StablePrefix",
    "Step",
    "StrippedFrame",
    "Surface",
    "approx_tokens",
    "built_reports",
]

#: The ADR's token estimate (its non-goal: no tokenizer): chars // 4.
CHARS_PER_TOKEN = 4


def approx_tokens(chars: int) -> int:
    """The ADR's estimate: chars // 4."""
    return chars // CHARS_PER_TOKEN


# --- the plugin host's records ----------------------------------------------------------------


@attrs.frozen
class PluginFailure:
    """A plugin that could not load or whose hook failed; kept so ``contextplane plugins`` can show it."""

    plugin: str
    distribution: str | None
    stage: str
    error: str

    def describe(self) -> str:
        dist = f" (distribution {self.distribution})" if self.distribution else ""
        return f"plugin {self.plugin!r}{dist} failed during {self.stage}: {self.error}"


T = TypeVar("T")


@attrs.frozen
class Registered(Generic[T]):
    """A section together with the plugin that registered it."""

    section: T
    plugin: str


# --- the stable prefix (ADR D3) ----------------------------------------------------------------


@attrs.frozen
class StablePrefix:
    """The composed system prompt and where each part of it came from."""

    text: str
    sections: tuple[PrefixSection, ...]
    errors: tuple[str, ...] = ()

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.sections)


# --- the projected context (ADR D6, D8) -------------------------------------------------------


@attrs.frozen
class ShedStep:
    """One kind of shedding applied to one section: how many items and how many chars it freed."""

    section: str
    action: str  # "drop_row" | "degrade_row" | "drop_to_floor" | "drop_below_floor" | "drop_section"
    items: int
    chars: int


#: One shedding step as ``fitting.fit`` records it: a ``ShedStep``'s fields, (section, action, items,
#: chars). A plain tuple, because most steps are never read: the projection makes the
#: ``ShedStep`` objects when its ``overflow`` is first read.
Step = tuple[str, str, int, int]


def _frozen(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return dict(value or {})


@attrs.frozen
class SectionReport:
    """What happened to one context section this turn."""

    name: str
    plugin: str
    priority: int
    chars: int = 0
    item_ids: tuple[str, ...] = ()
    offered: int = 0
    truncated: bool = False
    error: str | None = None
    #: Why ``draft`` was not called: "incognito", "goal_turn" or "not_selected".
    suppressed: str | None = None
    #: Ids of the rows cut to ``context.max_row_chars`` (each ends with a "cut" marker line).
    cut: tuple[str, ...] = ()
    meta: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen)
    #: The section's rendered part of its envelope (kept for ``sha256``; not compared).
    rendered: str = attrs.field(default="", repr=False, eq=False)
    #: Every row the draft offered, in delivery order, before shedding (not compared).
    drafted: Sequence[Row] = attrs.field(default=(), repr=False, eq=False)

    @property
    def sha256(self) -> str | None:
        """sha256 of the rendered part (what snapshots reference); hashed when asked, because
        most projections (previews, unrecorded turns) never are."""
        if not self.rendered:
            return None
        # surrogatepass: a hash must never fail a turn, whatever a plugin's heading holds
        return hashlib.sha256(self.rendered.encode("utf-8", "surrogatepass")).hexdigest()

    @property
    def label(self) -> str:
        return self.name

    @property
    def offered_ids(self) -> tuple[str, ...]:
        """Ids of every row the draft offered, delivered or shed (``explain`` reads it)."""
        return tuple(r.id for r in self.drafted)


#: One ``SectionReport``'s fields in its order (name, plugin, priority, chars, item_ids, offered,
#: truncated, error, suppressed, cut, meta, rendered, drafted): what the engine captures from a
#: fitted plan (or a skipped section) when it assembles, so the report can be made when first read.
ReportFields = tuple[
    str,
    str,
    int,
    int,
    tuple[str, ...],
    int,
    bool,
    str | None,
    str | None,
    tuple[str, ...],
    Mapping[str, Any],
    str,
    Sequence[Row],
]

_DELIVERY_ORDER = attrgetter("priority", "name")


def built_reports(fields: Sequence[ReportFields], interleaved: bool) -> tuple[SectionReport, ...]:
    """The reports of one turn from their captured fields, in delivery order (priority, then
    name): ``fields`` lists the fitted sections in that order already, and the skipped ones
    after them; ``interleaved`` (some were skipped) sorts them into place."""
    reports = list(itertools.starmap(SectionReport, fields))
    return tuple(sorted(reports, key=_DELIVERY_ORDER) if interleaved else reports)


@attrs.frozen
class InjectionRecord:
    """The ids actually delivered, after shedding: what the injection log stores (ADR 0069 D6)."""

    session_id: str
    turn_index: int
    at: str
    delivered: Mapping[str, tuple[str, ...]] = attrs.field(converter=_frozen)
    approx_tokens: int = 0
    #: Sections that degraded this turn, with why (a draft's ``meta["fallback"]``: the
    #: retrieved section searched full text because the embedder failed).
    fallbacks: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen)


class _Deferred:
    """Where a composed projection keeps how to build its ``sections`` until they are first read.

    Most projections are never explained, and a preview (``record=False``) is read for its
    text: building one report per section, every turn, was a fifth of the core's cost with 50
    sections. So ``engine.assembly.assemble`` leaves the ``sections`` slot empty and keeps each
    report's fields here, captured from the fitted plans as plain values (``ReportFields``); the
    first read of ``sections`` (directly, or by ``==``, ``repr``, ``as_dict``, ``attrs.evolve``,
    pickling: every attrs method reads the attribute) builds the reports once and stores them.
    Building them calls nothing outside this module (a value type never calls back up into the
    engine that made it: ``bench/turn_path.py`` counts such calls), and a read from another
    thread gets equal reports.
    """

    __slots__ = ("_reports", "_steps", "_turn")

    #: The reports' fields as the engine captured them (``built_reports``'s arguments), until
    #: ``sections`` is first read.
    _reports: tuple[Sequence[ReportFields], bool] | None
    #: The shedding steps as ``fitting.fit`` recorded them, until ``overflow`` is first read.
    _steps: Sequence[Step] | None
    #: What the record pipeline carries from composition to the turn's model calls
    #: (``contextplane.observability.turn.TurnState``): set by the runtime or the records
    #: observer, read through ``turn.state_of``. Not a field: never compared, copied or pickled.
    _turn: object


@attrs.frozen
class ProjectedContext(_Deferred):
    """The composed projection for one request, with everything needed to explain it."""

    text: str
    sections: tuple[SectionReport, ...]
    overflow: tuple[ShedStep, ...]
    budget_chars: int | None
    used_chars: int
    injection: InjectionRecord | None
    warnings: tuple[str, ...] = ()
    session_id: str = ""
    turn_index: int = 0
    incognito: bool = False
    goal_turn: bool = False
    surface: Surface = Surface.NATIVE
    #: The request this projection was composed for (observers and delivery read it).
    request: ProjectionRequest | None = attrs.field(default=None, eq=False, repr=False)
    #: Recorded turns only: the history position of the store state the sections read
    #: (``contextplane.memory.history``), so the turn can be explained and replayed.
    as_of: Any = attrs.field(default=None, eq=False, repr=False)
    #: Recorded turns only: ``{plugin: version}`` of the host that composed it.
    plugins: Mapping[str, str | None] = attrs.field(factory=dict, eq=False, repr=False)
    #: What became of the turn's records, set by the records observer: "recorded" (every record
    #: written so far is stored), "not recorded" (a preview, an incognito turn, no backend,
    #: recording off) or "failed: <what went wrong>" (a record write failed: the turn was
    #: composed, but it cannot be explained or replayed; logged once). A model call's snapshot
    #: is written at delivery, so "recorded" can become "failed: ..." then.
    record_status: str = attrs.field(default="not recorded", eq=False, repr=False)

    @property
    def mode(self) -> str:
        """One label for logs and records: incognito, goal_turn, else the surface."""
        if self.incognito:
            return "incognito"
        if self.goal_turn:
            return "goal_turn"
        return self.surface.value

    @property
    def approx_tokens(self) -> int:
        return approx_tokens(self.used_chars)

    @property
    def within_budget(self) -> bool:
        return self.budget_chars is None or self.used_chars <= self.budget_chars

    @property
    def delivered_ids(self) -> dict[str, tuple[str, ...]]:
        return {s.name: s.item_ids for s in self.sections if s.item_ids}

    def section(self, name: str) -> SectionReport | None:
        return next((s for s in self.sections if s.name == name), None)

    if not TYPE_CHECKING:  # (for the type checker every attribute is declared)

        def __getattr__(self, name: str) -> Any:
            # Reached only for an empty slot: ``sections`` or ``overflow`` not read yet.
            if name == "sections":
                return _built_sections(self)
            if name == "overflow":
                return _built_overflow(self)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: enums as their values, each section with its ``sha256`` (not its rendered
        text, which ``text`` already holds), and without the request (a store, a config)."""

        def plain(_inst: Any, _field: Any, value: Any) -> Any:
            return value.value if isinstance(value, enum.Enum) else value

        out = attrs.asdict(self, filter=_AS_DICT_FILTER, value_serializer=plain)
        for report, section in zip(self.sections, out["sections"], strict=True):
            section["sha256"] = report.sha256
        return out


def _built_sections(projection: ProjectedContext) -> tuple[SectionReport, ...]:
    """Build the reports of a projection whose ``sections`` are read for the first time."""
    try:
        build = object.__getattribute__(projection, "_reports")
    except AttributeError:  # not a deferred projection: the slot was emptied some other way
        raise AttributeError("'ProjectedContext' object has no attribute 'sections'") from None
    if build is None:  # built by another thread meanwhile
        return cast(tuple[SectionReport, ...], object.__getattribute__(projection, "sections"))
    sections = built_reports(*build)
    object.__setattr__(projection, "sections", sections)
    object.__setattr__(projection, "_reports", None)
    return sections


def _built_overflow(projection: ProjectedContext) -> tuple[ShedStep, ...]:
    """Make the ``ShedStep`` objects of a projection whose ``overflow`` is read the first time."""
    try:
        steps = object.__getattribute__(projection, "_steps")
    except AttributeError:
        raise AttributeError("'ProjectedContext' object has no attribute 'overflow'") from None
    if steps is None:  # made by another thread meanwhile
        return cast(tuple[ShedStep, ...], object.__getattribute__(projection, "overflow"))
    overflow = tuple(itertools.starmap(ShedStep, steps))
    object.__setattr__(projection, "overflow", overflow)
    object.__setattr__(projection, "_steps", None)
    return overflow


_AS_DICT_FILTER = attrs.filters.exclude(
    attrs.fields(ProjectedContext).request,
    attrs.fields(ProjectedContext).as_of,
    attrs.fields(ProjectedContext).plugins,
    attrs.fields(ProjectedContext).record_status,
    attrs.fields(SectionReport).rendered,
    attrs.fields(SectionReport).drafted,
)


# --- one model call (ADR D2, D5) --------------------------------------------------------------


M = TypeVar("M")


@attrs.frozen
class ModelCall:
    """One model call a projection is delivered to: what ``observe_model_call`` observers get.

    ``prefix`` is what the model sees as its system message (a ``StablePrefix``, the agent's
    own text, or None). ``full_text`` renders the whole request lazily, for the operator's
    full-text capture mode; observers call it only when that mode is on."""

    projection: ProjectedContext
    call_index: int
    prefix: StablePrefix | str | None
    stripped: tuple[StrippedFrame, ...] = ()
    history_messages: int = 0
    history_chars: int = 0
    full_text: Callable[[], str] | None = attrs.field(default=None, eq=False, repr=False)
    #: The kept history messages as delivered, each as (sha256 digest of role and text, chars),
    #: for a recorded call: what the recorder measures the cacheable prefix by
    #: (``records.cache_prefix``).
    history_digests: tuple[tuple[bytes, int], ...] | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def session_id(self) -> str:
        return self.projection.session_id

    @property
    def turn_index(self) -> int:
        return self.projection.turn_index


@attrs.frozen
class Delivered(Generic[M]):
    """What the adapter sends: the history without frames, then the projection message."""

    messages: list[M]
    stripped: tuple[M, ...]
    call: ModelCall
