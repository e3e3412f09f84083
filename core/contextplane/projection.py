"""``compose_projected_context``: the one projection every runtime surface calls (ADR D8).

The projected context is derived, per request, and never persisted (ADR D2). Composition
only composes; delivering it to a model call is ``contextplane.delivery``'s job. ``compose``
takes one ``ProjectionRequest`` and applies, in order: the mode overrides (the request says
which sections it forbids), each provider's draft with its failures isolated, all of them
reading memory through one point-in-time view of the store, the budget (D6) with
deterministic shedding, and the envelopes with escaping. ``compose_projected_context`` is the
ADR D8 signature, a thin wrapper that builds the request.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import inspect
import logging
import operator
import time
import types
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeGuard, cast

import attrs

from contextplane.aio import overran, run_to_completion
from contextplane.backends import resolve_backend
from contextplane.budget import budget_chars
from contextplane.config import Config
from contextplane.errors import SectionError, ValidationError
from contextplane.fitting import Layout, SectionPlan, fit, overflow_key
from contextplane.notices import BudgetWarning, log_failure, log_once, warn_once
from contextplane.observability.turn import TurnState, attach
from contextplane.plugins import PluginHost, Registered, get_host
from contextplane.records.backend import is_backend
from contextplane.request import FrozenDict, ProjectionRequest, Surface
from contextplane.sections import ContextSection, Draft, DraftMeta, Row
from contextplane.types import InjectionRecord as InjectionRecord
from contextplane.types import ProjectedContext as ProjectedContext
from contextplane.types import SectionReport as SectionReport
from contextplane.types import approx_tokens

log = logging.getLogger("contextplane.projection")


_ROW_ID = operator.attrgetter("id")
_ROWS_ONLY = frozenset((Row,))
_CUT = operator.attrgetter("cut")
#: The meta of a draft that gave none (read-only: a report copies the meta it keeps).
_NO_META: Mapping[str, Any] = types.MappingProxyType({})
#: The state and extra of a request given none (frozen, so every such request can share it).
_NOTHING = FrozenDict()


def awaitable(result: Any) -> TypeGuard[Awaitable[Any]]:
    """``inspect.isawaitable``, answered at once for the list or tuple most drafts return."""
    return type(result) is not list and type(result) is not tuple and inspect.isawaitable(result)


def _as_rows(result: Any, name: str) -> tuple[tuple[Row, ...], Mapping[str, Any]]:
    """Validate a provider's result; raise ValidationError describing garbage precisely."""
    if type(result) is list or type(result) is tuple:  # the usual draft, spared the ABC checks
        rows, meta = tuple(result), _NO_META
    elif isinstance(result, Draft):
        rows, meta = result.rows, result.meta
        if result.heading is not None or result.render_key is not None:
            meta = DraftMeta(meta, result.heading, result.render_key)
    elif isinstance(result, Iterable) and not isinstance(result, str | bytes | Mapping):
        rows, meta = tuple(result), _NO_META
    else:
        raise ValidationError(
            f"section {name!r} returned {type(result).__name__}; expected a Draft or an iterable of Row"
        )
    # One pass answers for the usual draft (every item a plain Row, the ids distinct); only
    # when it does not is each rule checked in turn, for the error that names the culprit.
    if len({row.id for row in rows if type(row) is Row}) == len(rows):
        return rows, meta
    if not _ROWS_ONLY.issuperset(map(type, rows)):
        for i, row in enumerate(rows):
            if not isinstance(row, Row):
                raise ValidationError(
                    f"section {name!r} returned {type(row).__name__} at position {i}; "
                    "expected contextplane.Row"
                )
    if len(set(map(_ROW_ID, rows))) != len(rows):
        seen: set[str] = set()
        for row in rows:
            if row.id in seen:
                raise ValidationError(
                    f"section {name!r} returned the row id {row.id!r} twice; ids must be unique"
                )
            seen.add(row.id)
    return rows, meta


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


_NO_VIEW = "no consistent_read"
#: Section tuples whose names and envelopes were checked (the host's cached tuple objects).
_valid: dict[int, tuple[Registered[ContextSection], ...]] = {}


def _checked(sections: tuple[Registered[ContextSection], ...]) -> None:
    """``_check_envelopes`` once per registration state, not once per turn."""
    if _valid.get(id(sections)) is sections:
        return
    _check_envelopes(sections)
    if len(_valid) > 64:
        _valid.clear()
    _valid[id(sections)] = sections


def warn_no_view(store: Any) -> None:
    """Say once per store type that its projections cannot promise one committed state."""
    log_once(
        log,
        (_NO_VIEW, type(store)),
        logging.WARNING,
        "store %s has no consistent_read(); the sections of one projection may see different "
        "committed states (implement consistent_read, see docs/hooks.md)",
        type(store).__name__,
    )


