"""The plugin host: loading, isolation, and a typed facade over the hook calls.

Why not ``PluginManager.load_setuptools_entrypoints``: it stops at the first entry point that
fails to import and leaves a half-registered plugin behind when validation fails. A broken
third-party plugin must not take down a turn, so each entry point is loaded, validated and
registered on its own, and every failure is recorded (or raised, in strict mode).

Why a facade: ``pm.hook.x(...)`` returns ``Any`` and cannot tell us which plugin produced
what. The host calls each implementation itself, so every section is attributed to its plugin
and every failure to its source. Calling them itself means pluggy's ordering and wrapping
options would silently do nothing, so the host refuses them at registration, in pluggy's own
style of message: a plugin that asks for ``tryfirst`` must learn that it does not get it.

``CONTEXTPLANE_TRACE_PLUGINS=1`` logs every hook call (plugin, arguments, result or error) to
the ``contextplane.plugins.trace`` logger at INFO, as datasette's ``DATASETTE_TRACE_PLUGINS``
does.
"""

from __future__ import annotations

import asyncio
import difflib
import importlib
import importlib.metadata as md
import inspect
import logging
import os
import reprlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar, cast

import attrs
import pluggy

from contextplane import authority, hookspecs
from contextplane.config import Config, load_config
from contextplane.embedding import CONFIGURED, Embedder
from contextplane.errors import ConfigError, PluginLoadError, SectionError, StoreError
from contextplane.notices import PluginWarning, log_failure, log_once, warn_once
from contextplane.records.backend import Backend, check_backend
from contextplane.request import ProjectionRequest
from contextplane.sections import ContextSection, PromptSection
from contextplane.store.protocol import KnowledgeStore
from contextplane.types import ModelCall, ProjectedContext, StablePrefix
from contextplane.types import PluginFailure as PluginFailure
from contextplane.types import Registered as Registered

ENTRY_POINT_GROUP = "contextplane"
PLUGINS_ENV = "CONTEXTPLANE_PLUGINS"
TRACE_ENV = "CONTEXTPLANE_TRACE_PLUGINS"
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

log = logging.getLogger("contextplane.plugins")
trace_log = logging.getLogger("contextplane.plugins.trace")
_trace_repr = reprlib.Repr()
_trace_repr.maxstring = 80
_trace_repr.maxother = 80

_SPEC_NAMES = frozenset(
    name for name in dir(hookspecs) if hasattr(getattr(hookspecs, name), "contextplane_spec")
)


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


T = TypeVar("T")


