"""The stable prefix (ADR D3): sections in authority order, plus plugins' before/after.

The composition order *is* the authority order: identity wins over operating model over
delegation roster over tool guidance over operator guidelines. The standard sections carry an
``authority`` number; consecutive ones are chained so a plugin cannot reorder them silently (a
constraint that would is reported as a cycle).

Tie-break rule (documented, independent of registration and entry-point order): Kahn's
algorithm; among the sections whose constraints are met, the one with the lowest
``authority`` goes first; sections without one come after every ranked section that is
ready, and tie by name.
"""

from __future__ import annotations

import difflib
import graphlib
import hashlib
import itertools
from collections.abc import Mapping, Sequence
from typing import Protocol

from contextplane.config import Config
from contextplane.errors import ConfigError, SectionOrderError
from contextplane.escaping import repair_text
from contextplane.request import BuildContext
from contextplane.sections import PromptSection
from contextplane.types import PluginFailure, Registered
from contextplane.types import PrefixSection as PrefixSection
from contextplane.types import StablePrefix as StablePrefix

#: The D3 authority order of the standard sections.
AUTHORITY_ORDER = ("identity", "operating_model", "delegation_roster", "tool_guidance", "operator_guidelines")
SECTION_SEPARATOR = "\n\n"
#: The ``PluginFailure.stage`` of a plugin left out of the prefix for its before/after.
ORDER_STAGE = "prompt order"


class PromptSectionHost(Protocol):
    """What ``build_stable_prefix`` asks of the plugin host (``contextplane.plugins.PluginHost``
    is one). A protocol, not the class: the host prunes prompt sections with this module's
    resolver, so the resolver must not import the host back."""

    @property
    def config(self) -> Config: ...

    @property
    def strict(self) -> bool: ...

    @property
    def failures(self) -> Sequence[PluginFailure]: ...

    def prompt_sections(self) -> list[Registered[PromptSection]]: ...

    def prefix_sections(self) -> list[Registered[PromptSection]]: ...

    def notify_stable_prefix(self, prefix: StablePrefix) -> object: ...


def _rank(section: PromptSection) -> tuple[int, float, str]:
    if section.authority is not None:
        return (0, section.authority, section.name)
    return (1, 0.0, section.name)


def target_problems(
    registered: Sequence[Registered[PromptSection]],
) -> list[tuple[Registered[PromptSection], str]]:
    """Every ``before``/``after`` that names no registered section (or the section itself),
    with the closest known name as a suggestion."""
    names = {reg.section.name for reg in registered}
    problems: list[tuple[Registered[PromptSection], str]] = []
    for reg in registered:
        for kind, targets in (("after", reg.section.after), ("before", reg.section.before)):
            for target in targets:
                where = (
                    f"plugin {reg.plugin!r}: prompt section {reg.section.name!r} declares {kind}={target!r}"
                )
                if target == reg.section.name:
                    problems.append((reg, f"{where}, which names itself"))
                elif target not in names:
                    near = difflib.get_close_matches(target, sorted(names - {reg.section.name}), n=1)
                    hint = f" (did you mean {near[0]!r}?)" if near else ""
                    problems.append((reg, f"{where}, but no section of that name is registered{hint}"))
    return problems


def prune_unknown_targets(
    registered: Sequence[Registered[PromptSection]],
) -> tuple[list[Registered[PromptSection]], list[tuple[str, str]]]:
    """Outside strict mode: leave out every prompt section of a plugin whose ``before``/``after``
    names no section, so one plugin's bad constraint costs that plugin's sections, not the
    whole stable prefix. Repeated until nothing is left to prune (a dropped section may have
    been another plugin's target). Returns the sections kept and ``(plugin, why)`` per drop."""
    kept = list(registered)
    dropped: list[tuple[str, str]] = []
    while True:
        problems = target_problems(kept)
        if not problems:
            return kept, dropped
        known = ", ".join(sorted(reg.section.name for reg in kept))
        by_plugin: dict[str, list[str]] = {}
        for reg, message in problems:
            by_plugin.setdefault(reg.plugin, []).append(message)
        for plugin, messages in sorted(by_plugin.items()):
            dropped.append(
                (
                    plugin,
                    "; ".join(messages) + f" (known sections: {known}); its prompt sections are left out "
                    "of the stable prefix; the plugin author must fix the constraint, or enable the "
                    "plugin that provides the section",
                )
            )
        kept = [reg for reg in kept if reg.plugin not in by_plugin]


