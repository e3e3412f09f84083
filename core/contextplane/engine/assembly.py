"""Everything a composition does before and after drafting, once for both drivers.

Before: the request checked (``prepare``: a ``ProjectionRequest`` with a text query), its store,
backend and project resolved when no ``Runtime`` did it (``_resolve``), the host's sections
checked (one name per section, one declaration per envelope) and ordered for drafting with why
each is suppressed this turn. After: ``assemble`` (the budget, D6, and its shedding, the
rendering, the injection record) and the section reports built when first read. Why one
module: the sync and the async composition return the same projection by construction only if
they share every step but the drafting itself.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

import attrs

from contextplane.backends import resolve_backend
from contextplane.budget import budget_chars
from contextplane.config import Config
from contextplane.errors import SectionError, ValidationError
from contextplane.fitting import Layout, SectionPlan, fit, overflow_key
from contextplane.notices import BudgetWarning, warn_once
from contextplane.observability.turn import TurnState, attach
from contextplane.plugins import PluginHost, Registered, get_host
from contextplane.records.backend import is_backend
from contextplane.request import FrozenDict, ProjectionRequest, Surface
from contextplane.sections import ContextSection
from contextplane.types import (
    InjectionRecord,
    ProjectedContext,
    ReportFields,
    SectionReport,
    approx_tokens,
    built_reports,
)

_CUT = operator.attrgetter("cut")
#: The state and extra of a request given none (frozen, so every such request can share it).
_NOTHING = FrozenDict()


def _check_envelopes(sections: Sequence[Registered[ContextSection]]) -> None:
    by_tag: dict[str, Registered[ContextSection]] = {}
    names: dict[str, Registered[ContextSection]] = {}
    for reg in sections:
        prior = names.get(reg.section.name)
        if prior is not None:
            raise SectionError(
                f"context section {reg.section.name!r} is registered by both plugin {prior.plugin!r} "
                f"and plugin {reg.plugin!r}; rename one of them or disable one plugin"
            )
        names[reg.section.name] = reg
        first = by_tag.setdefault(reg.section.envelope.tag, reg)
        if first.section.envelope != reg.section.envelope:
            raise SectionError(
                f"context sections {first.section.name!r} (plugin {first.plugin!r}) and "
                f"{reg.section.name!r} (plugin {reg.plugin!r}) share the envelope "
                f"<{reg.section.envelope.tag}> but declare it differently; use one Envelope object"
            )


#: The key of ``SectionOrder.plans`` saying the order's names and envelopes were checked.
_CHECKED = "envelopes checked"


def _checked(sections: tuple[Registered[ContextSection], ...]) -> None:
    """``_check_envelopes`` once per registration state (the host's ``SectionOrder`` remembers
    it), not once per turn; a plain tuple from another host is checked every time."""
    plans = getattr(sections, "plans", None)
    if plans is not None and plans.get(_CHECKED):
        return
    _check_envelopes(sections)
    if plans is not None:
        plans[_CHECKED] = True


def _resolve(request: ProjectionRequest) -> ProjectionRequest:
    """Fill in the memory store and the backend from each other (ADR D8: a caller may hand
    either one), and the turn's project from ``context.project`` when the request names none."""
    store, backend = request.knowledge_store, request.backend
    if store is not None and is_backend(store):  # a backend passed as the store
        backend = backend if backend is not None else store
        store = store.memories
    if backend is None:
        backend = resolve_backend(store, request.config)
    if store is None and backend is not None:
        store = backend.memories
    project = request.project if request.project is not None else request.config.context.project
    if store is request.knowledge_store and backend is request.backend and project == request.project:
        return request
    return attrs.evolve(request, knowledge_store=store, backend=backend, project=project)


#: A section left out of the projection: (section, why it was suppressed, its error).
Skipped = tuple[Registered[ContextSection], str | None, str | None]


def prepare(
    request: ProjectionRequest, host: PluginHost | None, strict: bool | None, *, wired: bool = False
) -> tuple[ProjectionRequest, PluginHost, bool, Drafting, float | None]:
    """What both compositions (this one and ``aprojection.acompose``) settle before any section
    drafts: the checked request, the host, strict mode, every section in draft order with why
    it is suppressed (None: draft it), and the provider time limit in seconds. ``wired``: the
    request comes from a ``Runtime``, which resolved its store, backend and project once, so
    they are not looked up again here."""
    if not isinstance(request, ProjectionRequest):
        raise ValidationError(f"compose takes a ProjectionRequest, got {type(request).__name__}")
    if not isinstance(request.query, str):
        raise ValidationError(f"query must be str, got {type(request.query).__name__}")
    host = host if host is not None else get_host()
    strict = host.strict if strict is None else strict
    if not wired:
        request = _resolve(request)
    cfg = request.config
    # Drafted in priority order (then name), whatever order plugins registered in: a section
    # that acts on what an earlier one saw can rely on the order the sections declare.
    ordered_regs = host.ordered_context_sections()
    _checked(ordered_regs)
    timeout_s = cfg.context.provider_timeout_ms / 1000 if cfg.context.provider_timeout_ms else None
    return request, host, strict, _drafting(ordered_regs, request), timeout_s


