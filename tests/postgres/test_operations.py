"""Operating the PostgreSQL backend: clear errors (server down, bad URL, no database or role,
missing pgvector, missing rights, statement and lock timeouts), never a password in a message
or a log, and the least privileges the README documents, proven sufficient."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from contextplane.cli import main
from contextplane.config import structure
from contextplane.errors import ConfigError, StoreError
from contextplane_postgres import PostgresBackend
from contextplane_postgres.backend import settings
from contextplane_postgres.url import redact
from tests.pg import drop_schema

from .helpers import HashEmbedder, url_for

SECRET = "s3cr3t-Pa55"


def test_redact_hides_every_form_of_password() -> None:
    assert (
        redact(f"postgresql://app:{SECRET}@db.internal:5432/cp") == "postgresql://app:***@db.internal:5432/cp"
    )
    assert redact(f"postgresql://db/cp?user=app&password={SECRET}&sslmode=require") == (
        "postgresql://db/cp?user=app&password=***&sslmode=require"
    )
    assert (
        redact(f"host=db user=app password={SECRET} dbname=cp") == "host=db user=app password=*** dbname=cp"
    )
    assert redact(f"host=db password='{SECRET} x' dbname=cp") == "host=db password=*** dbname=cp"
    assert redact("postgresql://app@db/cp") == "postgresql://app@db/cp"


def test_server_down_is_one_clear_error_without_the_password(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StoreError) as err:
        PostgresBackend(f"postgresql://app:{SECRET}@127.0.0.1:9/cp", connect_timeout_s=2)
    text = str(err.value)
    assert text.startswith("cannot connect to the PostgreSQL server at postgresql://app:***@127.0.0.1:9/cp: ")
    assert text.lower().count("is the server running") == 1, text  # libpq asks it; not twice (issue 23)
    assert SECRET not in text and SECRET not in caplog.text
    assert err.value.__cause__ is None and err.value.__suppress_context__  # no psycopg traceback chained


def test_a_socket_directory_with_no_server(tmp_path: Any) -> None:
    with pytest.raises(
        StoreError, match=r"cannot connect to the PostgreSQL server at postgresql://postgres@/cp\?host="
    ):
        PostgresBackend(f"postgresql://postgres@/cp?host={tmp_path}")


@pytest.mark.parametrize("bad", ["not a url at all", "postgresql://host:notaport/db", "postgresql://[::1/db"])
def test_a_malformed_url_names_the_expected_form(bad: str) -> None:
    with pytest.raises(StoreError) as err:
        PostgresBackend(bad, connect_timeout_s=2)
    assert "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE" in str(err.value) or "cannot connect" in str(
        err.value
    )
    assert bad.split("//")[-1][:4] in str(err.value)


def test_no_such_database_or_role(pg_url: str) -> None:
    with pytest.raises(StoreError, match=r'database "nosuchdb" does not exist.*create the database'):
        PostgresBackend(url_for(pg_url, database="nosuchdb"))
    with pytest.raises(StoreError, match=r'role "nosuchrole" does not exist.*create the role'):
        PostgresBackend(url_for(pg_url, user="nosuchrole", password=SECRET))


def test_the_password_never_reaches_a_name_repr_or_log(
    pg_url: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = url_for(pg_url, password=SECRET)  # the test server trusts local connections: any password works
    backend = PostgresBackend(url, schema=pg_schema)
    try:
        backend.memories.add_chunk("kiwi", source_type="operator")
        shown = [backend.name, repr(backend), repr(backend.memories), backend.memories.name]
        assert all(SECRET not in s and "postgres:***@" in s for s in shown), shown
        with pytest.raises(StoreError) as err:
            backend.memories.set_review_state("999", "confirmed")
        assert SECRET not in str(err.value) and "no memory with id '999'" in str(err.value)
    finally:
        backend.close()
    assert SECRET not in caplog.text


@pytest.fixture
def limited_role(pg_url: str) -> Iterator[tuple[str, str]]:
    """A database of its own (no pgvector in it) and a role that owns nothing there."""
    db = f"d_{uuid.uuid4().hex[:10]}"
    role = f"r_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
        conn.execute(f"CREATE ROLE {role} LOGIN")
    yield db, role
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        conn.execute(f"DROP ROLE IF EXISTS {role}")


def _grant_least_privileges(url: str, schema: str, role: str) -> None:
    """The README's "Least privileges" grants, verbatim."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
        conn.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role}")
        conn.execute(f"REVOKE UPDATE, DELETE, TRUNCATE ON {schema}.chunk_history FROM {role}")


def test_a_role_without_rights_is_told_what_to_grant(pg_url: str, limited_role: tuple[str, str]) -> None:
    db, role = limited_role
    owner = url_for(pg_url, database=db)
    PostgresBackend(owner, schema="cp").close()  # the owner creates the schema
    with pytest.raises(StoreError) as err:
        PostgresBackend(url_for(pg_url, user=role, database=db), schema="cp")
    text = str(err.value)
    assert "the database role lacks a right the backend needs (no USAGE on schema cp)" in text
    assert "'Least privileges'" in text
    # ... and may not create one either:
    with pytest.raises(StoreError, match=r"lacks a right.*permission denied for database"):
        PostgresBackend(url_for(pg_url, user=role, database=db), schema="mine")


