"""The command line under bad input (issue 10, "The command line"): one store for every
command, read-only commands that change nothing, one error shape, no tracebacks, conflicting
flags refused, typos named, the MCP server command."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner

from contextplane import PluginHost, open_backend
from contextplane.cli import main
from contextplane.config import load_config
from contextplane.store import SQLiteKnowledgeStore
from tests.store.helpers import HashEmbedder


def run(*args: str, input: bytes | str | None = None, ok: bool = True):
    result = CliRunner().invoke(main, list(args), input=input, prog_name="contextplane")
    if ok:
        assert result.exit_code == 0, (result.output, result.exception)
    return result


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tables(path: Path) -> list[str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return sorted(str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    finally:
        conn.close()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project directory with a config naming its store."""
    (tmp_path / "contextplane.toml").write_text(
        '[store]\npath = "agent.sqlite3"\n[context]\ncontext_window = 100000\nproject = "website"\n'
    )
    return tmp_path


# --- one store -------------------------------------------------------------------------


def test_every_command_opens_the_store_the_runtime_opens(project: Path, monkeypatch) -> None:
    monkeypatch.setenv("CONTEXTPLANE_DB", str(project / "elsewhere.sqlite3"))  # store.path wins
    cfg = str(project / "contextplane.toml")
    assert run("memory", "add", "Deploy window: Tuesday", "--policy", "always", "--config", cfg).output == "added 1\n"
    assert (project / "agent.sqlite3").exists() and not (project / "elsewhere.sqlite3").exists()
    # The runtime with the same configuration reads the same row.
    host = PluginHost.from_entry_points(load_config(cfg))
    backend = open_backend(host)
    try:
        assert [c.content for c in backend.memories.list_chunks()] == ["Deploy window: Tuesday"]
    finally:
        backend.close()
    listed = json.loads(run("memory", "list", "--config", cfg, "--json").output)
    assert [c["content"] for c in listed] == ["Deploy window: Tuesday"]
    preview = run("preview", "when do we deploy?", "--config", cfg).output
    assert "Deploy window: Tuesday" in preview
    assert "nothing to do" in run("migrate", "--config", cfg).output
    # The config is found by the runtime's search path too (./contextplane.toml).
    monkeypatch.chdir(project)
    assert "Deploy window: Tuesday" in run("memory", "search", "deploy").output
    # --db overrides everything.
    other = project / "other.sqlite3"
    run("memory", "add", "only here", "--db", str(other))
    assert [c["content"] for c in json.loads(run("memory", "list", "--db", str(other), "--json").output)] == [
        "only here"
    ]


class EmbedderPlugin:
    plugin_name = "test_embedder"

    def __init__(self) -> None:
        self.made = HashEmbedder()

    from contextplane import hookimpl

    @hookimpl
    def embedder(self, config):
        return self.made


def test_memory_add_embeds_with_the_configured_embedder_and_reindex_fills_the_rest(
    project: Path, monkeypatch
) -> None:
    cfg = str(project / "contextplane.toml")
    run("memory", "add", "written before any embedder", "--config", cfg)
    plugin = EmbedderPlugin()
    real = PluginHost.from_entry_points.__func__  # type: ignore[attr-defined]

    def with_embedder(cls, config=None, **kw):
        host = real(cls, config, **kw)
        host.register(plugin)
        return host

    monkeypatch.setattr(PluginHost, "from_entry_points", classmethod(with_embedder))
    run("memory", "add", "the deploy window is on Tuesday", "--config", cfg)
    conn = apsw.Connection(str(project / "agent.sqlite3"))
    assert conn.execute("SELECT chunk_id FROM chunks_vec").fetchall() == [(2,)]
    assert run("memory", "reindex", "--config", cfg).output == (
        "embedded 1 memories with test-hash-bow (64 dimensions); 0 without a vector\n"
    )
    assert sorted(conn.execute("SELECT chunk_id FROM chunks_vec").fetchall()) == [(1,), (2,)]
    conn.close()
    before = plugin.made.calls
    assert "the deploy window" in run("memory", "search", "deploy window", "--config", cfg).output
    assert plugin.made.calls == before + 1  # the search was hybrid: the query was embedded


def test_reindex_without_an_embedder_says_so(project: Path) -> None:
    cfg = str(project / "contextplane.toml")
    run("memory", "add", "x", "--config", cfg)
    res = run("memory", "reindex", "--config", cfg, ok=False)
    assert res.exit_code == 2
    assert res.output == (
        f"error: {project / 'agent.sqlite3'}: no embedder is configured ([embedder] provider in the "
        "configuration, or a plugin's `embedder` hook), so there are no vectors to build\n"
    )


# --- read-only commands change nothing ---------------------------------------------------


