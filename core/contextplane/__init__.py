"""contextplane: the stable prefix and the per-request projected context of an LLM agent.

This package is the runtime author's face: what you need to wire contextplane into an agent's
loop and run turns. Section authors import ``contextplane.section``; store and backend authors
``contextplane.backend`` (CONTRIBUTING.md, "The three faces", has an example of each).

Everything is imported lazily: ``import contextplane`` loads no submodule, and
``from contextplane import X`` loads only the module that defines ``X`` (PEP 562). Why: every
process that has contextplane installed pays for this import (the kit's pytest plugin,
``contextplane --help``, a plugin that only needs ``hookimpl``), and the full surface pulls in
the store (apsw, sqlite-vec), cattrs and the plugin host, a quarter of a second.

``__all__``, the runtime author's names:

* wiring and turns: ``open_runtime``, ``Runtime``, ``Turn``, ``MessageCodec``,
  ``load_config``, ``Config``, ``get_host``, ``PluginHost``, ``open_backend``;
* a turn's data: ``ProjectionRequest``, ``Surface``, ``ProjectedContext``,
  ``SectionReport``, ``InjectionRecord``, ``ModelCall``, ``Delivered``, ``StablePrefix``;
* the one-call composition of ADR D8, for a caller that wires nothing:
  ``compose_projected_context``, ``acompose_projected_context``;
* the errors a runtime catches: ``ContextPlaneError`` (the base of all), ``ConfigError``,
  ``PluginLoadError``, ``SectionOrderError``, ``StoreError``, ``ValidationError``,
  ``IncognitoWriteError``.

Every name the root exported before the faces still imports from here, as the same object
(third parties import them), but is no longer in ``__all__`` (nor ``dir()`` until used): the
section face's (``hookimpl``, ``ContextSection``, ``Row``, ...), the backend face's
(``KnowledgeStore``, ``Backend``, ...) and the composition calls a ``Runtime`` now makes
(``compose``, ``acompose``, ``deliver``, ``adeliver``: ``Runtime.compose`` and so on).
CHANGELOG.md lists them with their new home.

Test helpers (``reset_host``, the conformance kit) live in their modules, not here.
"""

from __future__ import annotations

import importlib as _importlib
import logging as _logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and IDEs see; at run time __getattr__ loads each on first use
    from contextplane.aprojection import acompose_projected_context
    from contextplane.authority import StablePrefix
    from contextplane.backends import open_backend
    from contextplane.config import Config, load_config
    from contextplane.delivery import Delivered, ModelCall
    from contextplane.errors import (
        ConfigError,
        ContextPlaneError,
        IncognitoWriteError,
        PluginLoadError,
        SectionOrderError,
        StoreError,
        ValidationError,
    )
    from contextplane.plugins import PluginHost, get_host
    from contextplane.projection import (
        InjectionRecord,
        ProjectedContext,
        SectionReport,
        compose_projected_context,
    )
    from contextplane.request import ProjectionRequest, Surface
    from contextplane.runtime import MessageCodec, Runtime, Turn, open_runtime

if TYPE_CHECKING:  # kept names (not in __all__): ``X as X`` is mypy's mark of a re-export
    from contextplane.aprojection import acompose as acompose
    from contextplane.authority import AUTHORITY_ORDER as AUTHORITY_ORDER
    from contextplane.authority import PrefixSection as PrefixSection
    from contextplane.authority import build_stable_prefix as build_stable_prefix
    from contextplane.delivery import adeliver as adeliver
    from contextplane.delivery import deliver as deliver
    from contextplane.embedding import AsyncEmbedder as AsyncEmbedder
    from contextplane.embedding import Embedder as Embedder
    from contextplane.errors import SectionError as SectionError
    from contextplane.markers import hookimpl as hookimpl
    from contextplane.memory.model import MemoryChunk as MemoryChunk
    from contextplane.notices import PluginWarning as PluginWarning
    from contextplane.notices import warn_once as warn_once
    from contextplane.plugins import plugin_host_with as plugin_host_with
    from contextplane.projection import compose as compose
    from contextplane.records import Backend as Backend
    from contextplane.records import InjectionLog as InjectionLog
    from contextplane.records import SessionSummaries as SessionSummaries
    from contextplane.records import SnapshotStore as SnapshotStore
    from contextplane.request import BuildContext as BuildContext
    from contextplane.sections import ContextSection as ContextSection
    from contextplane.sections import Draft as Draft
    from contextplane.sections import Envelope as Envelope
    from contextplane.sections import PromptSection as PromptSection
    from contextplane.sections import Row as Row
    from contextplane.sections import Shed as Shed
    from contextplane.store.protocol import AsyncKnowledgeStore as AsyncKnowledgeStore
    from contextplane.store.protocol import KnowledgeStore as KnowledgeStore
    from contextplane.store.protocol import SearchHit as SearchHit

#: Where each name the root resolves is defined (both blocks above, as data for ``__getattr__``).
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
    "hookimpl": "contextplane.markers",
    "load_config": "contextplane.config",
    "open_runtime": "contextplane.runtime",
    "open_backend": "contextplane.backends",
    "plugin_host_with": "contextplane.plugins",
    "warn_once": "contextplane.notices",
}

__all__ = [
    "Config",
    "ConfigError",
    "ContextPlaneError",
    "Delivered",
    "IncognitoWriteError",
    "InjectionRecord",
    "MessageCodec",
    "ModelCall",
    "PluginHost",
    "PluginLoadError",
    "ProjectedContext",
    "ProjectionRequest",
    "Runtime",
    "SectionOrderError",
    "SectionReport",
    "StablePrefix",
    "StoreError",
    "Surface",
    "Turn",
    "ValidationError",
    "acompose_projected_context",
    "compose_projected_context",
    "get_host",
    "load_config",
    "open_backend",
    "open_runtime",
]

__version__ = "0.3.0"


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'contextplane' has no attribute {name!r}{_elsewhere(name)}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _elsewhere(name: str) -> str:
    """Where a name the root lacks lives instead, said in the error (a role face's name)."""
    if name.startswith("_"):  # probes (``__path__``, pytest's ``_mock_name``, ...): no face holds
        return ""  # a private name, and looking would import the other faces
    for face in ("contextplane.section", "contextplane.backend"):
        if name in getattr(_importlib.import_module(face), "__all__", ()):
            return f"; it is in {face}: from {face} import {name}"
    return ""


# Library etiquette: our records go to ``contextplane.*`` loggers and reach whatever handlers the
# application configures; none are printed on their own (the CLI installs a one-line handler).
_logging.getLogger("contextplane").addHandler(_logging.NullHandler())