def test_the_documented_least_privileges_are_enough_for_every_read_and_write(
    pg_url: str, limited_role: tuple[str, str]
) -> None:
    db, role = limited_role
    owner_url = url_for(pg_url, database=db)
    PostgresBackend(owner_url, schema="cp").close()
    _grant_least_privileges(owner_url, "cp", role)
    backend = PostgresBackend(url_for(pg_url, user=role, database=db), schema="cp")
    try:
        m = backend.memories
        a = m.add_chunk("kiwi deploy window Tuesday", "hot", "operator")
        b = m.supersede(a, "kiwi deploy window Thursday")
        m.set_review_state(b, "confirmed")
        m.set_expires_at(b, "2031-01-01T00:00:00Z")
        gone = m.add_chunk("kiwi wrong", source_type="extracted")
        m.invalidate_chunk(gone, reason="wrong")
        assert m.purge() == 1
        with m.consistent_read() as view:
            assert [h.chunk.id for h in view.search("kiwi deploy")] == [b]
            position = view.history_position()
        assert [e.event for e in m.history(gone)] == ["created", "invalidated", "purged"]
        m.set_review_state(b, "rejected")
        with m.as_of(position) as past:  # temporary objects in a rolled-back transaction
            assert [h.chunk.id for h in past.search("kiwi deploy")] == [b]
        assert m.search("kiwi deploy") == []
        with pytest.raises(StoreError, match="permission denied for table"), backend.db.connection() as conn:
            conn.execute("UPDATE chunk_history SET actor = 'me'")
        backend.summaries.add("s1", "kiwi planning")
        assert backend.summaries.relevant("kiwi", 3)[0].session_id == "s1"
        from contextplane.records import InjectionRow

        backend.injections.record(InjectionRow("s1", 0, "now", "native", 1, 4, None, {"r": [b]}))
        assert backend.injections.rows("s1")[0].delivered == {"r": [b]}
        backend.snapshots.register_prefix("h", "text", "[]")
        assert backend.snapshots.prefix_text("h") == "text"
        assert backend.trajectory is not None and backend.trajectory.append("s1", "projection", {}) == "1"
    finally:
        backend.close()


def test_missing_pgvector_says_how_to_install_it(pg_url: str, limited_role: tuple[str, str]) -> None:
    db, role = limited_role
    owner_url = url_for(pg_url, database=db)
    PostgresBackend(owner_url, schema="cp").close()  # no embedder: pgvector is not needed
    _grant_least_privileges(owner_url, "cp", role)
    with pytest.raises(StoreError) as err:
        PostgresBackend(url_for(pg_url, user=role, database=db), schema="cp", embedder=HashEmbedder())
    text = str(err.value)
    assert "the pgvector extension ('vector') is not installed in this database" in text
    assert "run CREATE EXTENSION vector as a superuser or the database owner" in text
    # The owner may create it; then the limited role gets hybrid search.
    PostgresBackend(owner_url, schema="cp", embedder=HashEmbedder()).close()
    backend = PostgresBackend(url_for(pg_url, user=role, database=db), schema="cp", embedder=HashEmbedder())
    try:
        cid = backend.memories.add_chunk("kiwi orchard", source_type="operator")
        assert [h.chunk.id for h in backend.memories.search("orchard kiwi")] == [cid]
    finally:
        backend.close()


def test_a_statement_past_the_timeout_is_cancelled_with_a_clear_error(pg_url: str, pg_schema: str) -> None:
    backend = PostgresBackend(pg_url, schema=pg_schema, statement_timeout_ms=300, lock_timeout_ms=60_000)
    cid = backend.memories.add_chunk("kiwi", source_type="operator")
    holder = psycopg.connect(pg_url, autocommit=False, options=f"-c search_path={pg_schema}")
    try:
        holder.execute("SELECT 1 FROM chunks WHERE id = %s FOR UPDATE", (int(cid),))
        with pytest.raises(StoreError) as err:
            backend.memories.set_review_state(cid, "rejected")
        assert "ran past the statement timeout and was cancelled" in str(err.value)
        assert "raise [plugin.postgres] statement_timeout_ms" in str(err.value)
    finally:
        holder.rollback()
        holder.close()
    assert backend.memories.set_review_state(cid, "rejected").review_state == "rejected"  # the pool recovered
    backend.close()


def test_a_lock_wait_past_the_lock_timeout_is_a_clear_error(pg_url: str, pg_schema: str) -> None:
    backend = PostgresBackend(pg_url, schema=pg_schema, lock_timeout_ms=200)
    cid = backend.memories.add_chunk("kiwi", source_type="operator")
    holder = psycopg.connect(pg_url, autocommit=False, options=f"-c search_path={pg_schema}")
    try:
        holder.execute("SELECT 1 FROM chunks WHERE id = %s FOR UPDATE", (int(cid),))
        with pytest.raises(StoreError, match="lock was not granted within the lock timeout"):
            backend.memories.supersede(cid, "kiwi two")
    finally:
        holder.rollback()
        holder.close()
    assert backend.memories.get(cid).invalidated_at is None  # the failed supersede left no trace
    assert [c.content for c in backend.memories.list_chunks()] == ["kiwi"]
    backend.close()