def resolve_order(registered: Sequence[Registered[PromptSection]]) -> list[Registered[PromptSection]]:
    """Order the sections, or raise ``SectionOrderError`` naming plugins, sections and the cycle."""
    by_name: dict[str, Registered[PromptSection]] = {}
    for reg in registered:
        prior = by_name.get(reg.section.name)
        if prior is not None:
            raise SectionOrderError(
                f"duplicate prompt section {reg.section.name!r}: registered by plugin {prior.plugin!r} "
                f"and by plugin {reg.plugin!r}; one of the plugin authors must rename it, "
                "or disable one plugin (CONTEXTPLANE_PLUGINS / plugins.disabled)"
            )
        by_name[reg.section.name] = reg
    known = sorted(by_name)
    problems = [message for _reg, message in target_problems(registered)]
    if problems:
        raise SectionOrderError(
            "; ".join(problems)
            + f" (known sections: {', '.join(known)}); the plugin author must fix the constraint, "
            "or enable the plugin that provides the section"
        )

    preds: dict[str, set[str]] = {name: set() for name in by_name}
    why: dict[tuple[str, str], str] = {}
    ranked = sorted(
        (r for r in registered if r.section.authority is not None), key=lambda r: _rank(r.section)
    )
    for a, b in itertools.pairwise(ranked):
        preds[b.section.name].add(a.section.name)
        why[(a.section.name, b.section.name)] = "authority order"
    for reg in registered:
        s = reg.section
        for target in s.after:
            preds[s.name].add(target)
            why[(target, s.name)] = f"{s.name}.after={target} (plugin {reg.plugin!r})"
        for target in s.before:
            preds[target].add(s.name)
            why[(s.name, target)] = f"{s.name}.before={target} (plugin {reg.plugin!r})"

    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter(preds)
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        # Each node in graphlib's path is a predecessor of the next: already in run order.
        path: list[str] = list(exc.args[1])
        edges = [why.get((a, b), f"{a} before {b}") for a, b in itertools.pairwise(path)]
        plugins = sorted({by_name[n].plugin for n in path if n in by_name})
        raise SectionOrderError(
            "prompt sections form a cycle: "
            + " -> ".join(path)
            + f" (constraints: {'; '.join(edges)}); plugins involved: {', '.join(plugins)}; "
            "one of these constraints must be dropped by its plugin author"
        ) from None

    order: list[Registered[PromptSection]] = []
    ready = sorted(sorter.get_ready(), key=lambda n: _rank(by_name[n].section))
    while ready:
        name = ready.pop(0)
        order.append(by_name[name])
        sorter.done(name)
        ready = sorted([*ready, *sorter.get_ready()], key=lambda n: _rank(by_name[n].section))
    return order


def build_stable_prefix(
    host: PromptSectionHost,
    context: BuildContext | None = None,
    *,
    strict: bool | None = None,
    notify: bool = True,
) -> StablePrefix:
    """Render every prompt section in resolved order.

    A cycle or a duplicate name always raises: no order would be right. A ``before``/``after``
    naming no section costs only its plugin's sections outside strict mode (recorded in
    ``errors`` and in ``host.failures``, with the closest known name); strict mode raises. A
    section whose render raises is left out and recorded in ``errors`` (strict mode raises
    instead), so one broken third-party section does not stop a runtime from starting.
    """
    strict = host.strict if strict is None else strict
    ctx = context if context is not None else BuildContext(config=host.config)
    # Strict: every constraint must resolve (resolve_order raises on the first bad one).
    order = resolve_order(host.prompt_sections() if strict else host.prefix_sections())
    texts: list[str] = []
    parts: list[PrefixSection] = []
    # A plugin left out for its before/after (``prune_unknown_targets``) is part of the story.
    errors: list[str] = [] if strict else [f.describe() for f in host.failures if f.stage == ORDER_STAGE]
    for reg in order:
        try:
            text = reg.section.render(ctx)
            if not isinstance(text, str):
                raise TypeError(f"render returned {type(text).__name__}; expected str")
        except ConfigError:
            raise  # a misconfigured section (e.g. a missing SOUL.md) is the operator's to fix
        except (Exception, SystemExit) as exc:  # sys.exit() in a render fails that section only
            message = (
                f"prompt section {reg.section.name!r} of plugin {reg.plugin!r} failed: "
                f"{type(exc).__name__}: {exc}"
            )
            if strict:
                raise SectionOrderError(message + " (strict mode)") from exc
            errors.append(message)
            continue
        text = repair_text(text.strip("\n"))  # a lone surrogate must not fail the hash below
        if not text:
            continue
        texts.append(text)
        parts.append(
            PrefixSection(reg.section.name, reg.plugin, len(text), hashlib.sha256(text.encode()).hexdigest())
        )
    prefix = StablePrefix(SECTION_SEPARATOR.join(texts), tuple(parts), tuple(errors))
    if notify:
        host.notify_stable_prefix(prefix)
    return prefix


def section_texts(prefix: StablePrefix) -> Mapping[str, str]:
    """Split a prefix back into its sections' texts (for inspectors)."""
    out: dict[str, str] = {}
    pos = 0
    for part in prefix.sections:
        out[part.name] = prefix.text[pos : pos + part.chars]
        pos += part.chars + len(SECTION_SEPARATOR)
    return out
