"""The knowledge store: the protocol every store implements and the embedded SQLite store.

``open_store`` is the convenience entry point; ``default_db_path`` says where the memory
lives when no path is given (``$CONTEXTPLANE_DB``, else the user data directory).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from contextplane.embedding import Embedder
from contextplane.store.protocol import ExactRestore, KnowledgeStore, MemoryHistory, SearchHit
from contextplane.store.sqlite import SQLiteKnowledgeStore, VectorSearchUnavailableWarning

__all__ = [
    "ExactRestore",
    "KnowledgeStore",
    "MemoryHistory",
    "SQLiteKnowledgeStore",
    "SearchHit",
    "VectorSearchUnavailableWarning",
    "default_db_path",
    "open_store",
]

DB_ENV_VAR = "CONTEXTPLANE_DB"


def _user_data_dir() -> Path:
    """The platform's per-user data directory (XDG on Linux), without a third-party dependency."""
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")


def default_db_path() -> Path:
    """``$CONTEXTPLANE_DB`` if set, else ``<user data dir>/contextplane/memory.sqlite3``."""
    override = os.environ.get(DB_ENV_VAR)
    if override:
        return Path(override).expanduser()
    return _user_data_dir() / "contextplane" / "memory.sqlite3"


def open_store(
    path: str | os.PathLike[str] | None = None,
    *,
    embedder: Embedder | None = None,
    create: bool = True,
) -> SQLiteKnowledgeStore:
    """Open (and migrate, if needed) the embedded store at ``path`` (default: ``default_db_path()``)."""
    return SQLiteKnowledgeStore(default_db_path() if path is None else path, embedder=embedder, create=create)