#: A section to draft, as the drafting loop reads it: (registration, section, draft, name, plugin).
ToDraft = tuple[
    tuple[Registered[ContextSection], ContextSection, Callable[[ProjectionRequest], Any], str, str], ...
]


class Drafting(tuple[tuple[Registered[ContextSection], str | None], ...]):
    """Every section in draft order with why it is suppressed this turn (None: draft it), and
    that split as the drafting loop reads it: the sections to draft (each with its draft, name
    and plugin, bound once), the suppressed ones as skipped, and whether a section that drafts
    carries memory. Made once per registration state and mode (``SectionOrder.plans``)."""

    to_draft: ToDraft
    skipped: tuple[Skipped, ...]
    memory: bool

    @classmethod
    def of(cls, pairs: Iterable[tuple[Registered[ContextSection], str | None]]) -> Drafting:
        drafting = cls(pairs)
        drafting.to_draft = tuple(
            (reg, reg.section, reg.section.draft, reg.section.name, reg.plugin)
            for reg, why in drafting
            if why is None
        )
        drafting.skipped = tuple((reg, why, None) for reg, why in drafting if why is not None)
        drafting.memory = any(section.carries_memory for _reg, section, *_rest in drafting.to_draft)
        return drafting


def _drafting(ordered_regs: tuple[Registered[ContextSection], ...], request: ProjectionRequest) -> Drafting:
    """Every section in draft order with why it is suppressed this turn, made once per
    registration state and mode: ``ProjectionRequest.suppression`` reads only the request's
    subset, incognito and goal-turn flags (a subclass may read more: it is asked each turn)."""
    plans = getattr(ordered_regs, "plans", None)
    if type(request) is not ProjectionRequest or plans is None:
        return Drafting.of((reg, request.suppression(reg.section)) for reg in ordered_regs)
    key = (request.only_sections, request.incognito, request.goal_turn)
    known = plans.get(key)
    if known is None:
        known = plans[key] = Drafting.of((reg, request.suppression(reg.section)) for reg in ordered_regs)
    return cast(Drafting, known)


def split(drafting: Drafting) -> tuple[ToDraft, tuple[Skipped, ...], bool]:
    """The sections to draft (each with its draft, name and plugin), the suppressed ones as
    skipped, and whether a section that drafts carries memory."""
    if not isinstance(drafting, Drafting):  # a plain tuple of (registration, why) pairs
        drafting = Drafting.of(drafting)
    return drafting.to_draft, drafting.skipped, drafting.memory


def needs_memory(drafting: Drafting) -> bool:
    """True when a section that will draft carries memory (else no view is opened)."""
    return split(drafting)[2]


def row_limit(cfg: Config) -> int | None:
    """The per-row size bound (``context.max_row_chars``; 0 means none)."""
    return cfg.context.max_row_chars or None


