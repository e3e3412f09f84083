"""contextplane: the stable prefix and the per-request projected context of an LLM agent.

The public surface is re-exported here, lazily: ``import contextplane`` loads no submodule,
and ``from contextplane import X`` loads only the module that defines ``X`` (PEP 562). Why:
every process that has contextplane installed pays for this import (the kit's pytest plugin,
``contextplane --help``, a plugin that only needs ``hookimpl``), and the full surface pulls
in the store (apsw, sqlite-vec), cattrs and the plugin host, a quarter of a second.

``__all__`` keeps every name it ever exported (third parties import them), grouped by who
needs them (CONTRIBUTING.md, "The three faces"):

* a runtime author, who wires contextplane into an agent's loop: ``open_runtime``,
  ``Runtime``, ``Turn``, ``MessageCodec``, ``load_config``, ``Config``,
  ``get_host``, ``PluginHost``, ``open_backend``, ``build_stable_prefix``, ``StablePrefix``,
  ``PrefixSection``, ``BuildContext``, ``compose_projected_context``,
  ``acompose_projected_context``, ``compose``, ``acompose``, ``ProjectionRequest``,
  ``Surface``, ``ProjectedContext``, ``SectionReport``, ``InjectionRecord``, ``deliver``,
  ``adeliver``, ``Delivered``, ``ModelCall``, ``ContextPlaneError``;
* a section author, who writes a plugin: ``hookimpl``, ``ContextSection``, ``PromptSection``,
  ``Row``, ``Shed``, ``Envelope``, ``Draft``, ``AUTHORITY_ORDER``, ``plugin_host_with``,
  ``warn_once``, ``PluginWarning`` (and ``contextplane.testing``, the conformance kit);
* a store or backend author: ``KnowledgeStore``, ``AsyncKnowledgeStore``, ``SearchHit``,
  ``MemoryChunk``, ``Embedder``, ``AsyncEmbedder``, ``Backend``, ``InjectionLog``,
  ``SessionSummaries``, ``SnapshotStore``;
* the errors every face may catch: ``ConfigError``, ``IncognitoWriteError``,
  ``PluginLoadError``, ``SectionError``, ``SectionOrderError``, ``StoreError``,
  ``ValidationError``.

Test helpers (``reset_host``, the conformance kit) live in their modules, not here.
"""

from __future__ import annotations

import importlib as _importlib
import logging as _logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and IDEs see; at run time __getattr__ loads each on first use
    from contextplane.aprojection import acompose, acompose_projected_context
    from contextplane.authority import AUTHORITY_ORDER, PrefixSection, StablePrefix, build_stable_prefix
    from contextplane.backends import open_backend
    from contextplane.config import Config, load_config
    from contextplane.delivery import Delivered, ModelCall, adeliver, deliver
    from contextplane.embedding import AsyncEmbedder, Embedder
    from contextplane.errors import (
        ConfigError,
        ContextPlaneError,
        IncognitoWriteError,
        PluginLoadError,
        SectionError,
        SectionOrderError,
        StoreError,
        ValidationError,
    )
    from contextplane.hookspecs import hookimpl
    from contextplane.memory.model import MemoryChunk
    from contextplane.notices import PluginWarning, warn_once
    from contextplane.plugins import PluginHost, get_host, plugin_host_with
    from contextplane.projection import (
        InjectionRecord,
        ProjectedContext,
        SectionReport,
        compose,
        compose_projected_context,
    )
    from contextplane.records import Backend, InjectionLog, SessionSummaries, SnapshotStore
    from contextplane.request import BuildContext, ProjectionRequest, Surface
    from contextplane.runtime import MessageCodec, Runtime, Turn, open_runtime
    from contextplane.sections import ContextSection, Draft, Envelope, PromptSection, Row, Shed
    from contextplane.store.protocol import AsyncKnowledgeStore, KnowledgeStore, SearchHit

