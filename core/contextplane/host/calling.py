"""Calling plugins: the host's typed facade over the hook calls, with every failure isolated.

Why a facade: ``pm.hook.x(...)`` returns ``Any`` and cannot tell us which plugin produced
what. The host calls each implementation itself, in contextplane's order (plugin name), so
every section is attributed to its plugin and every failure to its source. A failing plugin
does not take down a turn: its failure is recorded (``failures``) and logged once with its
traceback, and the next plugin is asked; strict mode (``[plugins] strict``) raises instead.

``HookCalls`` holds the pluggy manager and what the calls cache; ``PluginHost``
(``contextplane.host.loading``) adds what fills it: the built-ins and the entry points.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar, cast

import pluggy

from contextplane import authority, hookspecs
from contextplane.config import Config
from contextplane.embedding import CONFIGURED, Embedder
from contextplane.errors import ConfigError, PluginLoadError, SectionError, StoreError
from contextplane.host.tracing import _describe_exc, call_traced, tracing_enabled, versions_of
from contextplane.notices import log_failure, log_once
from contextplane.records.backend import Backend, check_backend
from contextplane.records.plans import Writes, awrite, is_sans_io, write
from contextplane.request import ProjectionRequest
from contextplane.sections import ContextSection, PromptSection
from contextplane.store.protocol import KnowledgeStore
from contextplane.types import ModelCall, PluginFailure, ProjectedContext, Registered, StablePrefix

#: The host's logger (its name predates the split: log configurations name it).
log = logging.getLogger("contextplane.plugins")

T = TypeVar("T")


class SectionOrder(tuple[Registered[ContextSection], ...]):
    """The context sections in draft order for one registration state, and what composition
    works out from that state once (``plans``: the envelope check, the drafting plan per mode).

    Why the memo rides on the tuple: it is made anew whenever a plugin is registered or removed,
    so whatever was derived from the old state goes with it, and no process-wide table keyed by
    the tuple's identity is needed to tell the states apart. The host never reads ``plans``; the
    engine owns its content."""

    plans: dict[Hashable, Any]

    @classmethod
    def of(cls, sections: Iterable[Registered[ContextSection]]) -> SectionOrder:
        order = cls(sorted(sections, key=lambda r: (r.section.priority, r.section.name)))
        order.plans = {}
        return order


class HookCalls:
    """One pluggy ``PluginManager``, the failures of the plugins it holds, and the typed calls."""

    def __init__(self, config: Config | None = None, *, strict: bool | None = None) -> None:
        self.config = config if config is not None else Config()
        self.strict = self.config.plugins.strict if strict is None else strict
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.failures: list[PluginFailure] = []
        #: Each registered plugin's (distribution, version).
        self._meta: dict[str, tuple[str | None, str | None]] = {}
        self._prompt: list[Registered[PromptSection]] | None = None
        self._prefix: list[Registered[PromptSection]] | None = None
        self._context: list[Registered[ContextSection]] | None = None
        self._ordered: SectionOrder | None = None
        self._versions: Mapping[str, str | None] | None = None
        self._lock = threading.Lock()
        #: The configured embedder (or the error saying why there is none), made once.
        self._embedder: tuple[Embedder | ConfigError | None] | None = None
        self._embedder_lock = threading.Lock()
        self.trace = tracing_enabled()

    def _forget(self) -> None:
        """Drop what the calls cached: a plugin was registered or removed."""
        self._prompt = None
        self._prefix = None
        self._context = None
        self._ordered = None
        self._versions = None
        self._embedder = None

    def plugin_versions(self) -> Mapping[str, str | None]:
        """``{plugin name: version}`` of every registered plugin (None when it came from no
        distribution), cached until a plugin is registered or removed: what a recorded turn
        keeps so a replay can say a plugin changed. (Here, not with the loading: a turn reads
        it, and the cache is the calls'.)"""
        found = self._versions
        if found is None:
            found = self._versions = versions_of((name for name, _ in self.pm.list_name_plugin()), self._meta)
        return found

    # --- isolation ----------------------------------------------------------------------

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

    # --- the typed facade ---------------------------------------------------------------

    def _impls(self, hook_name: str) -> list[pluggy.HookImpl]:
        caller = getattr(self.pm.hook, hook_name)
        # Registration order is not an ordering promise; sort by plugin name for determinism.
        return sorted(caller.get_hookimpls(), key=lambda i: i.plugin_name)

    def _call(self, impl: pluggy.HookImpl, kwargs: Mapping[str, Any]) -> Any:
        args = {k: kwargs[k] for k in impl.argnames if k in kwargs}
        if not self.trace:
            return impl.function(**args)
        return call_traced(impl, args)

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

    def ordered_context_sections(self) -> SectionOrder:
        """The context sections in draft order: priority, then name (cached; the same tuple
        object until a plugin is registered or removed, carrying the engine's memos for that
        state in its ``plans``)."""
        with self._lock:
            if self._context is None:
                self._context = self._collect("register_context_sections", ContextSection)
            if self._ordered is None:
                self._ordered = SectionOrder.of(self._context)
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
                told = self._call(impl, kwargs)
                if isinstance(told, Writes):  # a sans-IO observer's rows: written here
                    write(told.parts, told.plan)
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
        """``_notify`` for an event loop, in the same order with the same isolation. A sans-IO
        observer (``contextplane.records.plans.sans_io``: the records observer) is called on the
        loop and the rows it returns are written by ``awrite`` (a backend's async record methods
        awaited, the rest in one worker thread); an observer whose plugin has an async twin
        (``a<hook name>``, a coroutine function taking the same arguments) is awaited; the
        others are synchronous and may block, so they are called in a worker thread,
        consecutive ones in one hop."""
        failures: list[PluginFailure] = []
        waiting: list[pluggy.HookImpl] = []
        for impl in [*self._impls(hook_name), None]:
            sans = impl is not None and is_sans_io(impl.function)
            twin = None if impl is None or sans else getattr(impl.plugin, "a" + hook_name, None)
            if impl is not None and not sans and not inspect.iscoroutinefunction(twin):
                waiting.append(impl)
                continue
            if waiting:
                failures.extend(await asyncio.to_thread(self._notify, hook_name, kwargs, list(waiting)))
                waiting.clear()
            if impl is None:
                break
            try:
                if twin is not None:
                    await twin(**{k: kwargs[k] for k in impl.argnames if k in kwargs})
                else:
                    told = self._call(impl, kwargs)
                    if isinstance(told, Writes):
                        await awrite(told.parts, told.plan)
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


def _protocol_problems(protocol: type) -> Callable[[object], list[str]]:
    def check(obj: object) -> list[str]:
        if isinstance(obj, protocol):
            return []
        missing = sorted(m for m in dir(protocol) if not m.startswith("_") and not hasattr(obj, m))
        return [f"missing {', '.join(missing)}" if missing else "its methods do not match"]

    return check
