"""PostgreSQL + pgvector backend: every record of a deployment in one shared database.

Choose it with ``[store] backend = "postgres"`` and ``url`` (or ``$CONTEXTPLANE_DATABASE_URL``);
``contextplane store copy SRC DST`` moves an embedded store into it. The names below load
psycopg on first use, so ``import contextplane_postgres`` works without the ``postgres`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextplane_postgres.backend import PostgresBackend
    from contextplane_postgres.store import PostgresKnowledgeStore

__all__ = ["PostgresBackend", "PostgresKnowledgeStore"]

_WHERE = {"PostgresBackend": "backend", "PostgresKnowledgeStore": "store"}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'contextplane_postgres' has no attribute {name!r}")
    return getattr(importlib.import_module(f"contextplane_postgres.{module}"), name)
