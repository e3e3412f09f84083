"""The subagent context contract (the gap the ADR's "Subagent" row left open).

Default: a subagent gets its own prompt, returned verbatim (no identity, no roster, no
doctrine), and no projection at all. Memory is reachable only through a tool its allowlist
grants.

Opt-in: a ``[[subagents]]`` entry may name a subset of context sections (``sections``) and
its own budget (``budget_tokens``). Only those sections are drafted (the rest are never
called), the budget is the subagent's (never the lead's), and the mode rules still apply: a
subagent of an incognito turn gets no memory sections.

A contract naming a section no plugin registers is an error at build time, naming the
subagent, the unknown names and the sections that do exist; a typo must not silently turn
a subagent's context off.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import attrs

from contextplane.aprojection import acompose
from contextplane.config import Config, SubagentConfig
from contextplane.errors import ConfigError
from contextplane.plugins import PluginHost
from contextplane.projection import ProjectedContext, compose
from contextplane.request import ProjectionRequest, Surface


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class SubagentContract:
    """What one subagent sees: its prompt verbatim, plus the sections it opted into."""

    name: str
    prompt: str = ""
    sections: tuple[str, ...] = attrs.field(default=(), converter=_names)
    budget_tokens: int | None = None

    @property
    def projects(self) -> bool:
        """True when the subagent opted into any projected sections."""
        return bool(self.sections)

    @classmethod
    def from_config(cls, entry: SubagentConfig) -> SubagentContract:
        return cls(entry.name, entry.prompt, tuple(entry.sections), entry.budget_tokens)


def subagent_contract(config: Config, name: str) -> SubagentContract:
    """The contract of the subagent called ``name``; a clear error if none is configured."""
    for entry in config.subagents:
        if entry.name == name:
            return SubagentContract.from_config(entry)
    known = ", ".join(sorted(e.name for e in config.subagents)) or "none"
    raise ConfigError(
        f"no subagent named {name!r} is configured (configured: {known}); add a [[subagents]] entry "
        f"with name = {name!r} (in {config.source})"
    )


def check_contract(contract: SubagentContract, registered: Iterable[str], *, source: str = "") -> None:
    """Raise ``ConfigError`` if the contract names a section that is not registered."""
    known = sorted(set(registered))
    unknown = [s for s in contract.sections if s not in known]
    if not unknown:
        return
    hints = []
    for name in unknown:
        near = difflib.get_close_matches(name, known, n=1)
        if near:
            hints.append(f"{name!r} (did you mean {near[0]!r}?)")
        else:
            hints.append(repr(name))
    where = f" (in {source})" if source else ""
    raise ConfigError(
        f"subagent {contract.name!r} opts into context sections that no plugin registers: "
        f"{', '.join(hints)}; registered sections: {', '.join(known) or 'none'}. Fix "
        f"subagents.sections for {contract.name!r}{where}, or enable the plugin that provides them"
    )


def check_contracts(config: Config, host: PluginHost) -> list[SubagentContract]:
    """Every configured contract, each checked against the host's sections (build time)."""
    registered = [r.section.name for r in host.context_sections()]
    contracts = [SubagentContract.from_config(e) for e in config.subagents]
    for c in contracts:
        check_contract(c, registered, source=config.source)
    return contracts


def build_subagent_prompt(contract: SubagentContract) -> str:
    """The subagent's system prompt: its own prompt, verbatim."""
    return contract.prompt


def subagent_request(contract: SubagentContract, request: ProjectionRequest) -> ProjectionRequest:
    """The turn's request as the subagent's: its surface, its section subset, its own budget.

    Everything else (window, project, config, flags, backend) is the turn's, carried whole:
    the request is one object, so no adapter can forget to forward a field."""
    return attrs.evolve(
        request,
        surface=Surface.SUBAGENT,
        only_sections=contract.sections,
        # The subagent's own budget; without one, the configured rule (budget_pct of the
        # window) applies to the subagent's sections alone, never the lead's leftovers.
        budget_tokens=contract.budget_tokens,
    )


def compose_subagent_context(
    contract: SubagentContract, request: ProjectionRequest, *, host: PluginHost
) -> ProjectedContext | None:
    """The subagent's projection, or None when its contract asks for none (the default)."""
    if not contract.projects:
        return None
    check_contract(contract, [r.section.name for r in host.context_sections()], source=request.config.source)
    return compose(subagent_request(contract, request), host=host)


async def acompose_subagent_context(
    contract: SubagentContract, request: ProjectionRequest, *, host: PluginHost
) -> ProjectedContext | None:
    """``compose_subagent_context`` on the async path (``aprojection.acompose``)."""
    if not contract.projects:
        return None
    check_contract(contract, [r.section.name for r in host.context_sections()], source=request.config.source)
    return await acompose(subagent_request(contract, request), host=host)
