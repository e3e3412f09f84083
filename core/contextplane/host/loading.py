"""Loading plugins: the built-ins by module path, then each ``contextplane`` entry point on its own.

Why not ``PluginManager.load_setuptools_entrypoints``: it stops at the first entry point that
fails to import and leaves a half-registered plugin behind when validation fails. A broken
third-party plugin must not take down a turn, so each entry point is loaded, validated and
registered on its own, and every failure is recorded (or raised, in strict mode).

Why registration refuses pluggy's ordering and wrapping options: the host calls each
implementation itself (``contextplane.host.calling``), so ``tryfirst`` or ``wrapper`` would
silently do nothing; the refusal says so, in pluggy's own style of message.

``PluginHost`` is the whole host: ``HookCalls`` (the typed calls) plus what fills it, and the
process-wide host that ``get_host`` loads lazily, on first use.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata as md
import os
import threading
from collections.abc import Iterable, Mapping

import attrs

from contextplane import hookspecs
from contextplane.config import Config, load_config
from contextplane.errors import ConfigError
from contextplane.host.calling import HookCalls
from contextplane.host.tracing import PluginInfo, _core_version, _describe_exc
from contextplane.notices import PluginWarning, warn_once
from contextplane.types import PluginFailure

ENTRY_POINT_GROUP = "contextplane"
PLUGINS_ENV = "CONTEXTPLANE_PLUGINS"
#: The built-in plugins every host holds (they can be disabled like any other): each plugin's
#: name and the module that is the plugin, imported when a host is made, not when this module
#: is (as llm loads its default plugins). Importing the record pipeline here made a knot: the
#: observer reads the turn's types, the engine imports this host, this host imported the observer.
BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (
    ("contextplane.records", "contextplane.observability.observer"),
)
#: pluggy hookimpl options the facade does not honour, with why (shown in the refusal).
UNHONOURED_OPTIONS: Mapping[str, str] = {
    "wrapper": "hooks are called one implementation at a time, so there is no call to wrap",
    "hookwrapper": "hooks are called one implementation at a time, so there is no call to wrap",
    "tryfirst": "the order is contextplane's own (plugin name, then section priority or before/after)",
    "trylast": "the order is contextplane's own (plugin name, then section priority or before/after)",
    "historic": "contextplane hooks are not historic",
}

_BUILTIN_NAMES = frozenset(name for name, _ in BUILTIN_PLUGINS)

_SPEC_NAMES = frozenset(
    name for name in dir(hookspecs) if hasattr(getattr(hookspecs, name), "contextplane_spec")
)


def selected_plugin_names(config: Config, environ: Mapping[str, str] | None = None) -> set[str] | None:
    """The plugin allow-list: ``CONTEXTPLANE_PLUGINS`` beats ``plugins.enabled``; None means all."""
    env = os.environ if environ is None else environ
    if PLUGINS_ENV in env:
        return {n.strip() for n in env[PLUGINS_ENV].split(",") if n.strip()}
    if config.plugins.enabled is not None:
        return set(config.plugins.enabled)
    return None



class PluginHost(HookCalls):
    """Owns one pluggy ``PluginManager`` and everything it loaded."""

    def __init__(self, config: Config | None = None, *, strict: bool | None = None) -> None:
        super().__init__(config, strict=strict)
        self._skipped: list[PluginInfo] = []
        disabled = set(self.config.plugins.disabled)
        for name, module in BUILTIN_PLUGINS:
            if name in disabled:
                self._skipped.append(PluginInfo(name, "contextplane", None, loaded=False, builtin=True))
            else:
                plugin = importlib.import_module(module)
                self.register(plugin, name, distribution="contextplane", version=_core_version())

    # --- loading ------------------------------------------------------------------------

    @classmethod
    def from_entry_points(
        cls,
        config: Config | None = None,
        *,
        strict: bool | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> PluginHost:
        """A host with every selected ``contextplane`` entry point loaded, one at a time."""
        host = cls(config, strict=strict)
        host.load_entry_points(environ=environ)
        return host

    def load_entry_points(self, *, environ: Mapping[str, str] | None = None) -> None:
        """Load each entry point of the group in name order, isolating every failure."""
        allowed = selected_plugin_names(self.config, environ)
        disabled = set(self.config.plugins.disabled)
        eps = sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value))
        for ep in eps:
            dist = ep.dist.name if ep.dist is not None else None
            version = ep.dist.version if ep.dist is not None else None
            if (allowed is not None and ep.name not in allowed) or ep.name in disabled:
                self._skipped.append(PluginInfo(ep.name, dist, version, loaded=False))
                continue
            if self.pm.has_plugin(ep.name):
                self._fail(PluginFailure(ep.name, dist, "load", "another plugin already uses this name"))
                continue
            try:
                obj = ep.load()
            except BaseException as exc:  # an import can raise anything, SystemExit included
                if isinstance(exc, KeyboardInterrupt):
                    raise
                self._fail(PluginFailure(ep.name, dist, "import", _describe_exc(exc)), exc)
                continue
            self.register(obj, ep.name, distribution=dist, version=version)
        known = {ep.name for ep in eps} | _BUILTIN_NAMES
        self._warn_unknown_names(known, allowed, disabled, environ)
        self._check_settings_tables(known)

    def _check_settings_tables(self, known: set[str]) -> None:
        """A ``[plugin.<name>]`` table that names no installed plugin is read by nobody. Close
        to an installed plugin's name it is a typo and an error, like any unknown key; else it
        may be for a plugin installed elsewhere, and warns once."""
        for name in sorted(set(self.config.plugin) - known):
            near = difflib.get_close_matches(name, sorted(known), n=1)
            where = f"(in {self.config.source})"
            if near:
                raise ConfigError(
                    f"[plugin.{name}] names no installed plugin, so nothing reads it; did you mean "
                    f"[plugin.{near[0]}]? {where}"
                )
            warn_once(
                ("unknown-plugin-table", name),
                f"[plugin.{name}] names no installed plugin, so nothing reads it {where}; "
                f"installed: {', '.join(sorted(known))}",
                PluginWarning,
            )

    def _warn_unknown_names(
        self,
        known: set[str],
        allowed: set[str] | None,
        disabled: set[str],
        environ: Mapping[str, str] | None,
    ) -> None:
        """A plugin name that matches nothing is a typo that silently does nothing: say so once,
        with the closest installed name."""
        env = os.environ if environ is None else environ
        chooser = PLUGINS_ENV if PLUGINS_ENV in env else "plugins.enabled"
        for source, names in ((chooser, allowed or set()), ("plugins.disabled", disabled)):
            for name in sorted(names - known):
                near = difflib.get_close_matches(name, sorted(known), n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                warn_once(
                    ("unknown-plugin", source, name),
                    f"{source} names {name!r}, which is no installed plugin, so it does nothing{hint}; "
                    f"installed: {', '.join(sorted(known))}",
                    PluginWarning,
                )

    def _validate(self, plugin: object, name: str) -> list[str]:
        problems = []
        for attr in dir(plugin):
            opts = self.pm.parse_hookimpl_opts(plugin, attr)
            if opts is None:
                continue
            hook_name = opts.get("specname") or attr
            if hook_name not in _SPEC_NAMES:
                near = difflib.get_close_matches(hook_name, sorted(_SPEC_NAMES), n=1)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                problems.append(f"{attr} implements unknown hook {hook_name!r}{hint}")
                continue
            for option, why in UNHONOURED_OPTIONS.items():
                if opts.get(option):
                    function = getattr(plugin, attr)
                    where = getattr(function, "__qualname__", attr)
                    module = getattr(function, "__module__", None)
                    problems.append(
                        f"hook implementation {where!r} for hook {hook_name!r}"
                        + (f" in module {module!r}" if module else "")
                        + f" asks for {option}=True, which contextplane does not honour: {why}. "
                        f"Remove {option}=True from its @hookimpl"
                    )
        return problems

    def register(
        self,
        plugin: object,
        name: str | None = None,
        *,
        distribution: str | None = None,
        version: str | None = None,
    ) -> str | None:
        """Register a plugin object; returns its name, or None when it was rejected (and recorded)."""
        pname = (
            name
            or getattr(plugin, "plugin_name", None)
            or getattr(plugin, "__name__", None)
            or type(plugin).__name__
        )
        problems = self._validate(plugin, pname)
        if problems:
            self._fail(PluginFailure(pname, distribution, "validation", "; ".join(problems)))
            return None
        try:
            self.pm.register(plugin, name=pname)
        except Exception as exc:
            # pluggy may leave the name behind after a failed registration; clear it.
            if self.pm.has_plugin(pname):
                self.pm.unregister(name=pname)
            self._fail(PluginFailure(pname, distribution, "validation", _describe_exc(exc)))
            return None
        self._meta[pname] = (distribution, version)
        self._forget()
        return pname

    def unregister(self, name: str) -> None:
        """Remove a plugin, so tests can register one and take it away in ``finally``."""
        if self.pm.has_plugin(name):
            self.pm.unregister(name=name)
        self._meta.pop(name, None)
        self._forget()

    # --- reporting ----------------------------------------------------------------------

    def plugin_infos(self) -> list[PluginInfo]:
        """One record per plugin: loaded, skipped by selection, or failed."""
        prompt = self.prompt_sections()
        self.prefix_sections()  # records a plugin left out for its before/after
        context = self.context_sections()
        infos: dict[str, PluginInfo] = {}
        for name, plugin in self.pm.list_name_plugin():
            if plugin is None:
                continue
            dist, version = self._meta.get(name, (None, None))
            hooks = tuple(sorted(h.name for h in self.pm.get_hookcallers(plugin) or []))
            infos[name] = PluginInfo(
                name=name,
                distribution=dist,
                version=version,
                builtin=name in _BUILTIN_NAMES,
                hooks=hooks,
                prompt_sections=tuple(r.section.name for r in prompt if r.plugin == name),
                context_sections=tuple(r.section.name for r in context if r.plugin == name),
            )
        for failure in self.failures:
            info = infos.get(failure.plugin) or PluginInfo(failure.plugin, failure.distribution, loaded=False)
            infos[failure.plugin] = attrs.evolve(
                info, errors=(*info.errors, f"{failure.stage}: {failure.error}")
            )
        for skipped in self._skipped:
            infos.setdefault(skipped.name, skipped)
        return [infos[k] for k in sorted(infos)]


_default: PluginHost | None = None
_default_lock = threading.Lock()


def get_host(config: Config | None = None) -> PluginHost:
    """The process-wide host, loaded lazily on first use (never at import time).

    ``config`` is used only for that first load. Passing a config later never reloads or
    replaces the host (a runtime that calls ``load_config()`` per request must not re-import
    every plugin per request); build a ``PluginHost`` of your own for a different config."""
    global _default
    with _default_lock:
        if _default is None:
            _default = PluginHost.from_entry_points(config if config is not None else load_config())
        return _default


def reset_host() -> None:
    """Forget the process-wide host (tests, or after changing ``CONTEXTPLANE_PLUGINS``)."""
    global _default
    with _default_lock:
        _default = None


def plugin_host_with(
    plugins: Iterable[object], config: Config | None = None, *, strict: bool | None = None
) -> PluginHost:
    """A host holding only the given plugin objects: no entry points (tests, benchmarks, embedding)."""
    host = PluginHost(config, strict=strict)
    for p in plugins:
        host.register(p)
    return host