#: Where each public name is defined (the imports above, as data for ``__getattr__``).
_WHERE: dict[str, str] = {
    "AUTHORITY_ORDER": "contextplane.authority",
    "AsyncEmbedder": "contextplane.embedding",
    "AsyncKnowledgeStore": "contextplane.store.protocol",
    "Backend": "contextplane.records",
    "BuildContext": "contextplane.request",
    "Config": "contextplane.config",
    "ConfigError": "contextplane.errors",
    "ContextPlaneError": "contextplane.errors",
    "ContextSection": "contextplane.sections",
    "Delivered": "contextplane.delivery",
    "Draft": "contextplane.sections",
    "Embedder": "contextplane.embedding",
    "Envelope": "contextplane.sections",
    "IncognitoWriteError": "contextplane.errors",
    "InjectionLog": "contextplane.records",
    "InjectionRecord": "contextplane.projection",
    "KnowledgeStore": "contextplane.store.protocol",
    "MemoryChunk": "contextplane.memory.model",
    "MessageCodec": "contextplane.runtime",
    "ModelCall": "contextplane.delivery",
    "PluginHost": "contextplane.plugins",
    "PluginLoadError": "contextplane.errors",
    "PluginWarning": "contextplane.notices",
    "PrefixSection": "contextplane.authority",
    "ProjectedContext": "contextplane.projection",
    "ProjectionRequest": "contextplane.request",
    "PromptSection": "contextplane.sections",
    "Row": "contextplane.sections",
    "Runtime": "contextplane.runtime",
    "SearchHit": "contextplane.store.protocol",
    "SectionError": "contextplane.errors",
    "SectionOrderError": "contextplane.errors",
    "SectionReport": "contextplane.projection",
    "SessionSummaries": "contextplane.records",
    "Shed": "contextplane.sections",
    "SnapshotStore": "contextplane.records",
    "StablePrefix": "contextplane.authority",
    "StoreError": "contextplane.errors",
    "Surface": "contextplane.request",
    "Turn": "contextplane.runtime",
    "ValidationError": "contextplane.errors",
    "acompose": "contextplane.aprojection",
    "acompose_projected_context": "contextplane.aprojection",
    "adeliver": "contextplane.delivery",
    "build_stable_prefix": "contextplane.authority",
    "compose": "contextplane.projection",
    "compose_projected_context": "contextplane.projection",
    "deliver": "contextplane.delivery",
    "get_host": "contextplane.plugins",
    "hookimpl": "contextplane.hookspecs",
    "load_config": "contextplane.config",
    "open_runtime": "contextplane.runtime",
    "open_backend": "contextplane.backends",
    "plugin_host_with": "contextplane.plugins",
    "warn_once": "contextplane.notices",
}

__all__ = [
    "AUTHORITY_ORDER",
    "AsyncEmbedder",
    "AsyncKnowledgeStore",
    "Backend",
    "BuildContext",
    "Config",
    "ConfigError",
    "ContextPlaneError",
    "ContextSection",
    "Delivered",
    "Draft",
    "Embedder",
    "Envelope",
    "IncognitoWriteError",
    "InjectionLog",
    "InjectionRecord",
    "KnowledgeStore",
    "MemoryChunk",
    "MessageCodec",
    "ModelCall",
    "PluginHost",
    "PluginLoadError",
    "PluginWarning",
    "PrefixSection",
    "ProjectedContext",
    "ProjectionRequest",
    "PromptSection",
    "Row",
    "Runtime",
    "SearchHit",
    "SectionError",
    "SectionOrderError",
    "SectionReport",
    "SessionSummaries",
    "Shed",
    "SnapshotStore",
    "StablePrefix",
    "StoreError",
    "Surface",
    "Turn",
    "ValidationError",
    "acompose",
    "acompose_projected_context",
    "adeliver",
    "build_stable_prefix",
    "compose",
    "compose_projected_context",
    "deliver",
    "get_host",
    "hookimpl",
    "load_config",
    "open_backend",
    "open_runtime",
    "plugin_host_with",
    "warn_once",
]

__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'contextplane' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# Library etiquette: our records go to ``contextplane.*`` loggers and reach whatever handlers the
# application configures; none are printed on their own (the CLI installs a one-line handler).
_logging.getLogger("contextplane").addHandler(_logging.NullHandler())
