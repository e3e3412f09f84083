"""Shared fixtures: every test starts with a clean plugin host, fresh warn-once state and an
empty home directory of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contextplane.notices import reset_notices
from contextplane.plugins import reset_host
from tests.pg import pg_backend_factory, pg_schema, pg_server, pg_url, restartable_pg_server

__all__ = ["pg_backend_factory", "pg_schema", "pg_server", "pg_url", "restartable_pg_server"]


@pytest.fixture(autouse=True)
def _clean_state(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    monkeypatch.delenv("CONTEXTPLANE_PLUGINS", raising=False)
    monkeypatch.delenv("CONTEXTPLANE_CONFIG", raising=False)
    monkeypatch.delenv("CONTEXTPLANE_DB", raising=False)
    # No test (nor a subprocess it starts) may read or write the user's own store or config:
    # the user data and config directories are a fresh, empty directory per test.
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    reset_notices()
    reset_host()
    yield
    reset_host()
