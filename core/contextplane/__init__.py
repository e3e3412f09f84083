"""contextplane: the stable prefix and the per-request projected context of an LLM agent.

The public surface is re-exported here; ``hookimpl`` is what plugins decorate hooks with.
"""

from contextplane.authority import AUTHORITY_ORDER, PrefixSection, StablePrefix, build_stable_prefix
from contextplane.config import Config, load_config
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
from contextplane.plugins import PluginHost, get_host, plugin_host_with, reset_host
from contextplane.projection import (
    InjectionRecord,
    ProjectedContext,
    SectionReport,
    compose_projected_context,
)
from contextplane.request import BuildContext, Mode, ProjectionRequest
from contextplane.sections import ContextSection, Draft, Envelope, PromptSection, Row, Shed

__all__ = [
    "AUTHORITY_ORDER",
    "BuildContext",
    "Config",
    "ConfigError",
    "ContextPlaneError",
    "ContextSection",
    "Draft",
    "Envelope",
    "IncognitoWriteError",
    "InjectionRecord",
    "Mode",
    "PluginHost",
    "PluginLoadError",
    "PrefixSection",
    "ProjectedContext",
    "ProjectionRequest",
    "PromptSection",
    "Row",
    "SectionError",
    "SectionOrderError",
    "SectionReport",
    "Shed",
    "StablePrefix",
    "StoreError",
    "ValidationError",
    "build_stable_prefix",
    "compose_projected_context",
    "get_host",
    "hookimpl",
    "load_config",
    "plugin_host_with",
    "reset_host",
]

__version__ = "0.1.0"
