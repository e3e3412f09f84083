"""The ``backend`` hook: ``[store] backend = "postgres"`` selects this backend.

Registered through the ``contextplane`` entry-point group. The hook imports nothing of
psycopg until the configuration asks for PostgreSQL, so an installation without the
``postgres`` extra loads this plugin at no cost and without an error.
"""

from __future__ import annotations

from typing import Any

from contextplane import hookimpl
from contextplane.config import Config
from contextplane.errors import StoreError

NAME = "postgres"


@hookimpl
def backend(config: Config, embedder: Any) -> Any:
    if config.store.backend != NAME:
        return None
    try:
        from contextplane_postgres.backend import PostgresBackend
    except ImportError as exc:
        raise StoreError(
            f'store.backend = "postgres" needs the postgres extra ({exc}); install it with '
            "pip install 'contextplane[postgres]'"
        ) from None
    return PostgresBackend.from_config(config, embedder=embedder)
