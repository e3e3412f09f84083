"""Shared fixtures: every test starts with a clean plugin host and fresh warn-once state."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contextplane.notices import reset_notices
from contextplane.plugins import reset_host
from tests.pg import pg_backend_factory, pg_schema, pg_server, pg_url

__all__ = ["pg_backend_factory", "pg_schema", "pg_server", "pg_url"]


@pytest.fixture(autouse=True)
def _clean_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("CONTEXTPLANE_PLUGINS", raising=False)
    monkeypatch.delenv("CONTEXTPLANE_CONFIG", raising=False)
    reset_notices()
    reset_host()
    yield
    reset_host()
