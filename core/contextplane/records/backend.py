"""The backend: one object that holds all four records of a deployment.

Why one object rather than four hooks: a turn's records must land together (the injection
row, the snapshot and the digest source of one deployment), and a runtime should choose where
they live once. The embedded SQLite backend (``contextplane.backends.sqlite``) keeps them in
one file; a plugin offers another through the one-winner ``backend`` hook.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, TypeGuard, cast

from contextplane.records.injections import InjectionLog
from contextplane.records.protocol import Backend as Backend
from contextplane.records.snapshots import SnapshotStore
from contextplane.records.summaries import SessionSummaries
from contextplane.store.protocol import KnowledgeStore

_PARTS: tuple[tuple[str, type], ...] = (
    ("memories", KnowledgeStore),
    ("summaries", SessionSummaries),
    ("injections", InjectionLog),
    ("snapshots", SnapshotStore),
)


def check_backend(obj: object) -> list[str]:
    """What keeps ``obj`` from being a backend, as sentences; empty when it is one."""
    problems = []
    for attr in ("name", "trajectory", "close"):
        if not hasattr(obj, attr):
            problems.append(f"it has no {attr!r}")
    for attr, proto in _PARTS:
        part = getattr(obj, attr, None)
        if part is None:
            problems.append(f"it has no {attr!r}")
        elif not isinstance(part, proto):
            missing = sorted(m for m in dir(proto) if not m.startswith("_") and not hasattr(part, m))
            problems.append(
                f"its {attr!r} ({type(part).__name__}) is not a {proto.__name__}"
                + (f": missing {', '.join(missing)}" if missing else "")
            )
    return problems


_owners: weakref.WeakKeyDictionary[Any, Backend] = weakref.WeakKeyDictionary()
#: Stores that can be neither weakly referenced nor hashed, with their backends, found by
#: identity (``is``), not by ``id()``: a process holds a handful of backends at most.
_unhashable: list[tuple[Any, Backend]] = []
_lock = threading.Lock()


def register_backend(backend: Backend) -> None:
    """Remember which backend ``backend.memories`` belongs to, so a caller that passes only the
    memory store (the ADR D8 signature) still gets its injection log and digest.

    A store that declares a ``backend`` attribute (the embedded and in-memory stores do) gets
    it set; any other store is remembered here for the life of the process (backends are
    long-lived, so keeping the pair is cheaper than asking every store author for a slot)."""
    store: Any = backend.memories  # its ``backend`` slot is not part of the protocol
    try:
        declared = object.__getattribute__(store, "backend")
    except AttributeError:
        declared = False
    if declared is None:
        store.backend = backend
        return
    with _lock:
        try:
            _owners[store] = backend
        except TypeError:  # not weak-referenceable or unhashable: keep by identity
            _unhashable[:] = [pair for pair in _unhashable if pair[0] is not store]
            _unhashable.append((store, backend))


def is_backend(obj: object) -> TypeGuard[Backend]:
    """True when ``obj``'s class has the backend's parts. Asked of the class, not the instance,
    so a proxy's ``__getattr__`` (a spy, a lazy wrapper) is never triggered by the question."""
    kind = type(obj)
    return all(hasattr(kind, attr) for attr, _ in _PARTS)


def backend_of(store: object) -> Backend | None:
    """The backend ``store`` belongs to: ``store`` itself if it is one, the store's own
    ``backend`` attribute, else the one that registered it; None when it belongs to none.

    Only plain attribute lookups are made (never a proxy's ``__getattr__``): composition asks
    this of every store it is handed, and must not read a store that no section reads."""
    if store is None:
        return None
    if is_backend(store):
        return store
    try:
        own = object.__getattribute__(store, "backend")
    except AttributeError:
        own = None
    if own is not None:
        return cast(Backend, own)
    with _lock:
        try:
            found = _owners.get(store)
        except TypeError:
            found = None
        if found is not None:
            return found
        return next((owner for held, owner in _unhashable if held is store), None)