def assemble(
    request: ProjectionRequest,
    plans: Sequence[SectionPlan],
    skipped: Sequence[Skipped],
    host: PluginHost,
    position: Any = None,
    turn: TurnState | None = None,
) -> ProjectedContext:
    """Everything after drafting, shared by both compositions so their output is the same by
    construction: the budget (D6) and its shedding, the overflow warning, the rendering, the
    section reports and the injection record (with the history ``position`` the sections read
    at, and the plugin versions, for a recorded turn)."""
    cfg = request.config
    recording = request.record and not request.incognito
    limit = row_limit(cfg)
    for plan in plans if any(map(_CUT, plans)) else ():
        if plan.cut:
            warn_once(
                ("row-cut", plan.plugin, plan.name),
                f"context section {plan.name!r} of plugin {plan.plugin!r} offered rows longer than "
                f"context.max_row_chars ({limit} chars), first {plan.cut[0]!r}; they are cut at a line "
                "boundary and end with a cut marker (raise context.max_row_chars, 0 = no bound, or "
                "store shorter rows)",
                BudgetWarning,
            )
    layout = Layout(plans)
    budget = budget_chars(cfg, budget_tokens=request.budget_tokens, context_window=request.context_window)
    steps = fit(layout, budget)
    warnings: list[str] = []
    if budget is not None and layout.total > budget:
        # Everything sheddable is gone by now (floors yield too), so what is left is exactly
        # the never-shed sections: name those, and only those.
        kept = ", ".join(f"{p.name} ({p.size} chars)" for p in layout.plans if p.size)
        message = (
            f"the never-shed sections need {layout.total} chars, over the {budget}-char budget: "
            f"{kept}; raise context.budget_pct or trim working state and always-on memories"
        )
        warnings.append(message)
        warn_once(overflow_key(layout, budget), message, BudgetWarning)

    text = layout.render()
    plans = layout.plans
    fields = report_fields(plans, skipped)
    injection = None
    if recording:
        delivered = {f[0]: f[4] for f in fields[: len(plans)] if f[4]}
        injection = InjectionRecord(
            session_id=request.session_id,
            turn_index=request.turn_index,
            at=dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
            delivered=delivered,
            approx_tokens=approx_tokens(layout.total),
            fallbacks={p.name: str(p.meta["fallback"]) for p in plans if "fallback" in p.meta},
        )
    projection = ProjectedContext(
        text=text,
        sections=(),  # these two are made when first read (``_Deferred``)
        overflow=(),
        budget_chars=budget,
        used_chars=layout.total,
        injection=injection,
        warnings=tuple(warnings),
        session_id=request.session_id,
        turn_index=request.turn_index,
        incognito=request.incognito,
        goal_turn=request.goal_turn,
        surface=request.surface,
        request=request,
        as_of=position,
        plugins=host.plugin_versions() if recording else {},
    )
    object.__delattr__(projection, "sections")
    object.__setattr__(projection, "_reports", (fields, bool(skipped)))
    if steps:
        object.__delattr__(projection, "overflow")
        object.__setattr__(projection, "_steps", steps)
    if turn is not None:
        attach(projection, turn)
    return projection


def report_fields(plans: Sequence[SectionPlan], skipped: Sequence[Skipped]) -> tuple[ReportFields, ...]:
    """Each section report's fields, captured as plain values while the plans are at hand: the
    fitted ``plans`` (in delivery order already), then the ``skipped`` sections. The reports
    themselves are made from these when first read (``types.built_reports``), by the value type,
    which so never calls back into the engine or the fitting."""
    fitted: list[ReportFields] = [
        (
            p.name,
            p.plugin,
            p.priority,
            p.size,
            p.delivered_ids(),
            len(p.rows),
            p.truncated,
            None,
            None,
            tuple(p.cut),
            p.meta,
            p.rendered,
            p.offered(),
        )
        for p in plans
    ]
    fitted.extend(
        (reg.section.name, reg.plugin, reg.section.priority, 0, (), 0, False, error, why, (), {}, "", ())
        for reg, why, error in skipped
    )
    return tuple(fitted)


def section_reports(plans: Sequence[SectionPlan], skipped: Sequence[Skipped]) -> tuple[SectionReport, ...]:
    """One report per section, in delivery order: the fitted ``plans`` (in delivery order
    already) and the ``skipped`` sections placed among them."""
    return built_reports(report_fields(plans, skipped), bool(skipped))


def d8_request(
    query: str,
    knowledge_store: Any = None,
    skills_index: Sequence[Any] | None = None,
    state: Mapping[str, Any] | None = None,
    *,
    incognito: bool = False,
    goal_turn: bool = False,
    budget_tokens: int | None = None,
    record: bool = True,
    session_id: str = "",
    turn_index: int = 0,
    project: str | None = None,
    surface: Surface | str = Surface.NATIVE,
    only_sections: Iterable[str] | None = None,
    context_window: int | None = None,
    backend: Any = None,
    host: PluginHost | None = None,
    config: Config | None = None,
    strict: bool | None = None,
    extra: Mapping[str, Any] | None = None,
) -> tuple[ProjectionRequest, PluginHost, bool | None]:
    """The request the ADR D8 signature describes, the host to compose it on and the strict
    setting: the one body of ``compose_projected_context`` and ``acompose_projected_context``,
    whose parameters are this function's (``contextplane.signatures.parameters_of``)."""
    if not isinstance(query, str):
        raise ValidationError(f"query must be str, got {type(query).__name__}")
    host = host if host is not None else get_host()
    cfg = config if config is not None else host.config
    request = ProjectionRequest(
        query=query,
        config=cfg,
        knowledge_store=knowledge_store,
        skills_index=skills_index,
        state=state or _NOTHING,
        session_id=session_id,
        turn_index=turn_index,
        project=project if project is not None else cfg.context.project,
        surface=surface,
        incognito=incognito,
        goal_turn=goal_turn,
        only_sections=only_sections,
        budget_tokens=budget_tokens,
        context_window=context_window,
        record=record,
        backend=backend,
        extra=extra or _NOTHING,
    )
    return request, host, strict
