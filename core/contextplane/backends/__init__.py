"""Backends: where a deployment's records live, and how a turn finds its backend.

``open_backend`` is what a runtime calls once: the backend a plugin offers through the
one-winner ``backend`` hook, else the embedded SQLite backend at ``store.path`` (or
``$CONTEXTPLANE_DB``, or the user data directory), whose memory store is the one a plugin
offers through ``knowledge_store`` if any. ``resolve_backend`` is what composition calls when
a caller handed it only a memory store (the ADR D8 signature).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from contextplane.embedding import CONFIGURED, Embedder
from contextplane.errors import StoreError
from contextplane.records.backend import Backend, backend_of

if TYPE_CHECKING:
    from contextplane.config import Config
    from contextplane.plugins import PluginHost

log = logging.getLogger("contextplane.backends")

_around_lock = threading.Lock()


def store_path(config: Config, path: str | os.PathLike[str] | None = None) -> Path:
    """Where the embedded store lives: ``path`` when given, else ``store.path`` (relative to the
    config file), else ``$CONTEXTPLANE_DB``, else the user data directory. The one rule every
    runtime and every command follows."""
    from contextplane.store import default_db_path

    if path is not None:
        return Path(path)
    return config.resolve_path(config.store.path) if config.store.path else default_db_path()


#: How the plugin host words a backend hook that raised ``StoreError``: the backend's own reason.
_OPEN_FAILED = f"{StoreError.__name__}: "


def open_backend(
    host: PluginHost,
    path: str | os.PathLike[str] | None = None,
    *,
    read_only: bool = False,
    create: bool = True,
    embedder: Embedder | None = CONFIGURED,
) -> Backend:
    """The plugin-chosen backend, else the embedded SQLite one (``path`` forces SQLite there).
    ``read_only`` opens the embedded one for inspection: it must exist and nothing changes;
    ``create=False`` opens it for writing but refuses a path with no store (a typo).
    When ``store.backend`` names another backend and no plugin offers it, raise instead.
    Its memories embed with the configured embedder (``[embedder]``, the ``embedder`` hook);
    ``embedder=None`` opens it for full text only (``memory reindex --rebuild`` then hands the
    store the new embedder)."""
    if embedder is CONFIGURED:
        embedder = host.embedder()
    if path is None:
        seen = len(host.failures)
        chosen = host.backend(embedder=embedder)
        if chosen is not None:
            return chosen
        wanted = host.config.store.backend
        if wanted != "sqlite":
            # Never fall back to a local file when the operator named a server backend: the
            # records would silently land on one machine.
            why = [f.error for f in host.failures[seen:] if f.stage == "backend"]
            if why and why[-1].startswith(_OPEN_FAILED):
                # The plugin is there and took the backend on, but could not open it (a server
                # that cannot be reached, a bad URL): that reason is the whole story.
                raise StoreError(
                    f"{why[-1][len(_OPEN_FAILED) :]} (store.backend = {wanted!r}, in {host.config.source})"
                )
            where = f"(in {host.config.source})"
            raise StoreError(
                f"store.backend = {wanted!r}, but no plugin offered that backend"
                + (f": {why[-1]}" if why else "; is the plugin that provides it installed?")
                # the plugin's own message may name the configuration already: once is enough
                + ("" if why and why[-1].endswith(where) else f" {where}")
            )
    from contextplane.backends.sqlite import SQLiteBackend

    cfg = host.config
    target = store_path(cfg, path)
    if not create and not target.exists():
        from contextplane.store.connection import no_store

        raise no_store(target)
    memories = host.knowledge_store() if path is None else None
    if memories is not None:
        return SQLiteBackend(target, config=cfg, memories=memories, read_only=read_only)
    return SQLiteBackend(target, config=cfg, embedder=embedder, read_only=read_only)


def resolve_backend(store: object, config: Config) -> Backend | None:
    """The backend ``store`` belongs to; an embedded SQLite store that was opened on its own
    gets one around it (its records in its own file). None for a store with no backend."""
    if store is None:
        return None
    found = backend_of(store)
    if found is not None:
        return found
    from contextplane.backends.sqlite import SQLiteBackend
    from contextplane.store.sqlite import SQLiteKnowledgeStore

    if isinstance(store, SQLiteKnowledgeStore):
        if store.path == ":memory:":
            return None
        with _around_lock:
            found = backend_of(store)
            return found if found is not None else SQLiteBackend.around(store, config)
    return None
