"""``contextplane store status`` only inspects (issue 23): an empty database gets no schema."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from contextplane.cli import main

from .helpers import url_for


def schemas(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {str(r[0]) for r in conn.execute("SELECT nspname FROM pg_namespace")}


def status(url: str, schema: str) -> dict:
    res = CliRunner().invoke(main, ["store", "status", url, "--schema", schema])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture
def empty_database(pg_url: str) -> Iterator[tuple[str, str]]:
    """A database of its own and a role that may connect but create nothing."""
    db = f"d_{uuid.uuid4().hex[:10]}"
    role = f"r_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
        conn.execute(f"CREATE ROLE {role} LOGIN")
    yield db, role
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        conn.execute(f"DROP ROLE IF EXISTS {role}")


def test_status_of_an_empty_database_writes_nothing(pg_url: str, empty_database: tuple[str, str]) -> None:
    db, role = empty_database
    owner = url_for(pg_url, database=db)
    before = schemas(owner)
    for url in (owner, url_for(pg_url, user=role, database=db)):
        out = status(url, "contextplane")
        assert out["schema_version"] is None and out["note"].startswith("no schema yet: run `contextplane store init")
        assert out["chunks"] == 0
        assert schemas(owner) == before  # inspecting created nothing
    res = CliRunner().invoke(main, ["store", "init", owner, "--schema", "contextplane"])
    assert res.exit_code == 0, res.output
    out = status(owner, "contextplane")
    assert out["schema_version"] == 8 and "note" not in out and out["chunks"] == 0


def test_offset_and_count_on_postgres(pg_backend_factory: Any) -> None:
    from tests.store.test_list_offset import check_offsets

    store = pg_backend_factory().memories
    store.add_chunks([{"content": f"row {i}", "memory_kind": ("fact", "note")[i % 2]} for i in range(30)])
    check_offsets(store)
