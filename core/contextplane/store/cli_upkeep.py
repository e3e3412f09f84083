"""The commands that move or maintain the store as a whole: ``memory export``/``import`` (JSON
Lines, exact or with new ids), ``memory status`` (the vector space against the configured
embedder) and ``memory reindex`` (embed what has no vector, or rebuild the index).

Why apart from curation: these act on every row at once and on the store's vectors, not on one
memory an operator chose.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from attrs import evolve as attrs_evolve

from contextplane.cli_common import (
    command_backend,
    command_store_path,
    load,
)
from contextplane.embedding import CONFIGURED, FULL_TEXT_ONLY
from contextplane.errors import StoreError, ValidationError
from contextplane.plugins import PluginHost
from contextplane.store import connection, jsonl
from contextplane.store.cli_curate import curator
from contextplane.store.cli_options import _decode, _json_option, _open, _read_bytes, _store_options
from contextplane.store.protocol import ExactRestore


@click.command("export")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file (default: standard output).",
)
@_store_options
def export_command(output: Path | None, config_path: str | None, db: Path | None) -> None:
    """Every memory as JSON Lines: a header line saying what an import keeps (every attribute,
    ids and times included, on a store that restores exactly; new ids and times with
    `import --new-ids`) and that history starts at the import, then one row per line with every
    attribute. `contextplane memory import` reads it into any store."""
    with _open(config_path, db, write=False) as store:
        lines = list(jsonl.export_lines(store))
    text = "".join(line + "\n" for line in lines)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"--output {output}: cannot write it ({exc.strerror})") from None
    click.echo(f"exported {len(lines) - 1} memories to {output}", err=True)


@click.command("import")
@click.argument("source", metavar="FILE")
@click.option(
    "--new-ids",
    is_flag=True,
    help="Let the store assign new ids and times (created_at, updated_at, invalidated_at) and re-link "
    "supersessions to them: for merging into a store that already holds memories.",
)
@_store_options
@_json_option
def import_command(
    source: str, new_ids: bool, config_path: str | None, db: Path | None, as_json: bool
) -> None:
    """Write the memories of an export (FILE, or '-' for standard input) into the store, each
    line one row, exactly as exported: ids, times, supersession links and review state kept (an
    id the store already holds is refused, nothing imported). A store that cannot restore exactly,
    or --new-ids, gets new ids and times, printed old -> new. History starts at the import. Every
    line is checked first; consolidation is off. Creates the store if there is none."""
    if source == "-":
        raw, where = sys.stdin.buffer.read(), "standard input"
    else:
        raw, where = _read_bytes(Path(source)), source
    rows = jsonl.parse_lines(_decode(raw, where).splitlines(), where)  # all checked before a write
    config, _host = load(config_path)
    # One row per line: consolidation would merge what the export kept apart on purpose.
    verbatim = attrs_evolve(config, store=attrs_evolve(config.store, deduplicate=False, auto_supersede=False))
    host = PluginHost.from_entry_points(verbatim)
    with command_backend(config_path, db, write=True, create=True, host=host) as (_c, _h, backend):
        store = backend.memories
        if not new_ids and not isinstance(store, ExactRestore):
            shown = getattr(store, "name", None) or type(store).__name__
            click.echo(
                f"notice: {shown} cannot restore exactly (it has no restore_chunks), so it assigns new ids "
                "and times; supersessions are re-linked to them",
                err=True,
            )
        result = jsonl.import_rows(store, rows, by=curator(), new_ids=new_ids)
    if as_json:
        report = {"imported": len(result.ids), "exact": result.exact, "ids": dict(result.ids)}
        click.echo(json.dumps(report, indent=2))
        return
    if result.exact:
        click.echo(
            f"imported {len(result.ids)} memories exactly: ids, times and state as exported "
            "(history starts at the import)"
        )
        return
    click.echo(f"imported {len(result.ids)} memories with new ids (history starts at the import)")
    for old, new in result.ids.items():
        click.echo(f"  {old} -> {new}")


@click.command("status")
@_store_options
@_json_option
def status_command(config_path: str | None, db: Path | None, as_json: bool) -> None:
    """The store's vector space (which embedder made its vectors), the configured embedder and
    whether they match, and the rows without a vector (what `memory reindex` would embed).
    Opens the store without its embedder, so a mismatch is reported here, not refused."""
    _config, host = load(config_path)
    embedder = host.embedder()
    with command_backend(config_path, db, write=False, host=host, embedder=None) as (_c, _h, backend):
        store = backend.memories
        if not hasattr(store, "vector_space"):
            raise StoreError(f"{getattr(store, 'name', 'the store')}: this memory store keeps no vectors")
        name, dims = store.vector_space()
        missing = store.vectorless_count()
        where = str(getattr(store, "path", None) or getattr(store, "name", "the store"))
    wanted = None if embedder is None else (embedder.name, int(embedder.dimensions))
    matches = None if wanted is None or dims is None else wanted == (name, dims)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "store": where,
                    "vector_space": {"embedder": name, "dimensions": dims},
                    "embedder": None if wanted is None else {"embedder": wanted[0], "dimensions": wanted[1]},
                    "matches": matches,
                    "without_vector": missing,
                }
            )
        )
        return
    click.echo(f"store: {where}")
    click.echo(f"vector space: {'none yet' if dims is None else f'{name} ({dims} dimensions)'}")
    if wanted is None:
        click.echo(f"embedder: none configured; {FULL_TEXT_ONLY}")
    else:
        verdict = {
            None: "",
            True: ", matches",
            False: ": differs, run `contextplane memory reindex --rebuild`",
        }
        click.echo(f"embedder: {wanted[0]} ({wanted[1]} dimensions){verdict[matches]}")
    click.echo(f"rows without a vector: {missing}")


@click.command("reindex")
@click.option(
    "--rebuild",
    is_flag=True,
    help="Embed every memory again with the configured embedder and make its vector space the store's "
    "(after changing [embedder]).",
)
@_store_options
@_json_option
def reindex_command(rebuild: bool, config_path: str | None, db: Path | None, as_json: bool) -> None:
    """Embed the memories that have no vector yet (written before an embedder was configured, or
    left by an interrupted rebuild), then retrain the vector index (off the write path: a store
    past 65,536 vectors is never retrained inside a write). With --rebuild, every memory is
    embedded again: the fix when the store's vectors are another embedder's."""
    config, host = load(config_path)
    embedder = host.embedder()
    if embedder is None:
        server = db is None and config.store.backend != "sqlite"
        if not server and not command_store_path(config, db).exists():
            raise connection.no_store(command_store_path(config, db))  # the path first: a typo
        where = f"store.backend = {config.store.backend!r}" if server else str(command_store_path(config, db))
        raise StoreError(
            f"{where}: no embedder is configured ([embedder] provider in the configuration, or a plugin's "
            "`embedder` hook), so there are no vectors to build"
        )
    # A rebuild opens the store without the embedder (its vectors may be another space's, which
    # opening with the new one refuses) and hands it over.
    opening = None if rebuild else CONFIGURED
    with command_backend(config_path, db, write=True, host=host, embedder=opening) as (_c, _h, backend):
        store = backend.memories
        if not hasattr(store, "rebuild_vectors"):
            raise StoreError(f"{getattr(store, 'name', 'the store')}: this memory store cannot build vectors")
        count = store.rebuild_vectors(embedder) if rebuild else store.reindex_vectors()
        train = getattr(store, "train_vector_index", None)
        lists = int(train()) if callable(train) else 0
        missing = store.vectorless_count()
        name, dims = store.vector_space()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "embedded": count,
                    "lists": lists,
                    "without_vector": missing,
                    "vector_space": {"embedder": name, "dimensions": dims},
                }
            )
        )
    else:
        click.echo(f"embedded {count} memories with {name} ({dims} dimensions); {missing} without a vector")