def _describe_exc(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def selected_plugin_names(config: Config, environ: Mapping[str, str] | None = None) -> set[str] | None:
    """The plugin allow-list: ``CONTEXTPLANE_PLUGINS`` beats ``plugins.enabled``; None means all."""
    env = os.environ if environ is None else environ
    if PLUGINS_ENV in env:
        return {n.strip() for n in env[PLUGINS_ENV].split(",") if n.strip()}
    if config.plugins.enabled is not None:
        return set(config.plugins.enabled)
    return None


class PluginHost:
    """Owns one pluggy ``PluginManager`` and everything it loaded."""

    def __init__(self, config: Config | None = None, *, strict: bool | None = None) -> None:
        self.config = config if config is not None else Config()
        self.strict = self.config.plugins.strict if strict is None else strict
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.failures: list[PluginFailure] = []
        self._meta: dict[str, tuple[str | None, str | None]] = {}
        self._skipped: list[PluginInfo] = []
        self._prompt: list[Registered[PromptSection]] | None = None
        self._prefix: list[Registered[PromptSection]] | None = None
        self._context: list[Registered[ContextSection]] | None = None
        self._ordered: tuple[Registered[ContextSection], ...] | None = None
        self._versions: Mapping[str, str | None] | None = None
        self._lock = threading.Lock()
        #: The configured embedder (or the error saying why there is none), made once.
        self._embedder: tuple[Embedder | ConfigError | None] | None = None
        self._embedder_lock = threading.Lock()
        self.trace = os.environ.get(TRACE_ENV, "").strip().lower() not in ("", "0", "false", "no")
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

    def _fail(self, failure: PluginFailure, exc: BaseException | None = None) -> None:
        self.failures.append(failure)
        if self.strict:
            raise PluginLoadError(failure.describe() + " (strict mode: fix or disable the plugin)")
        self._log(failure, exc)

    def _log(self, failure: PluginFailure, exc: BaseException | None) -> None:
        """Log an isolated failure once (with its traceback when there is one)."""
        key = ("plugin", failure.plugin, failure.stage, failure.error)
        if exc is not None:
            log_failure(log, key, "%s", failure.describe(), exc=exc)
        else:
            log_once(log, key, logging.WARNING, "%s", failure.describe())

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
        self._prompt = None
        self._prefix = None
        self._context = None
        self._ordered = None
        self._versions = None
        self._embedder = None
        return pname

    def unregister(self, name: str) -> None:
        """Remove a plugin, so tests can register one and take it away in ``finally``."""
        if self.pm.has_plugin(name):
            self.pm.unregister(name=name)
        self._meta.pop(name, None)
        self._prompt = None
        self._prefix = None
        self._context = None
        self._ordered = None
        self._versions = None
        self._embedder = None

    def plugin_versions(self) -> Mapping[str, str | None]:
        """``{plugin name: version}`` of every registered plugin (None when it came from no
        distribution), cached until a plugin is registered or removed: what a recorded turn
        keeps so a replay can say a plugin changed."""
        found = self._versions
        if found is None:
            found = self._versions = MappingProxyType(
                {
                    name: self._meta.get(name, (None, None))[1]
                    for name, _ in sorted(self.pm.list_name_plugin())
                }
            )
        return found

    # --- the typed facade ---------------------------------------------------------------

    def _impls(self, hook_name: str) -> list[pluggy.HookImpl]:
        caller = getattr(self.pm.hook, hook_name)
        # Registration order is not an ordering promise; sort by plugin name for determinism.
        return sorted(caller.get_hookimpls(), key=lambda i: i.plugin_name)

    def _call(self, impl: pluggy.HookImpl, kwargs: Mapping[str, Any]) -> Any:
        args = {k: kwargs[k] for k in impl.argnames if k in kwargs}
        if not self.trace:
            return impl.function(**args)
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

    def _collect(self, hook_name: str, kind: type[T]) -> list[Registered[T]]:
        found: list[Registered[T]] = []
        for impl in self._impls(hook_name):
            items: list[T] = []

            def register(section: T, _items: list[T] = items, _plugin: str = impl.plugin_name) -> None:
                if not isinstance(section, kind):
                    raise TypeError(
                        f"plugin {_plugin!r} passed {type(section).__name__} to register(); "
                        f"expected contextplane.{kind.__name__}"
                    )
                _items.append(section)

            try:
                self._call(impl, {"register": register, "config": self.config})
            except (Exception, SystemExit) as exc:  # a plugin calling sys.exit() is a failure too
                dist = self._meta.get(impl.plugin_name, (None, None))[0]
                self._fail(PluginFailure(impl.plugin_name, dist, hook_name, _describe_exc(exc)), exc)
                continue
            found.extend(Registered(item, impl.plugin_name) for item in items)
        return found

    def prompt_sections(self) -> list[Registered[PromptSection]]:
        """Every registered stable-prefix section, attributed to its plugin (cached)."""
        with self._lock:
            if self._prompt is None:
                self._prompt = self._collect("register_prompt_sections", PromptSection)
            return list(self._prompt)

    def prefix_sections(self) -> list[Registered[PromptSection]]:
        """The prompt sections the stable prefix is built from (cached). Outside strict mode a
        plugin whose ``before``/``after`` names no section loses its prompt sections, and only
        those, recorded once as its failure (``contextplane plugins`` and ``preview`` show it);
        in strict mode ``resolve_order`` raises instead."""
        sections = self.prompt_sections()
        with self._lock:
            if self._prefix is None:
                kept = sections
                if not self.strict:
                    kept, dropped = authority.prune_unknown_targets(sections)
                    for plugin, why in dropped:
                        dist = self._meta.get(plugin, (None, None))[0]
                        self._fail(PluginFailure(plugin, dist, authority.ORDER_STAGE, why))
                self._prefix = kept
            return list(self._prefix)

    def context_sections(self) -> list[Registered[ContextSection]]:
        """Every registered projected-context section, attributed to its plugin (cached)."""
        with self._lock:
            if self._context is None:
                self._context = self._collect("register_context_sections", ContextSection)
            return list(self._context)

    def ordered_context_sections(self) -> tuple[Registered[ContextSection], ...]:
        """The context sections in draft order: priority, then name (cached; the same tuple
        object until a plugin is registered or removed, so callers may memoise checks on it)."""
        with self._lock:
            if self._context is None:
                self._context = self._collect("register_context_sections", ContextSection)
            if self._ordered is None:
                self._ordered = tuple(
                    sorted(self._context, key=lambda r: (r.section.priority, r.section.name))
                )
            return self._ordered

    def _first(
        self,
        hook_name: str,
        fits: Callable[[object], list[str]] | None = None,
        what: str = "",
        lazy: Mapping[str, Callable[[], Any]] | None = None,
    ) -> Any:
        # firstresult semantics, but in our documented order and with failures isolated. A
        # result that does not fit its protocol is a recorded failure, and the next plugin
        # is asked: a dict offered as a store must not reach the sections. ``lazy`` arguments
        # are computed only for an implementation that takes them (an embedder loads a model).
        for impl in self._impls(hook_name):
            dist = self._meta.get(impl.plugin_name, (None, None))[0]
            kwargs: dict[str, Any] = {"config": self.config}
            for key, make in (lazy or {}).items():
                if key in impl.argnames:
                    kwargs[key] = make()
            try:
                result = self._call(impl, kwargs)
            except (Exception, SystemExit) as exc:
                failure = PluginFailure(impl.plugin_name, dist, hook_name, _describe_exc(exc))
                if hook_name == "backend" and isinstance(exc, StoreError) and not self.strict:
                    # The plugin took the backend on and could not open it (a server that is not
                    # there, a bad URL): ``open_backend`` raises this very reason as the command's
                    # one error line, so it is recorded here, not also logged as a warning.
                    self.failures.append(failure)
                    log.debug("%s", failure.describe(), exc_info=exc)
                    continue
                self._fail(failure, exc)
                continue
            if result is None:
                continue
            problems = fits(result) if fits is not None else []
            if problems:
                self._fail(
                    PluginFailure(
                        impl.plugin_name,
                        dist,
                        hook_name,
                        f"returned {type(result).__name__}, which is not {what}: {'; '.join(problems)}; "
                        "return one, or None to let another plugin decide",
                    )
                )
                continue
            return result
        return None

    def backend(self, embedder: Embedder | None = CONFIGURED) -> Backend | None:
        """The first ``Backend`` a plugin offers (plugins asked in name order), else None. A
        backend that takes an ``embedder`` gets the configured one (``embedder()``), or the one
        given here (None: open it for full text only, as ``memory reindex --rebuild`` does)."""

        def chosen() -> Embedder | None:
            return self.embedder() if embedder is CONFIGURED else embedder

        found = self._first("backend", check_backend, "a contextplane Backend", {"embedder": chosen})
        return cast(Backend | None, found)

    def knowledge_store(self) -> KnowledgeStore | None:
        """The first ``KnowledgeStore`` a plugin offers (plugins asked in name order), else None."""
        found = self._first("knowledge_store", _protocol_problems(KnowledgeStore), "a KnowledgeStore")
        return cast(KnowledgeStore | None, found)

    def embedder(self) -> Embedder | None:
        """The first ``Embedder`` a plugin offers (plugins asked in name order), else None; made
        once per host (a local model loads once). When ``[embedder] provider`` is set and no
        plugin offers it, raise ``ConfigError`` naming why: never full text by surprise."""
        with self._embedder_lock:
            if self._embedder is None:
                seen = len(self.failures)
                found = self._first("embedder", _protocol_problems(Embedder), "an Embedder")
                wanted = self.config.embedder.provider
                if found is None and wanted:
                    why = [f.error for f in self.failures[seen:] if f.stage == "embedder"]
                    found = ConfigError(
                        f"embedder.provider = {wanted!r}, but no plugin offered that embedder"
                        + (f": {why[-1]}" if why else "; is the plugin that provides it installed?")
                        + f" (in {self.config.source})"
                    )
                self._embedder = (found,)
            (result,) = self._embedder
        if isinstance(result, ConfigError):
            raise result
        return result

    def _notify(
        self, hook_name: str, kwargs: Mapping[str, Any], impls: Iterable[pluggy.HookImpl] | None = None
    ) -> list[PluginFailure]:
        failures = []
        for impl in self._impls(hook_name) if impls is None else impls:
            try:
                self._call(impl, kwargs)
            except (Exception, SystemExit) as exc:  # a plugin calling sys.exit() is a failure too
                failures.append(self._observer_failed(impl, hook_name, exc))
        return failures

    def _observer_failed(self, impl: pluggy.HookImpl, hook_name: str, exc: BaseException) -> PluginFailure:
        dist = self._meta.get(impl.plugin_name, (None, None))[0]
        failure = PluginFailure(impl.plugin_name, dist, hook_name, _describe_exc(exc))
        self.failures.append(failure)
        if self.strict:
            raise SectionError(failure.describe() + " (strict mode)") from exc
        self._log(failure, exc)
        return failure

    async def _anotify(self, hook_name: str, kwargs: Mapping[str, Any]) -> list[PluginFailure]:
        """``_notify`` for an event loop, in the same order with the same isolation: an observer
        whose plugin also has an async twin (``a<hook name>``, a coroutine function taking the
        same arguments; the records observer has them) is awaited; the others are synchronous
        and may block, so they are called in a worker thread, consecutive ones in one hop."""
        failures: list[PluginFailure] = []
        waiting: list[pluggy.HookImpl] = []
        for impl in [*self._impls(hook_name), None]:
            twin = None if impl is None else getattr(impl.plugin, "a" + hook_name, None)
            if impl is not None and not inspect.iscoroutinefunction(twin):
                waiting.append(impl)
                continue
            if waiting:
                failures.extend(await asyncio.to_thread(self._notify, hook_name, kwargs, list(waiting)))
                waiting.clear()
            if impl is None:
                break
            assert twin is not None
            try:
                await twin(**{k: kwargs[k] for k in impl.argnames if k in kwargs})
            except (Exception, SystemExit) as exc:
                failures.append(self._observer_failed(impl, hook_name, exc))
        return failures

    def notify_projection(
        self, projection: ProjectedContext, request: ProjectionRequest
    ) -> list[PluginFailure]:
        """Hand a composed projection to every observer; failures are recorded, not raised."""
        return self._notify("observe_projection", {"projection": projection, "request": request})

    def notify_model_call(self, call: ModelCall, request: ProjectionRequest) -> list[PluginFailure]:
        """Tell every observer about one model call a projection is delivered to."""
        return self._notify("observe_model_call", {"call": call, "request": request})

    async def anotify_projection(
        self, projection: ProjectedContext, request: ProjectionRequest
    ) -> list[PluginFailure]:
        """``notify_projection`` for an event loop (see ``_anotify``)."""
        return await self._anotify("observe_projection", {"projection": projection, "request": request})

    async def anotify_model_call(self, call: ModelCall, request: ProjectionRequest) -> list[PluginFailure]:
        """``notify_model_call`` for an event loop (see ``_anotify``)."""
        return await self._anotify("observe_model_call", {"call": call, "request": request})

    def notify_stable_prefix(self, prefix: StablePrefix) -> list[PluginFailure]:
        """Hand a composed stable prefix to every observer."""
        return self._notify("observe_stable_prefix", {"prefix": prefix, "config": self.config})

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


def _core_version() -> str | None:
    """The installed contextplane's version: the built-in plugins are part of it."""
    try:
        return md.version("contextplane")
    except md.PackageNotFoundError:
        return None


def _protocol_problems(protocol: type) -> Callable[[object], list[str]]:
    def check(obj: object) -> list[str]:
        if isinstance(obj, protocol):
            return []
        missing = sorted(m for m in dir(protocol) if not m.startswith("_") and not hasattr(obj, m))
        return [f"missing {', '.join(missing)}" if missing else "its methods do not match"]

    return check


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
