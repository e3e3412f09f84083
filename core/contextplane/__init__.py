"""contextplane: the stable prefix and the per-request projected context of an LLM agent.

The public surface is re-exported here; ``hookimpl`` is what plugins decorate hooks with.
Test helpers (``reset_host``, the conformance kit) live in their modules, not here.
"""

import logging as _logging

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

# Library etiquette: our records go to ``contextplane.*`` loggers and reach whatever handlers the
# application configures; none are printed on their own (the CLI installs a one-line handler).
_logging.getLogger("contextplane").addHandler(_logging.NullHandler())