def test_the_command_line_shows_one_line_and_no_traceback_when_the_server_is_down(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("CONTEXTPLANE_STORE__BACKEND", "postgres")
    monkeypatch.setenv("CONTEXTPLANE_DATABASE_URL", f"postgresql://app:{SECRET}@127.0.0.1:9/cp")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["preview", "what is the deploy window?"])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and SECRET not in res.output
    lines = [line for line in res.output.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1
    # the backend's own reason, not "no plugin offered that backend" (issue 26)
    assert lines[0].startswith(
        "error: cannot connect to the PostgreSQL server at postgresql://app:***@127.0.0.1:9/cp: "
    ), lines[0]
    assert "no plugin offered" not in lines[0] and "(store.backend = 'postgres'" in lines[0]


def test_a_pool_with_every_connection_busy_fails_after_pool_timeout_s_naming_it(
    pg_backend_factory: Any,
) -> None:
    """``[plugin.postgres] pool_timeout_s`` bounds the wait for a free pooled connection (it was
    30 s, hard-coded); the server is up, so the error blames the pool, not the server."""
    backend = pg_backend_factory(pool_max_size=1, pool_timeout_s=1)
    with backend.db.connection():  # the only connection, held
        started = time.perf_counter()
        with pytest.raises(StoreError, match=r"no pooled connection became free within 1 s .*pool_timeout_s"):
            backend.memories.get("1")
        assert time.perf_counter() - started < 10
    assert backend.memories.get("1") is None  # and the pool works once it is free


def test_pool_timeout_s_is_a_setting(pg_url: str, pg_schema: str) -> None:
    config = structure(
        {"store": {"backend": "postgres", "url": pg_url}, "plugin": {"postgres": {"schema": pg_schema, "pool_timeout_s": 2}}}
    )
    backend = PostgresBackend.from_config(config)
    try:
        assert backend.db.pool.acquire_timeout_s == 2
    finally:
        backend.close()
    with pytest.raises(ConfigError, match=r"plugin\.postgres\.pool_timeout_s"):
        settings(structure({"plugin": {"postgres": {"pool_timeout_s": 0}}}))

def test_pool_connections_are_returned_after_errors(pg_url: str, pg_schema: str) -> None:
    backend = PostgresBackend(pg_url, schema=pg_schema, pool_max_size=2)
    try:
        for _ in range(10):  # more failures than pool slots: each must give its connection back
            with pytest.raises(StoreError):
                backend.memories.set_review_state("12345", "confirmed")
        errors: list[BaseException] = []

        def work() -> None:
            try:
                for i in range(20):  # distinct texts: identical ones are one memory (consolidation)
                    backend.memories.add_chunk(f"kiwi {threading.get_ident()} {i}")
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and len(backend.memories.list_chunks()) == 80
    finally:
        backend.close()
    drop_schema(pg_url, pg_schema)


def test_the_memory_commands_on_the_postgresql_backend_show_its_history(
    tmp_path: Any, pg_url: str, pg_schema: str
) -> None:
    # The commands resolve the configured backend (one store), its lifecycle history included.
    cfg = tmp_path / "contextplane.toml"
    cfg.write_text(
        f'[store]\nbackend = "postgres"\nurl = "{pg_url}"\n[plugin.postgres]\nschema = "{pg_schema}"\n'
    )

    def run(*args: str) -> Any:
        return CliRunner().invoke(main, [*args, "--config", str(cfg)])

    added = run("memory", "add", "the deploy window is Tuesday", "--source-type", "extracted")
    assert added.exit_code == 0 and added.output == "added 1\n", added.output
    assert run("memory", "confirm", "1").output == "1: confirmed\n"
    assert run("memory", "expire", "1", "--at", "2099-01-01T00:00:00Z").output.startswith("1: expires 2099-01-01")
    shown = run("memory", "show", "1")
    assert shown.exit_code == 0 and "lifecycle_state: active" in shown.output
    lines = shown.output[shown.output.index("history:") :].splitlines()[1:]
    assert [line.split(" ", 4)[4] for line in lines] == [
        "created (by extracted)",
        "review state set to confirmed (by cli:root)",
        "expiry set to 2099-01-01T00:00:00.000000Z (by cli:root)",
    ]
    data = json.loads(run("memory", "show", "1", "--json").output)
    assert data["review_state"] == "confirmed" and [e["event"] for e in data["history"]] == [
        "created",
        "review",
        "expiry",
    ]
    replayed = run("replay", "--session", "s", "--turn", "1")
    assert replayed.exit_code == 2 and "Traceback" not in replayed.output
    assert replayed.output.startswith("error: session 's' turn 1 has no recorded inputs"), replayed.output
