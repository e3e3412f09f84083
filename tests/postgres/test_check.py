"""``contextplane store check`` on PostgreSQL: the history and the vector column are checked
(the server checks its own pages), each problem one line, exit status 1 (issue 26, item 7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from click.testing import CliRunner

from contextplane import PluginHost, open_backend
from contextplane.cli import main
from contextplane.config import load_config


def test_store_check_on_postgresql(tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    cfg = tmp_path / "contextplane.toml"
    cfg.write_text(
        f'[store]\nbackend = "postgres"\nurl = "{pg_url}"\n[plugin.postgres]\nschema = "{pg_schema}"\n'
    )
    backend: Any = open_backend(PluginHost.from_entry_points(load_config(str(cfg)), strict=True))
    try:
        first = backend.memories.add_chunk("the deploy window is Tuesday", "fact", "operator")
        backend.memories.set_review_state(first, "rejected", by="sam")
    finally:
        backend.close()

    def check() -> Any:
        return CliRunner().invoke(main, ["store", "check", "--config", str(cfg)])

    res = check()
    assert res.exit_code == 0, res.output
    assert res.output.strip().endswith(": ok") and pg_schema in res.output

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{pg_schema}"')
        conn.execute(  # an event nobody can read, and a row with no history at all
            "INSERT INTO chunk_history(chunk_id, at, event, detail) VALUES (%s, now(), 'rewritten', '{no')",
            (int(first),),
        )
        columns = ", ".join(
            name
            for (name,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = 'chunks' AND column_name != 'id' AND is_generated = 'NEVER'",
                (pg_schema,),
            )
        )
        (bare,) = conn.execute(
            f"INSERT INTO chunks({columns}) SELECT {columns} FROM chunks LIMIT 1 RETURNING id"
        ).fetchone()
        conn.execute(  # what a CREATE INDEX CONCURRENTLY that failed half-way leaves
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
            (f'"{pg_schema}".chunks_namespace_id',),
        )
    res = check()
    assert res.exit_code == 1, res.output
    problems = [line for line in res.output.splitlines() if line.startswith("problem: ")]
    assert any(p.startswith(f"problem: history of memory {first}: event ") and "unreadable" in p for p in problems)
    assert f"problem: memory {bare} has no history event (its creation was never recorded)" in problems
    assert any(p.startswith("problem: index chunks_namespace_id is invalid") for p in problems), problems