def position_of(view: Any) -> Any:
    """The history position of the state ``view`` reads, when its store keeps a history
    (looked up on the class, so a proxy's ``__getattr__`` is never asked). A store that fails
    to say costs the turn its replayability, never the turn."""
    reader = getattr(type(view), "history_position", None)
    if reader is None:
        return None
    try:
        return reader(view)
    except Exception as exc:
        log_failure(
            log,
            ("history_position", type(view)),
            "store view %s failed to report its history position, so this turn cannot be replayed: %s",
            type(view).__name__,
            exc,
            exc=exc,
        )
        return None


#: The view of a composition that reads no memory (a context manager is reusable when stateless).
_NO_VIEW_NEEDED: contextlib.nullcontext[None] = contextlib.nullcontext()


def consistent_view(store: Any) -> contextlib.AbstractContextManager[Any]:
    """The store's point-in-time view for one composition, or the store itself (logged once)
    when it offers none: then each section reads whatever is committed when it reads."""
    if store is None:
        return _NO_VIEW_NEEDED
    opener = getattr(store, "consistent_read", None)
    if opener is None:
        warn_no_view(store)
        return contextlib.nullcontext(store)
    return cast(contextlib.AbstractContextManager[Any], opener())


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


Drafting = tuple[tuple[Registered[ContextSection], str | None], ...]
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


#: ``Drafting`` tuples by registration state and the request's mode flags: the same few serve
#: every turn of a session. ``_split``: each tuple's sections to draft (what the drafting loop
#: reads of each, bound once), the suppressed ones as skipped, and whether a section that
#: drafts carries memory.
_drafts: dict[Hashable, tuple[tuple[Registered[ContextSection], ...], Drafting]] = {}
#: A section to draft, as the drafting loop reads it: (registration, section, draft, name, plugin).
ToDraft = tuple[
    tuple[Registered[ContextSection], ContextSection, Callable[[ProjectionRequest], Any], str, str], ...
]
_split: dict[int, tuple[Drafting, ToDraft, tuple[Skipped, ...], bool]] = {}


def _drafting(ordered_regs: tuple[Registered[ContextSection], ...], request: ProjectionRequest) -> Drafting:
    """Every section in draft order with why it is suppressed this turn (None: draft it), made
    once per registration state and mode: ``ProjectionRequest.suppression`` reads only the
    request's subset, incognito and goal-turn flags (a subclass may read more: it is asked)."""
    if type(request) is not ProjectionRequest:
        return tuple((reg, request.suppression(reg.section)) for reg in ordered_regs)
    key = (id(ordered_regs), request.only_sections, request.incognito, request.goal_turn)
    known = _drafts.get(key)
    if known is not None and known[0] is ordered_regs:
        return known[1]
    drafting = tuple((reg, request.suppression(reg.section)) for reg in ordered_regs)
    if len(_drafts) > 64:
        _drafts.clear()
        _split.clear()
    _drafts[key] = (ordered_regs, drafting)
    _split[id(drafting)] = (drafting, *_split_of(drafting))
    return drafting


def _split_of(drafting: Drafting) -> tuple[ToDraft, tuple[Skipped, ...], bool]:
    to_draft = tuple(
        (reg, reg.section, reg.section.draft, reg.section.name, reg.plugin)
        for reg, why in drafting
        if why is None
    )
    suppressed = tuple((reg, why, None) for reg, why in drafting if why is not None)
    return to_draft, suppressed, any(section.carries_memory for _reg, section, *_rest in to_draft)


def split(drafting: Drafting) -> tuple[ToDraft, tuple[Skipped, ...], bool]:
    """The sections to draft (each with its draft, name and plugin), the suppressed ones as
    skipped, and whether a section that drafts carries memory."""
    known = _split.get(id(drafting))
    if known is not None and known[0] is drafting:
        return known[1], known[2], known[3]
    return _split_of(drafting)


def needs_memory(drafting: Drafting) -> bool:
    """True when a section that will draft carries memory (else no view is opened)."""
    return split(drafting)[2]


def row_limit(cfg: Config) -> int | None:
    """The per-row size bound (``context.max_row_chars``; 0 means none)."""
    return cfg.context.max_row_chars or None


def draft_failed(reg: Registered[ContextSection], exc: BaseException, strict: bool) -> str:
    """A provider's failure: raised in strict mode, else logged once and returned as the
    report's error text (the same on both paths)."""
    section = reg.section
    message = f"{type(exc).__name__}: {exc}"
    if strict:
        raise SectionError(
            f"context section {section.name!r} of plugin {reg.plugin!r} failed: {message} "
            "(strict mode; fix the plugin or disable it)"
        ) from exc
    log_failure(
        log,
        ("draft", reg.plugin, section.name, message),
        "context section %r of plugin %r failed, so it is left out of this projection: %s",
        section.name,
        reg.plugin,
        message,
        exc=exc,
    )
    return message


