"""The plugin host's old import path: the host now lives in ``contextplane.host`` (loading,
calling, tracing), and every name this module had is re-exported here.

A name set here (``monkeypatch.setattr(plugins, "BUILTIN_PLUGINS", ...)``) is set too in the
``host`` module that reads it (``contextplane.shims``), as when the host was one module. The
process-wide host itself is ``contextplane.host.loading``'s: ``get_host`` and ``reset_host``
are the way to it.
"""

from __future__ import annotations

from contextplane.host import calling, loading, tracing
from contextplane.host.calling import T, _protocol_problems, log
from contextplane.host.loading import (
    _BUILTIN_NAMES,
    _SPEC_NAMES,
    BUILTIN_PLUGINS,
    ENTRY_POINT_GROUP,
    PLUGINS_ENV,
    UNHONOURED_OPTIONS,
    PluginHost,
    _default_lock,
    get_host,
    plugin_host_with,
    reset_host,
    selected_plugin_names,
)
from contextplane.host.tracing import (
    TRACE_ENV,
    PluginInfo,
    _core_version,
    _describe_exc,
    _trace_repr,
    trace_log,
)
from contextplane.shims import patch_through
from contextplane.types import PluginFailure, Registered

patch_through(__name__, (tracing, calling, loading))

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "PLUGINS_ENV",
    "TRACE_ENV",
    "UNHONOURED_OPTIONS",
    "_BUILTIN_NAMES",
    "_SPEC_NAMES",
    "PluginFailure",
    "PluginHost",
    "PluginInfo",
    "Registered",
    "T",
    "_core_version",
    "_default_lock",
    "_describe_exc",
    "_protocol_problems",
    "_trace_repr",
    "get_host",
    "log",
    "plugin_host_with",
    "reset_host",
    "selected_plugin_names",
    "trace_log",
]
