"""The embedded defaults a runtime gets when no plugin chooses otherwise.

The knowledge store is a one-winner hook; when no plugin offers one, the embedded SQLite store
at ``store.path`` (or ``$CONTEXTPLANE_DB``, or the user data directory) is opened, with the
embedder a plugin offers, if any.
"""

from __future__ import annotations

import os
from typing import Any

from contextplane.plugins import PluginHost


def open_knowledge_store(host: PluginHost, path: str | os.PathLike[str] | None = None) -> Any:
    """The plugin-chosen store, else the embedded SQLite store."""
    if path is None:
        chosen = host.knowledge_store()
        if chosen is not None:
            return chosen
    from contextplane.store import SQLiteKnowledgeStore, default_db_path

    cfg = host.config
    target = (
        path
        if path is not None
        else cfg.resolve_path(cfg.store.path)
        if cfg.store.path
        else default_db_path()
    )
    return SQLiteKnowledgeStore(target, embedder=host.embedder(), vector_probes=cfg.store.vector_probes)