def test_read_only_commands_never_create_or_change_a_file(tmp_path: Path) -> None:
    absent = tmp_path / "absent.sqlite3"
    for args in (
        ["memory", "list"],
        ["memory", "show", "1"],
        ["memory", "search", "x"],
        ["injections"],
        ["snapshots", "list"],
        ["migrate", "--dry-run"],
        ["explain", "1", "--query", "x"],
        ["replay", "--session", "s", "--turn", "1"],
    ):
        res = run(*args, "--db", str(absent), ok=False)
        assert res.exit_code == 2 and res.output.startswith(f"error: {absent}: no store here (no such file)"), args
        assert not absent.exists()
    store = tmp_path / "memory.sqlite3"
    run("memory", "add", "kept as it is", "--db", str(store))
    before, names = digest(store), tables(store)
    assert "injection_log" not in names and "prompt_snapshots" not in names
    run("memory", "list", "--db", str(store))
    run("memory", "show", "1", "--db", str(store))
    run("memory", "search", "kept", "--db", str(store))
    assert run("injections", "--db", str(store)).output == "no injections\n"
    assert run("snapshots", "list", "--db", str(store)).output == "no snapshots\n"
    run("preview", "kept", "--db", str(store))
    run("migrate", "--dry-run", "--db", str(store))
    assert run("explain", "1", "--query", "kept", "--db", str(store)).output.startswith("memory 1: ")
    res = run("replay", "--session", "s", "--turn", "1", "--db", str(store), ok=False)
    assert res.exit_code == 2 and res.output.startswith("error: session 's' turn 1 has no recorded inputs")
    assert digest(store) == before and tables(store) == names


