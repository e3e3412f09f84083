"""Conformance checks for section plugins: prompt sections (ADR D3) and context sections (D6).

Each check composes through the public functions a runtime calls (``compose_projected_context``,
``resolve_order``) on a private plugin host, so a plugin passes the kit exactly when it
behaves in a real turn. The standard sections the kit checks names and envelopes against are
the ``contextplane`` entry points of the ``contextplane`` distribution itself.

A check method takes the fixtures it needs plus ``requirement``; the base class parametrises
``requirement`` with the method's requirement id (see ``_base``). The checks live in three
modules: ``harness`` (the plugin under test on private hosts), ``prompt_checks`` and
``context_checks``; this module assembles them into the classes an implementer subclasses and
keeps every name importable from here.
"""

from __future__ import annotations

from contextplane.testing.context_checks import (
    ContextBudgetChecks,
    ContextDraftChecks,
    ContextIsolationChecks,
    ContextSectionHarness,
    SpyStore,
)
from contextplane.testing.harness import Harness, standard_plugins
from contextplane.testing.prompt_checks import PromptSectionChecks, PromptSectionHarness

__all__ = [
    "ContextBudgetChecks",
    "ContextDraftChecks",
    "ContextIsolationChecks",
    "ContextSectionChecks",
    "ContextSectionConformance",
    "ContextSectionHarness",
    "Harness",
    "PromptSectionChecks",
    "PromptSectionConformance",
    "PromptSectionHarness",
    "SectionPluginConformance",
    "SpyStore",
    "standard_plugins",
]


class ContextSectionChecks(ContextIsolationChecks, ContextBudgetChecks, ContextDraftChecks):
    """Every context-section check (the building block of the aggregates below). Bases are
    listed last-first because pytest collects the most basic class's checks first."""


class PromptSectionConformance(PromptSectionChecks):
    """Every prompt-section check. Subclass it, define ``plugin`` and ``build_context``."""


class ContextSectionConformance(ContextSectionChecks):
    """Every context-section check. Subclass it, define ``plugin``, ``section_input`` and
    ``hostile_input``."""


class SectionPluginConformance(ContextSectionChecks, PromptSectionChecks):
    """Every section check, for a plugin with one prompt section and one context section."""
