"""Choosing the PostgreSQL backend by configuration: ``[store] backend = "postgres"`` with
``url`` or ``$CONTEXTPLANE_DATABASE_URL``; never a silent fall-back to a local file; a plugin
named before it can still choose another backend (the one-winner ``backend`` hook)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextplane import PluginHost, hookimpl, open_backend
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import load_config, structure
from contextplane.errors import StoreError
from contextplane.testing.memory import InMemoryBackend
from contextplane_postgres import PostgresBackend


def host_for(settings: dict[str, Any]) -> PluginHost:
    return PluginHost.from_entry_points(structure(settings))


def test_the_toml_keys_select_postgres(
    tmp_path: Path, pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "contextplane.toml").write_text(
        f'[store]\nbackend = "postgres"\nurl = "{pg_url}"\n\n[plugin.postgres]\nschema = "{pg_schema}"\n'
    )
    monkeypatch.chdir(tmp_path)
    backend = open_backend(PluginHost.from_entry_points(load_config()))
    try:
        assert isinstance(backend, PostgresBackend) and backend.db.schema == pg_schema
        cid = backend.memories.add_chunk("kiwi", source_type="operator")
        assert backend.memories.get(cid) is not None
    finally:
        backend.close()
    assert not (tmp_path / "memory.sqlite3").exists()


def test_the_url_may_come_from_the_environment(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONTEXTPLANE_STORE__BACKEND", "postgres")
    monkeypatch.setenv("CONTEXTPLANE_DATABASE_URL", pg_url)
    monkeypatch.setenv("CONTEXTPLANE_PLUGIN__POSTGRES", f'{{schema = "{pg_schema}"}}')
    config = load_config()
    assert config.store.backend == "postgres" and config.store.url is None
    backend = open_backend(PluginHost.from_entry_points(config))
    try:
        assert isinstance(backend, PostgresBackend) and backend.db.schema == pg_schema
    finally:
        backend.close()


def test_no_url_is_an_error_not_a_local_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXTPLANE_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError) as err:
        open_backend(host_for({"store": {"backend": "postgres"}}))
    text = str(err.value)
    assert text.startswith("store.backend = 'postgres', but no plugin offered that backend: ConfigError: ")
    assert "needs a connection URL: set store.url" in text and "$CONTEXTPLANE_DATABASE_URL" in text
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_backend_name_is_an_error() -> None:
    with pytest.raises(
        StoreError, match=r"store.backend = 'mysql', but no plugin offered that backend; is the plugin"
    ):
        open_backend(host_for({"store": {"backend": "mysql"}}))


def test_the_default_is_still_the_embedded_file(tmp_path: Path) -> None:
    backend = open_backend(host_for({"store": {"path": str(tmp_path / "m.sqlite3")}}))
    try:
        assert isinstance(backend, SQLiteBackend)
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"schem": "x"}, "unknown key plugin.postgres.schem: remove it or check its spelling"),
        (
            {"pool_max_size": 0},
            "invalid value for plugin.postgres.pool_max_size: expected a whole number >= 1, got 0",
        ),
        ({"schema": "Bad-Name"}, "schema: 'Bad-Name' is not a plain lowercase identifier"),
        (
            {"embedder": "no_such_module:make"},
            "invalid value for plugin.postgres.embedder: 'no_such_module:make'",
        ),
    ],
)
def test_bad_plugin_settings_name_the_key(pg_url: str, settings: dict[str, Any], message: str) -> None:
    with pytest.raises(StoreError) as err:
        open_backend(
            host_for({"store": {"backend": "postgres", "url": pg_url}, "plugin": {"postgres": settings}})
        )
    assert message in str(err.value)


def make_embedder(config: Any) -> Any:
    """An embedder factory named by ``[plugin.postgres] embedder``."""
    from tests.postgres.helpers import HashEmbedder

    return HashEmbedder(32)


def test_an_embedder_factory_named_in_the_settings_gives_hybrid_search(pg_url: str, pg_schema: str) -> None:
    host = host_for(
        {
            "store": {"backend": "postgres", "url": pg_url},
            "plugin": {"postgres": {"schema": pg_schema, "embedder": f"{__name__}:make_embedder"}},
        }
    )
    backend = open_backend(host)
    try:
        assert backend.memories.vectors_enabled
        cid = backend.memories.add_chunk("kiwi orchard", source_type="operator")
        assert backend.memories.vector_neighbours("orchard", 1) == [cid]
    finally:
        backend.close()


def test_a_plugin_asked_first_may_still_choose_another_backend(pg_url: str) -> None:
    chosen = InMemoryBackend()

    class Other:
        plugin_name = "0_other"  # asked before "postgres" (name order)

        @hookimpl
        def backend(self, config: Any) -> Any:
            return chosen

    host = host_for({"store": {"backend": "postgres", "url": pg_url}})
    host.register(Other(), "0_other")
    assert open_backend(host) is chosen