def test_preview_never_creates_the_user_global_store(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = run("preview", "anything", ok=False)
    data_dir = Path(os.environ["XDG_DATA_HOME"])
    assert not data_dir.exists() or list(data_dir.rglob("*")) == []
    # Issue 23: a path with no store is refused as every reading command refuses it.
    assert res.exit_code == 2 and res.stderr.startswith(
        f"error: {data_dir / 'contextplane' / 'memory.sqlite3'}: no store here (no such file), and nothing was created"
    )


# --- bad input, no tracebacks ------------------------------------------------------------


def test_text_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    res = run("memory", "add", "deploy \udcff window", "--db", db, ok=False)
    assert res.exit_code == 2 and res.output == (
        "error: content: holds U+DCFF at character 7, a lone surrogate that is not text (bytes that are not "
        "UTF-8, decoded with surrogateescape); re-encode the input as UTF-8 or remove that character\n"
    )
    res = run("memory", "add", "-", "--db", db, input=b"caf\xe9 latte", ok=False)
    assert res.exit_code == 2 and res.output == (
        "error: content: standard input is not UTF-8 text (byte 0xe9 at offset 3); convert it to UTF-8 first\n"
    )
    latin = tmp_path / "note.txt"
    latin.write_bytes(b"na\xefve")
    res = run("memory", "add", "--file", str(latin), "--db", db, ok=False)
    assert res.output == f"error: content: {latin} is not UTF-8 text (byte 0xef at offset 2); convert it to UTF-8 first\n"
    assert not Path(db).exists()  # nothing was written, not even an empty store
    assert "Traceback" not in res.output


def test_memory_text_from_stdin_or_a_file(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    assert run("memory", "add", "-", "--db", db, input="from standard input\nsecond line").output == "added 1\n"
    note = tmp_path / "note.md"
    note.write_text("from a file: ünïcode", encoding="utf-8")
    assert run("memory", "add", "--file", str(note), "--db", db).output == "added 2\n"
    contents = [c["content"] for c in json.loads(run("memory", "list", "--db", db, "--json").output)]
    assert contents == ["from standard input\nsecond line", "from a file: ünïcode"]
    assert "-" not in contents
    res = run("memory", "add", "text", "--file", str(note), "--db", db, ok=False)
    assert res.output == "error: content: give the text as an argument or with --file, not both\n"
    res = run("memory", "add", "--db", db, ok=False)
    assert res.output == (
        "error: content: missing; give the memory's text as an argument, '-' to read standard input, or "
        "--file PATH\n"
    )
    assert run("memory", "supersede", "1", "-", "--db", db, input="newer").output == "1 superseded by 3\n"


def test_expiry_times_that_cannot_be_stored_and_the_timezone_hint(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    run("memory", "add", "x", "--db", db)
    res = run("memory", "expire", "1", "--at", "9999-12-31T23:59:59-12:00", "--db", db, ok=False)
    assert res.exit_code == 2 and res.output == (
        "error: expires_at: '9999-12-31T23:59:59-12:00' is outside the representable range once converted "
        "to UTC (years 1 to 9999); pass an earlier time\n"
    )
    res = run("memory", "expire", "1", "--at", "2030-01-01", "--db", db, ok=False)
    assert res.output == "error: expires_at: '2030-01-01' has no timezone; for UTC write '2030-01-01T00:00:00Z'\n"
    # The string the hint suggests is accepted.
    assert "expires 2030-01-01T00:00:00+00:00" in run("memory", "expire", "1", "--at", "2030-01-01T00:00:00Z", "--db", db).output


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--clear", "--in-days", "3"], "--in-days and --clear conflict"),
        (["--at", "2030-01-01T00:00:00Z", "--clear"], "--at and --clear conflict"),
        (["--at", "2030-01-01T00:00:00Z", "--in-days", "2"], "--at and --in-days conflict"),
    ],
)
def test_conflicting_expiry_flags_are_refused(tmp_path: Path, flags: list[str], message: str) -> None:
    db = str(tmp_path / "m.sqlite3")
    run("memory", "add", "x", "--db", db)
    res = run("memory", "expire", "1", *flags, "--db", db, ok=False)
    assert res.exit_code == 2 and res.output == (
        f"error: {message}: give one of --at (a time), --in-days (from now) or --clear (no expiry); none "
        "expires the memory now\n"
    )
    assert json.loads(run("memory", "show", "1", "--db", db, "--json").output)["expires_at"] is None


def test_an_unknown_provenance_is_named_with_the_closest_one(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    res = CliRunner().invoke(main, ["memory", "add", "x", "--source-type", "operaTOR", "--db", db, "--json"])
    assert res.exit_code == 0
    assert res.stderr == (
        "warning: --source-type 'operaTOR' is not a known provenance (it is matched exactly), so the memory "
        "gets the least trust: tier 1, pending review; did you mean 'operator'? (known: background_report, "
        "chat, conversation, external, extracted, harvest, ingest, ingested, manual, operator)\n"
    )
    assert json.loads(res.stdout)["trust_tier"] == 1


def test_list_limit_zero_lists_everything(tmp_path: Path) -> None:
    db = str(tmp_path / "m.sqlite3")
    run("memory", "add", "first", "--db", db)
    from contextplane.store import SQLiteKnowledgeStore

    with SQLiteKnowledgeStore(db) as store:
        store.add_chunks([{"content": f"row {i}"} for i in range(70)])
    assert len(json.loads(run("memory", "list", "--db", db, "--json").output)) == 50
    assert len(json.loads(run("memory", "list", "--limit", "0", "--db", db, "--json").output)) == 71


def test_a_config_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "contextplane.toml"
    cfg.write_bytes(b'[prompt]\nguidelines = "caf\xe9"\n')
    for args in (["preview", "x"], ["memory", "list"], ["migrate"], ["plugins"]):
        res = run(*args, "--config", str(cfg), ok=False)
        assert res.exit_code == 2 and res.stderr == (
            f"error: {cfg} is not UTF-8 text (byte 0xe9 at offset 26); save it as UTF-8\n"
        ), args


def test_a_file_that_is_not_a_database_is_a_clear_error_for_every_command(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list")
    for args in (["snapshots", "list"], ["snapshots", "show", "s", "0"], ["injections"], ["memory", "list"],
                 ["migrate"], ["preview", "x"]):
        res = run(*args, "--db", str(notes), ok=False)
        assert res.exit_code == 2, args
        assert res.stderr.splitlines()[-1] + "\n" == (
            f"error: {notes}: not a SQLite database (the file header is not 'SQLite format 3'); move it aside "
            "or point --db / $CONTEXTPLANE_DB at a memory store\n"
        ), args
    assert notes.read_text() == "shopping list"


def test_usage_errors_have_the_same_shape_and_exit_code() -> None:
    res = run("memory", "list", "--limit", "-1", ok=False)
    assert res.exit_code == 2
    assert res.stderr.startswith("error: Invalid value for '--limit': -1 is not in the range x>=0.")
    assert res.stderr.endswith("(see 'contextplane memory list --help')\n") and res.stderr.count("\n") == 1
    res = run("memory", "add", "x", "--bogus", ok=False)
    assert res.exit_code == 2 and res.stderr == "error: No such option '--bogus'. (see 'contextplane memory add --help')\n"


# --- preview and demo --------------------------------------------------------------------


def test_preview_takes_the_project_in_the_form_its_help_shows(project: Path) -> None:
    cfg = str(project / "contextplane.toml")
    project.joinpath("contextplane.toml").write_text('[store]\npath = "agent.sqlite3"\n[context]\ncontext_window = 100000\n')
    run("memory", "add", "website deploys on Tuesdays", "--policy", "always", "--namespace", "project:website",
        "--config", cfg)
    for form in ("project:website", "website"):
        assert "website deploys on Tuesdays" in run("preview", "deploy", "--project", form, "--config", cfg).output
    assert "website deploys on Tuesdays" not in run("preview", "deploy", "--config", cfg).output


def test_text_preview_shows_the_stable_prefix_text(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("I am the preview agent.\nI keep things short.")
    cfg = tmp_path / "contextplane.toml"
    cfg.write_text('[prompt]\nsoul_path = "SOUL.md"\n[store]\npath = "m.sqlite3"\n')
    SQLiteKnowledgeStore(tmp_path / "m.sqlite3").close()
    out = run("preview", "x", "--config", str(cfg)).output
    assert "\n-- identity\nI am the preview agent.\nI keep things short.\n" in out
    assert "\n-- operating_model\n" in out


def test_demo_with_a_relative_dir_and_without_one(tmp_path: Path, monkeypatch) -> None:
    import tempfile

    monkeypatch.chdir(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    res = run("demo", "--dir", "reldemo")
    assert (tmp_path / "reldemo" / "memory.sqlite3").exists()
    assert not (tmp_path / "reldemo" / "reldemo").exists()
    assert "[ok] projected context within budget on every turn" in res.output
    res = run("demo")
    assert list(scratch.iterdir()) == []  # the temporary directory is gone
    assert "is removed; pass --dir to keep it)" in res.output


# --- names that match nothing ------------------------------------------------------------


def test_unknown_plugin_names_and_a_missing_skills_dir_are_named_once(tmp_path: Path, monkeypatch) -> None:
    cfg = tmp_path / "contextplane.toml"
    cfg.write_text('[plugins]\ndisabled = ["skilz"]\n[skills]\ndir = "nope"\n[context]\ncontext_window = 100000\n')
    SQLiteKnowledgeStore(tmp_path / "m.sqlite3").close()
    res = CliRunner().invoke(main, ["preview", "x", "--config", str(cfg), "--db", str(tmp_path / "m.sqlite3")])
    assert res.exit_code == 0
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings[0].startswith(
        "warning: plugins.disabled names 'skilz', which is no installed plugin, so it does nothing (did you "
        "mean 'skills'?); installed: "
    )
    assert f"warning: skills.dir names {tmp_path / 'nope'}, which is not a directory, so the skills index is empty; create it or fix skills.dir" in warnings
    assert len([w for w in warnings if "skilz" in w or "skills.dir" in w]) == 2, warnings
    monkeypatch.setenv("CONTEXTPLANE_PLUGINS", "identity,skilz")
    cfg.write_text('[context]\ncontext_window = 100000\n')
    res = CliRunner().invoke(main, ["plugins", "--config", str(cfg)])
    assert res.stderr.startswith(
        "warning: CONTEXTPLANE_PLUGINS names 'skilz', which is no installed plugin, so it does nothing (did "
        "you mean 'skills'?)"
    )


def test_an_unknown_config_key_is_named_with_the_closest_one(tmp_path: Path) -> None:
    cfg = tmp_path / "contextplane.toml"
    cfg.write_text("[context]\nretreived_k = 3\n")
    res = run("preview", "x", "--config", str(cfg), ok=False)
    assert res.output == (
        "error: unknown key context.retreived_k: remove it or check its spelling (did you mean "
        f"context.retrieved_k?) (in {cfg})\n"
    )


# --- contextplane mcp serve ----------------------------------------------------------------


def test_mcp_serve_runs_the_memory_tools_over_stdio(tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from contextplane import __version__
    from contextplane.store import SQLiteKnowledgeStore

    db = tmp_path / "memory.sqlite3"
    with SQLiteKnowledgeStore(db) as store:
        store.add_chunks([{"content": f"deploy note {i}"} for i in range(80)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    errlog = (tmp_path / "server.log").open("w")

    def server(*extra: str):
        return stdio_client(
            StdioServerParameters(
                command=sys.executable,
                args=["-c", "from contextplane.cli import main; main()", "mcp", "serve", "--db", str(db), *extra],
                env=env,
            ),
            errlog=errlog,
        )

    async def session() -> tuple:
        async with Client(server()) as client:
            info = client.server_info
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            many = await client.call_tool("memory_recall", {"query": "deploy", "k": 100_000})
            wrote = await client.call_tool("memory_ingest", {"content": "standup at 09:30"})
        async with Client(server("--incognito")) as client:
            refused = await client.call_tool("memory_ingest", {"content": "secret"})
        return info, tools, many, wrote, refused

    try:
        info, tools, many, wrote, refused = asyncio.run(session())
    finally:
        errlog.close()
    assert info.version == __version__ and tools == ["memory_get", "memory_ingest", "memory_recall"]
    assert len(many.structured_content["results"]) == 50 and many.structured_content["capped_at"] == 50
    assert not wrote.is_error
    assert refused.is_error and "incognito" in refused.content[0].text
    with SQLiteKnowledgeStore(db) as store:
        assert [c.content for c in store.list_chunks(limit=None)][-1] == "standup at 09:30"
        assert len(store.list_chunks()) == 81
