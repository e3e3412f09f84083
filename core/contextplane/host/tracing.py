"""What the host tells about the plugins it runs: the trace of each hook call, the versions a
recorded turn keeps, and the ``contextplane plugins`` report.

``CONTEXTPLANE_TRACE_PLUGINS=1`` logs every hook call (plugin, arguments, result or error) to
the ``contextplane.plugins.trace`` logger at INFO, as datasette's ``DATASETTE_TRACE_PLUGINS``
does. Why the logger keeps the old module's name: log configurations and ``caplog`` filters
name it, and the split moved code, not what an operator reads.
"""

from __future__ import annotations

import importlib.metadata as md
import logging
import os
import reprlib
import time
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs
import pluggy

TRACE_ENV = "CONTEXTPLANE_TRACE_PLUGINS"

trace_log = logging.getLogger("contextplane.plugins.trace")
_trace_repr = reprlib.Repr()
_trace_repr.maxstring = 80
_trace_repr.maxother = 80


@attrs.frozen
class PluginInfo:
    """What ``contextplane plugins`` reports about one plugin."""

    name: str
    distribution: str | None = None
    version: str | None = None
    hooks: tuple[str, ...] = ()
    prompt_sections: tuple[str, ...] = ()
    context_sections: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    loaded: bool = True
    #: Part of contextplane itself (the record pipeline), not an entry point: entry-point
    #: selection (``CONTEXTPLANE_PLUGINS``) leaves it alone; ``plugins.disabled`` does not.
    builtin: bool = False


def _describe_exc(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def tracing_enabled() -> bool:
    """Whether ``CONTEXTPLANE_TRACE_PLUGINS`` asks for the trace (read when a host is made)."""
    return os.environ.get(TRACE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def call_traced(impl: pluggy.HookImpl, args: Mapping[str, Any]) -> Any:
    """Call one hook implementation and log the call, its result or its error, and its time."""
    hook = getattr(impl.function, "__name__", "?")
    shown = ", ".join(f"{k}={_trace_repr.repr(v)}" for k, v in args.items())
    started = time.perf_counter()
    try:
        result = impl.function(**args)
    except Exception as exc:
        trace_log.info(
            "hook %s plugin=%s (%s) raised %s in %.3f ms",
            hook,
            impl.plugin_name,
            shown,
            _describe_exc(exc),
            (time.perf_counter() - started) * 1e3,
        )
        raise
    trace_log.info(
        "hook %s plugin=%s (%s) -> %s in %.3f ms",
        hook,
        impl.plugin_name,
        shown,
        _trace_repr.repr(result),
        (time.perf_counter() - started) * 1e3,
    )
    return result


def _core_version() -> str | None:
    """The installed contextplane's version: the built-in plugins are part of it."""
    try:
        return md.version("contextplane")
    except md.PackageNotFoundError:
        return None


def versions_of(
    names: Iterable[str], meta: Mapping[str, tuple[str | None, str | None]]
) -> Mapping[str, str | None]:
    """``{plugin name: version}`` in name order, from each plugin's (distribution, version)."""
    return MappingProxyType({name: meta.get(name, (None, None))[1] for name in sorted(names)})
