"""The default runtime of a memory store: what ADR D8's ``compose_projected_context`` runs on.

The D8 signature is handed a store (or a backend) on every call, not a ``Runtime``. Composing
each call from scratch resolved the store's backend again every turn (``_resolve`` ->
``resolve_backend`` -> ``backend_of``, and ``SQLiteBackend.around`` for a bare embedded store).
Here the store carries its runtime instead: the first call on a store wires a ``Runtime`` for
it (the backend resolved once) and hangs it on the store object itself, so a later call finds
it by reading an attribute of the store it was handed. No process-wide registry is consulted,
nothing is keyed by ``id()``, and the runtime lives and dies with its store.

A store carries a few runtimes at most (``KEEP``): one per host, configuration, strict mode
and backend it is composed with, each matched by identity; two stores never share one, even
when they compare equal (a copied store finds the runtime is not its own and wires another). A
store that cannot carry an attribute (``__slots__`` with no ``__dict__``) is composed as
before, its backend resolved on every call. A call with neither a store nor a backend has
nothing to resolve: it composes directly (``engine.driver.compose``).
``acompose_projected_context`` is the same on an event loop, on the same runtime.
"""

from __future__ import annotations

import threading
from typing import Any, Final

import attrs

from contextplane.config import Config
from contextplane.engine.assembly import d8_request
from contextplane.engine.async_driver import acompose
from contextplane.engine.driver import compose
from contextplane.host import PluginHost
from contextplane.request import FrozenDict, ProjectionRequest
from contextplane.runtime import Runtime
from contextplane.signatures import parameters_of
from contextplane.types import ProjectedContext

__all__ = [
    "ATTRIBUTE",
    "KEEP",
    "acompose_projected_context",
    "compose_projected_context",
    "d8_turn",
    "default_runtime",
]

#: The attribute a store carries its default runtimes in: a tuple of (backend, host, config,
#: strict, runtime), newest last. Replaced, never mutated, so a shallow copy of a store shares
#: nothing it will change.
ATTRIBUTE: Final = "_contextplane_runtimes"
#: How many default runtimes one store keeps (the oldest is dropped).
KEEP: Final = 4

_lock = threading.Lock()
#: The state and extra of a request given none (frozen, so every such request can share it).
_NOTHING: Final = FrozenDict()


def default_runtime(
    store: object, backend: Any, host: PluginHost, config: Config, strict: bool | None
) -> Runtime | None:
    """The runtime ``store`` carries for this host, configuration, strict mode and backend,
    wired on first use; None when there is nothing to key it on (no store and no backend) or
    the store cannot carry an attribute."""
    key = store if store is not None else backend
    if key is None:
        return None
    try:  # its own __dict__, never one a proxy's __getattr__ hands over
        held: dict[str, Any] = object.__getattribute__(key, "__dict__")
    except AttributeError:  # no __dict__: nowhere to carry it
        return None
    mine = _carried(held, key, backend, host, config, strict)
    if mine is not None:
        return mine
    with _lock:
        mine = _carried(held, key, backend, host, config, strict)
        if mine is not None:
            return mine
        mine = Runtime(host=host, config=config, backend=backend, knowledge_store=key, strict=strict)  # type: ignore[arg-type]
        mine.wiring()  # the one resolution, here
        held[ATTRIBUTE] = (*held.get(ATTRIBUTE, ()), (backend, host, config, strict, mine))[-KEEP:]
        return mine


def _carried(
    held: dict[str, Any], key: object, backend: Any, host: PluginHost, config: Config, strict: bool | None
) -> Runtime | None:
    """The runtime among those ``key`` carries that was wired for exactly these, by identity
    (a copied store carries its original's: not its own)."""
    entries: tuple[tuple[Any, PluginHost, Config, bool | None, Runtime], ...] = held.get(ATTRIBUTE, ())
    for given, h, c, s, runtime in entries:
        if given is backend and h is host and c is config and s == strict and runtime.given_store is key:
            return runtime
    return None


@parameters_of(d8_request)
def d8_turn(*args: Any, **kwargs: Any) -> tuple[Runtime | None, ProjectionRequest, PluginHost, bool | None]:
    """The request ADR D8's arguments describe (``engine.assembly.d8_request``), the store's
    default runtime to compose it on (None: no store or backend to key one on, or a store that
    cannot carry it; the request then names the store and backend as given, and the
    composition resolves them), the host and the strict setting. On a runtime the request
    names no store or backend: the runtime wires its own (``Runtime._wired``)."""
    request, host, strict = d8_request(*args, **kwargs)
    runtime = default_runtime(request.knowledge_store, request.backend, host, request.config, strict)
    if runtime is None:
        return None, request, host, strict
    return runtime, attrs.evolve(request, knowledge_store=None, backend=None), host, strict


@parameters_of(d8_request)
def compose_projected_context(*args: Any, **kwargs: Any) -> ProjectedContext:
    """Compose the projected context for one request: the ADR D8 signature, on the default
    runtime of ``knowledge_store`` (see the module docstring).

    ``knowledge_store`` may be a memory store or a whole backend; a store's own backend (the
    embedded SQLite store's file, say) receives the records unless ``backend`` names another.
    ``only_sections`` restricts composition to a declared subset (a subagent's contract).
    """
    runtime, request, host, strict = d8_turn(*args, **kwargs)
    if runtime is None:
        return compose(request, host=host, strict=strict)
    return runtime.compose(request).projection


@parameters_of(d8_request)
async def acompose_projected_context(*args: Any, **kwargs: Any) -> ProjectedContext:
    """``compose_projected_context`` for an event loop: the same arguments, the same projection,
    on the same default runtime of the store."""
    runtime, request, host, strict = d8_turn(*args, **kwargs)
    if runtime is None:
        return await acompose(request, host=host, strict=strict)
    return (await runtime.acompose(request)).projection
