"""``contextplane store copy|init|status``: the PostgreSQL backend's commands, plugged into the
core's ``store`` group through the ``contextplane.store_commands`` entry-point group.

``store copy SRC DST`` moves an embedded store into PostgreSQL (resumable: run it again after
an interruption); ``store init URL`` creates or upgrades the schema, for an owner role to run
once before least-privileged runtime roles connect; ``store status URL`` shows the schema
version and the row counts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from contextplane.cli_params import Whole
from contextplane.errors import StoreError

_URL = click.argument("url", metavar="URL", required=False)
_SCHEMA = click.option(
    "--schema", default="contextplane", show_default=True, help="PostgreSQL schema the tables live in."
)


def _url(url: str | None) -> str:
    from contextplane_postgres.url import URL_ENV_VAR

    found = url or os.environ.get(URL_ENV_VAR)
    if not found:
        raise StoreError(f"no PostgreSQL URL: pass it as an argument or set ${URL_ENV_VAR}")
    return found


def _database(url: str, schema: str, *, vectors: bool = False) -> Any:
    try:
        from contextplane_postgres.database import Database
    except ImportError as exc:
        raise StoreError(
            f"the PostgreSQL backend needs the postgres extra ({exc}); pip install 'contextplane[postgres]'"
        ) from None
    return Database(url, schema=schema, vectors=vectors, pool_max_size=2)


@click.command("copy")
@click.argument("src", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("dst", metavar="DST", required=False)
@_SCHEMA
@click.option(
    "--batch-rows", default=5_000, show_default=True, type=Whole(1), help="Rows per transaction."
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def copy(src: Path, dst: str | None, schema: str, batch_rows: int, as_json: bool) -> None:
    """Copy the embedded store SRC (a SQLite file) into PostgreSQL DST (a URL, else
    $CONTEXTPLANE_DATABASE_URL). Interrupted? Run the same command again: it resumes."""
    from contextplane_postgres.copy import copy_store, source_vector_dims

    db = _database(_url(dst), schema, vectors=source_vector_dims(src) is not None)
    try:

        def progress(table: str, done: int, total: int) -> None:
            if not as_json:
                click.echo(f"{table}: {done}/{total}", err=True)

        result = copy_store(src, db, batch_rows=batch_rows, on_batch=progress)
    finally:
        db.close()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "source": result.source,
                    "destination": result.destination,
                    "resumed": result.resumed,
                    "vectors": result.vectors,
                    "not_copied": dict(result.not_copied),
                    "tables": {
                        t.table: {
                            "source_rows": t.source_rows,
                            "copied": t.copied,
                            "already_copied": t.already,
                        }
                        for t in result.tables
                    },
                },
                indent=2,
            )
        )
        return
    verb = "resumed and finished" if result.resumed else "copied"
    click.echo(f"{result.source} -> {result.destination}: {verb}")
    for t in result.tables:
        click.echo(f"  {t.table}: {t.source_rows} in the source, {t.copied} copied now, {t.already} before")
    if result.vectors:
        click.echo(f"  vectors: {result.vectors}")
    for table, rows in result.not_copied:
        click.echo(f"  {table}: {rows} in the source, not copied")


@click.command("init")
@_URL
@_SCHEMA
@click.option("--vectors", is_flag=True, help="Also create the pgvector extension (needs the right to).")
def init(url: str | None, schema: str, vectors: bool) -> None:
    """Create or upgrade the schema at URL (run once as the schema's owner)."""
    from contextplane_postgres.schema import SCHEMA_VERSION

    db = _database(_url(url), schema, vectors=vectors)
    db.close()
    click.echo(f"{db.shown}: at schema version {SCHEMA_VERSION}")


#: The tables ``store status`` counts, in the order it prints them.
STATUS_TABLES = (
    "chunks",
    "chunk_history",
    "session_summaries",
    "injection_log",
    "prompt_snapshots",
    "turn_inputs",
    "trajectory",
)


@click.command("status")
@_URL
@_SCHEMA
def status(url: str | None, schema: str) -> None:
    """Schema version, row counts, the vector space and the rows without a vector at URL, as
    JSON. Only reads, in a read-only transaction: an empty database (or a role that may not
    create anything) shows "no schema yet"."""
    from contextplane_postgres.schema import vector_state

    try:
        import psycopg

        from contextplane_postgres.connection import check_schema_name, connect_options, explain, translated
        from contextplane_postgres.url import redact
    except ImportError as exc:
        raise StoreError(
            f"the PostgreSQL backend needs the postgres extra ({exc}); pip install 'contextplane[postgres]'"
        ) from None
    target = _url(url)
    name = check_schema_name(schema)
    out: dict[str, Any] = {"destination": f"{redact(target)} (schema {name})"}
    try:
        conn = psycopg.connect(target, options=connect_options(name, 30_000, 10_000), connect_timeout=5)
    except psycopg.Error as exc:
        raise explain(exc, target) from None
    try:
        with translated(target, "read from"), conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            present = {
                str(row[0])
                for row in conn.execute(
                    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
                    (name,),
                )
            }
            if "meta" not in present:
                out["schema_version"] = None
                out["note"] = (
                    f"no schema yet: run `contextplane store init URL --schema {name}` as a role that may "
                    "create it"
                )
            else:
                row = conn.execute(f"SELECT value FROM {name}.meta WHERE key = 'schema_version'").fetchone()
                out["schema_version"] = int(row[0]) if row else None
            for table in STATUS_TABLES:
                if table not in present:
                    out[table] = 0
                    continue
                found = conn.execute(f"SELECT count(*) FROM {name}.{table}").fetchone()
                out[table] = int(found[0]) if found else 0
            if "meta" in present and "chunks" in present:
                dims, embedder = vector_state(conn)
                out["vector_space"] = {"embedder": embedder, "dimensions": dims}
                # rows `contextplane memory reindex` would embed (all of them before any vector)
                missing = "SELECT count(*) FROM chunks" + (
                    " WHERE embedding IS NULL" if dims is not None else ""
                )
                found = conn.execute(missing).fetchone()
                out["rows_without_vector"] = int(found[0]) if found else 0
    finally:
        conn.close()
    click.echo(json.dumps(out, indent=2))