def compose(
    request: ProjectionRequest, *, host: PluginHost | None = None, strict: bool | None = None
) -> ProjectedContext:
    """Compose the projected context for one request (ADR D6, D8): the one composition.

    Sections the request forbids (incognito, goal turn, a subagent's subset) are never called.
    ``request.record`` false composes without notifying observers (previews); incognito
    projections are never handed to ``observe_projection``. ``contextplane.aprojection.acompose``
    is the same composition for an event loop, and returns the same projection."""
    return compose_turn(request, host, strict, None)


def compose_turn(
    request: ProjectionRequest, host: PluginHost | None, strict: bool | None, turn: TurnState | None
) -> ProjectedContext:
    """``compose`` for a ``Runtime``: ``turn`` (the runtime's backend and recorders) is attached
    to the projection before observers are told, and the request is taken as wired (its store
    and backend resolved once, by the runtime). ``turn=None`` is ``compose``."""
    request, host, strict, drafting, timeout_s = prepare(request, host, strict, wired=turn is not None)
    limit = row_limit(request.config)
    to_draft, suppressed, memory = split(drafting)

    plans: list[SectionPlan] = []
    # Reports are built when first read; these hold what is known before fitting.
    skipped: list[Skipped] = list(suppressed)
    recording = request.record and not request.incognito
    position = None
    with consistent_view(request.knowledge_store if memory else None) as view:
        if recording and view is not None:
            position = position_of(view)
        seen = request if view is None or view is request.knowledge_store else request.with_store(view)
        clock = time.perf_counter
        for reg, section, draft, name, plugin in to_draft:
            started = clock()
            try:
                result = draft(seen)
                if type(result) is not list and awaitable(result):  # an async provider, run here
                    result = run_to_completion(result, timeout_s)
                rows, meta = _as_rows(result, name)
                elapsed = clock() - started
                if timeout_s is not None and elapsed > timeout_s:
                    raise overran(elapsed, timeout_s)
                # Escaping and measuring the rows belong to the section too: a row the core
                # cannot lay out fails that section, never the turn.
                plan = SectionPlan(section, plugin, rows, meta, limit)
            except (Exception, SystemExit) as exc:  # sys.exit() in a provider fails its section only
                skipped.append((reg, None, draft_failed(reg, exc, strict)))
                continue
            plans.append(plan)

    projection = assemble(request, plans, skipped, host, position, turn)
    if projection.injection is not None:
        host.notify_projection(projection, request)
    return projection


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
    injection = None
    if recording:
        delivered = {}
        for p in plans:
            ids = p.delivered_ids()
            if ids:
                delivered[p.name] = ids
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
    object.__setattr__(projection, "_reports", functools.partial(section_reports, plans, tuple(skipped)))
    if steps:
        object.__delattr__(projection, "overflow")
        object.__setattr__(projection, "_steps", steps)
    if turn is not None:
        attach(projection, turn)
    return projection


def section_reports(plans: Sequence[SectionPlan], skipped: Sequence[Skipped]) -> tuple[SectionReport, ...]:
    """One report per section, in delivery order: the fitted ``plans`` (in delivery order
    already) and the ``skipped`` sections placed among them."""
    # Positional, in field order (name, plugin, priority, chars, item_ids, offered, truncated,
    # error, suppressed, cut, meta, rendered, drafted).
    reports = [
        SectionReport(
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
    reports.extend(
        SectionReport(reg.section.name, reg.plugin, reg.section.priority, error=error, suppressed=why)
        for reg, why, error in skipped
    )
    return tuple(sorted(reports, key=lambda r: (r.priority, r.name)) if skipped else reports)


def compose_projected_context(
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
) -> ProjectedContext:
    """Compose the projected context for one request: the ADR D8 signature over ``compose``.

    ``knowledge_store`` may be a memory store or a whole backend; a store's own backend (the
    embedded SQLite store's file, say) receives the records unless ``backend`` names another.
    ``only_sections`` restricts composition to a declared subset (a subagent's contract).
    """
    request, host = d8_request(
        query,
        knowledge_store,
        skills_index,
        state,
        incognito=incognito,
        goal_turn=goal_turn,
        budget_tokens=budget_tokens,
        record=record,
        session_id=session_id,
        turn_index=turn_index,
        project=project,
        surface=surface,
        only_sections=only_sections,
        context_window=context_window,
        backend=backend,
        host=host,
        config=config,
        extra=extra,
    )
    return compose(request, host=host, strict=strict)


def d8_request(
    query: str,
    knowledge_store: Any,
    skills_index: Sequence[Any] | None,
    state: Mapping[str, Any] | None,
    *,
    incognito: bool,
    goal_turn: bool,
    budget_tokens: int | None,
    record: bool,
    session_id: str,
    turn_index: int,
    project: str | None,
    surface: Surface | str,
    only_sections: Iterable[str] | None,
    context_window: int | None,
    backend: Any,
    host: PluginHost | None,
    config: Config | None,
    extra: Mapping[str, Any] | None,
) -> tuple[ProjectionRequest, PluginHost]:
    """The request the ADR D8 signature describes, and the host to compose it on (shared by
    ``compose_projected_context`` and ``acompose_projected_context``)."""
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
    return request, host
