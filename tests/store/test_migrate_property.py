"""Migration as a property (issue 10): any version-1 ``chunks`` table the ADR's system could
have written (column subsets, nullable or not, with or without AUTOINCREMENT or an id column,
ids of 0 and below, freeform domains, unknown provenance), killed at random points and run
again, ends up readable and writable through every public API and every command, with no row
lost, doubled or misclassified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextplane.cli import main
from contextplane.memory import legacy_kind_and_policy
from contextplane.memory.trust import initial_review_state, trust_tier
from contextplane.store import SQLiteKnowledgeStore
from contextplane.store import connection as store_connection
from contextplane.store import migrate as m

OPTIONAL = [
    "heading",
    "source",
    "subject",
    "source_type",
    "namespace",
    "epoch",
    "invalidated_at",
    "invalidation_reason",
    "created_at",
    "updated_at",
    "finding_type",
]
DOMAINS = ["hot", "preferences", "general", "finding", "fact", "conversation", "loop-lessons", "Hot", "doc-stem"]
SOURCES = [None, "", "operator", "manual", "extracted", "conversation", "ingest", "weird", "Operator"]
T = "2025-05-05T05:05:05Z"


@st.composite
def v1_stores(draw: st.DrawFn) -> dict:
    ident = draw(st.sampled_from(["pk", "pk_auto", "rowid", "text_pk"]))
    columns = draw(st.lists(st.sampled_from(OPTIONAL), unique=True))
    not_null = {c: draw(st.booleans()) for c in columns if c not in ("invalidated_at", "invalidation_reason")}
    ids = draw(st.lists(st.integers(-6, 40), unique=True, max_size=14))
    rows = []
    for i in ids:
        row = {"id": i, "content": f"memo{abs(i)}x{'n' if i < 0 else 'p'} {draw(st.text(max_size=20))}"}
        row["domain"] = draw(st.sampled_from(DOMAINS))
        for c in columns:
            if c == "source_type":
                value = draw(st.sampled_from(SOURCES))
            elif c == "invalidated_at":
                value = draw(st.sampled_from([None, None, T]))
            elif c in ("created_at", "updated_at"):
                value = draw(st.sampled_from([T, "2025-05-05 05:05:05", None]))
            elif c == "namespace":
                value = draw(st.sampled_from(["", "project:x", None]))
            else:
                value = draw(st.sampled_from([None, "", "v"]))
            if value is None and not_null.get(c):
                value = "" if c not in ("created_at", "updated_at") else T
            row[c] = value
        rows.append(row)
    fts = ident in ("pk", "pk_auto") and "heading" in columns and draw(st.booleans())
    kills = draw(st.lists(st.integers(1, 60), max_size=3))
    return {"ident": ident, "columns": columns, "not_null": not_null, "rows": rows, "fts": fts, "kills": kills}


def build(path: Path, spec: dict) -> None:
    ident = {
        "pk": "id INTEGER PRIMARY KEY",
        "pk_auto": "id INTEGER PRIMARY KEY AUTOINCREMENT",
        "rowid": None,
        "text_pk": "id TEXT PRIMARY KEY",
    }[spec["ident"]]
    decls = [ident] if ident else []
    decls += ["content TEXT NOT NULL", "domain TEXT NOT NULL DEFAULT 'general'"]
    decls += [f"{c} TEXT" + (" NOT NULL" if spec["not_null"].get(c) else "") for c in spec["columns"]]
    conn = apsw.Connection(str(path))
    conn.execute(f"CREATE TABLE chunks ({', '.join(decls)})")
    if spec["fts"]:
        sql = m.V1_SCHEMA_SQL
        conn.execute(sql[sql.index("CREATE VIRTUAL TABLE") : sql.index("PRAGMA")])  # v1 FTS and triggers
    conn.execute("BEGIN")
    for row in spec["rows"]:
        names = [n for n in row if n != "id" or ident]
        values = [str(row["id"]) if n == "id" and spec["ident"] == "text_pk" else row[n] for n in names]
        if not ident:
            names, values = ["rowid", *names], [row["id"], *values]
        conn.execute(
            f"INSERT INTO chunks({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", values
        )
    conn.execute("COMMIT")
    conn.close()


class Killed(Exception):
    """The process "died" at this statement: nothing after it, not even a rollback, runs."""


def migrate_killed_at(path: Path, statement: int) -> None:
    """Run the migration and stop it dead before its ``statement``-th SQL statement; the
    connection is dropped without committing, as a killed process would leave it."""
    conn = store_connection.connect(path)
    count = [0]

    def tracer(_cursor, _sql, _bindings) -> bool:
        count[0] += 1
        if count[0] >= statement:
            raise Killed
        return True

    conn.exec_trace = tracer
    try:
        m.ensure_schema(conn, str(path), batch_rows=2)
    except Killed:
        pass
    except apsw.ExecTraceAbort:
        pass
    finally:
        conn.exec_trace = None
        conn.close()


def rows_now(path: Path) -> list[tuple]:
    conn = apsw.Connection(str(path))
    try:
        names = {str(r[1]) for r in conn.execute("PRAGMA table_info(chunks)")}
        ident = "CAST(id AS INTEGER)" if "id" in names else "rowid"
        return sorted(conn.execute(f"SELECT {ident}, content, domain FROM chunks").fetchall())
    finally:
        conn.close()


def expected(row: dict) -> tuple[str, str, str]:
    source = row.get("source_type") or ""
    kind = legacy_kind_and_policy(row["domain"], source)[0]
    return kind, source, initial_review_state(trust_tier(source))


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), prog_name="contextplane")
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result.stdout


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(v1_stores())
def test_any_v1_store_killed_and_rerun_is_readable_and_writable_everywhere(tmp_path_factory, spec) -> None:
    path = tmp_path_factory.mktemp("v1") / "memory.sqlite3"
    build(path, spec)
    original = sorted((r["id"], r["content"], r["domain"]) for r in spec["rows"])
    for point in spec["kills"]:
        migrate_killed_at(path, point)
        assert rows_now(path) == original  # every kill leaves every row, once
    with SQLiteKnowledgeStore(path, migrate_batch_rows=3) as store:
        by_id = {c.id: c for c in store.list_chunks()}
        assert sorted(int(i) for i in by_id) == sorted(r["id"] for r in spec["rows"])
        for row in spec["rows"]:
            chunk = by_id[str(row["id"])]
            kind, source, review = expected(row)
            assert (chunk.content, chunk.domain, chunk.source_type) == (row["content"], row["domain"], source)
            assert (chunk.memory_kind, chunk.review_state) == (kind, review), row
            assert store.get(str(row["id"])) == chunk
            # Schema 3: its history starts once, at the migration, whatever the kills did.
            events = store.history(str(row["id"]))
            assert [(e.event, e.review_state) for e in events] == [("migrated", review)], (row, events)
        live = [r for r in spec["rows"] if not r.get("invalidated_at")]
        for row in live[:3]:
            word = row["content"].split()[0]
            assert str(row["id"]) in {h.chunk.id for h in store.search(word, k=50)}
        largest = max([0, *(r["id"] for r in spec["rows"])])
        new = store.add_chunk("a new memo after migration", source_type="operator", delivery_policy="always")
        assert int(new) == largest + 1
        with store.consistent_read() as view:
            assert view.get(new) is not None
        if live:
            target = str(live[0]["id"])
            assert store.set_review_state(target, "confirmed").review_state == "confirmed"
            assert store.set_expires_at(target, "2099-01-01T00:00:00Z").expires_at is not None
            successor = store.supersede(target, "a replacement memo")
            assert store.get(target).superseded_by == successor  # type: ignore[union-attr]
        store.purge()
    # Every command, on the migrated store.
    db = str(path)
    assert "nothing to do" in cli("migrate", "--db", db)
    listed = json.loads(cli("memory", "list", "--limit", "0", "--db", db, "--json"))
    assert new in {c["id"] for c in listed}
    assert json.loads(cli("memory", "show", new, "--db", db, "--json"))["content"] == "a new memo after migration"
    assert new in {h["chunk"]["id"] for h in json.loads(cli("memory", "search", "replacement new memo", "--db", db, "--json"))}
    added = cli("memory", "add", "added by the command line", "--db", db)
    added_id = added.split()[-1]
    assert cli("memory", "confirm", added_id, "--db", db) == f"{added_id}: confirmed\n"
    assert cli("memory", "reject", added_id, "--db", db) == f"{added_id}: rejected\n"
    assert "superseded by" in cli("memory", "supersede", new, "the newest memo", "--db", db)
    assert "expires" in cli("memory", "expire", added_id, "--in-days", "3", "--db", db)
    preview = cli("preview", "memo", "--db", db, "--budget-tokens", "0")
    assert "the newest memo" in preview  # always-on, inherited by the superseding row
    assert cli("injections", "--db", db) == "no injections\n"
    assert cli("snapshots", "list", "--db", db) == "no snapshots\n"


_KILL_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from contextplane.store import connection, migrate
    path, stop = sys.argv[1], int(sys.argv[2])
    conn = connection.connect(path)
    seen = [0]
    def tracer(cursor, sql, bindings):
        seen[0] += 1
        if seen[0] >= stop:
            os._exit(9)
        return True
    conn.exec_trace = tracer
    migrate.ensure_schema(conn, path, batch_rows=2)
    os._exit(0)
    """
)


def test_a_real_kill_at_any_statement_of_an_adr_shaped_migration_loses_nothing(tmp_path: Path) -> None:
    from tests.store.test_store_files import ADR_ROWS, exercise, make_adr_store

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for stop in (3, 9, 15, 22, 30):
        path = tmp_path / f"kill{stop}.sqlite3"
        make_adr_store(path)
        proc = subprocess.run(
            [sys.executable, "-c", _KILL_SCRIPT, str(path), str(stop)], env=env, capture_output=True, timeout=60
        )
        assert proc.returncode in (9, 0), proc.stderr
        assert sorted(r[:2] for r in rows_now(path)) == sorted((r[0], r[1]) for r in ADR_ROWS)
        with SQLiteKnowledgeStore(path) as store:
            exercise(store)
