"""The plugin host, split by job: ``loading`` (the built-ins by module path, entry points one at
a time, validation, the process-wide host), ``calling`` (the typed facade over the hook calls,
a failing plugin isolated, strict mode) and ``tracing`` (the trace of hook calls, versions, the
plugins report). ``contextplane.plugins``, the path the host had as one module, re-exports
every name it had.
"""

from __future__ import annotations

from contextplane.host.calling import HookCalls
from contextplane.host.loading import (
    BUILTIN_PLUGINS,
    ENTRY_POINT_GROUP,
    PLUGINS_ENV,
    PluginHost,
    get_host,
    plugin_host_with,
    reset_host,
    selected_plugin_names,
)
from contextplane.host.tracing import TRACE_ENV, PluginInfo

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "PLUGINS_ENV",
    "TRACE_ENV",
    "HookCalls",
    "PluginHost",
    "PluginInfo",
    "get_host",
    "plugin_host_with",
    "reset_host",
    "selected_plugin_names",
]
