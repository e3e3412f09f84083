"""The section author's face: everything a plugin that adds prompt or context sections imports.

Why a face of its own: a section plugin is imported in every process that loads plugins, so it
should name one small module that says what its contract is, and pay only for what it uses.
Like the root package it is lazy (PEP 562): ``import contextplane.section`` loads no submodule,
and ``from contextplane.section import Row`` loads only the module that defines ``Row``. Each
name is the very object the root package and its defining module hold.

* the sections: ``hookimpl``, ``ContextSection``, ``PromptSection``, ``Row``, ``Draft``,
  ``Envelope``, ``Shed``, ``AUTHORITY_ORDER``;
* what a section reads: ``ProjectionRequest``, ``BuildContext``, ``Surface``, ``Config``,
  ``budget_chars``, and from the turn's store and backend ``MemoryChunk``, ``SearchHit``,
  ``SessionSummaries``, ``SessionSummary``;
* telling the operator once: ``warn_once``, ``PluginWarning``, ``BudgetWarning``,
  ``log_failure``;
* trying a section: ``plugin_host_with``, ``PluginHost``, ``compose_projected_context``,
  ``build_stable_prefix``, ``StablePrefix``, ``PrefixSection`` (and ``contextplane.testing``,
  the conformance kit);
* the errors a section raises or catches: ``SectionError``, ``ConfigError``, ``StoreError``,
  ``EmbedderError``.

CONTRIBUTING.md ("The three faces") has an example that runs as a test.
"""

from __future__ import annotations

import importlib as _importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and IDEs see; at run time __getattr__ loads each on first use
    from contextplane.authority import AUTHORITY_ORDER, PrefixSection, StablePrefix, build_stable_prefix
    from contextplane.budget import budget_chars
    from contextplane.config import Config
    from contextplane.errors import ConfigError, EmbedderError, SectionError, StoreError
    from contextplane.markers import hookimpl
    from contextplane.memory.model import MemoryChunk
    from contextplane.notices import BudgetWarning, PluginWarning, log_failure, warn_once
    from contextplane.plugins import PluginHost, plugin_host_with
    from contextplane.projection import compose_projected_context
    from contextplane.records import SessionSummaries, SessionSummary
    from contextplane.request import BuildContext, ProjectionRequest, Surface
    from contextplane.sections import ContextSection, Draft, Envelope, PromptSection, Row, Shed
    from contextplane.store.protocol import SearchHit

#: Where each name is defined (the imports above, as data for ``__getattr__``).
_WHERE: dict[str, str] = {
    "AUTHORITY_ORDER": "contextplane.authority",
    "BudgetWarning": "contextplane.notices",
    "BuildContext": "contextplane.request",
    "Config": "contextplane.config",
    "ConfigError": "contextplane.errors",
    "ContextSection": "contextplane.sections",
    "Draft": "contextplane.sections",
    "EmbedderError": "contextplane.errors",
    "Envelope": "contextplane.sections",
    "MemoryChunk": "contextplane.memory.model",
    "PluginHost": "contextplane.plugins",
    "PluginWarning": "contextplane.notices",
    "PrefixSection": "contextplane.authority",
    "ProjectionRequest": "contextplane.request",
    "PromptSection": "contextplane.sections",
    "Row": "contextplane.sections",
    "SearchHit": "contextplane.store.protocol",
    "SectionError": "contextplane.errors",
    "SessionSummaries": "contextplane.records",
    "SessionSummary": "contextplane.records",
    "Shed": "contextplane.sections",
    "StablePrefix": "contextplane.authority",
    "StoreError": "contextplane.errors",
    "Surface": "contextplane.request",
    "budget_chars": "contextplane.budget",
    "build_stable_prefix": "contextplane.authority",
    "compose_projected_context": "contextplane.projection",
    "hookimpl": "contextplane.markers",
    "log_failure": "contextplane.notices",
    "plugin_host_with": "contextplane.plugins",
    "warn_once": "contextplane.notices",
}

__all__ = [
    "AUTHORITY_ORDER",
    "BudgetWarning",
    "BuildContext",
    "Config",
    "ConfigError",
    "ContextSection",
    "Draft",
    "EmbedderError",
    "Envelope",
    "MemoryChunk",
    "PluginHost",
    "PluginWarning",
    "PrefixSection",
    "ProjectionRequest",
    "PromptSection",
    "Row",
    "SearchHit",
    "SectionError",
    "SessionSummaries",
    "SessionSummary",
    "Shed",
    "StablePrefix",
    "StoreError",
    "Surface",
    "budget_chars",
    "build_stable_prefix",
    "compose_projected_context",
    "hookimpl",
    "log_failure",
    "plugin_host_with",
    "warn_once",
]


def __getattr__(name: str) -> Any:
    """A name of this face, imported from its module on first use and kept (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}{_elsewhere(name)}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _elsewhere(name: str) -> str:
    """Where a name this face lacks lives instead, said in the error (another face's name)."""
    if name.startswith("_"):  # probes (``__path__``, pytest's ``_mock_name``, ...): no face holds
        return ""  # a private name, and looking would import the other faces
    for face in ("contextplane.backend", "contextplane"):
        if name in getattr(_importlib.import_module(face), "__all__", ()):
            return f"; it is in {face}: from {face} import {name}"
    return ""
