"""A store on a read-only filesystem: every read command and the console open it, every write
is refused in one line, and nothing is ever read short (issue 26, item 8).

Why a mount and not ``chmod``: the tests run as root, whom permissions do not stop. Each test
runs its commands in a private user and mount namespace (``unshare -rm``) where the store's
directory is bind-mounted read-only onto itself: a real ``EROFS`` for root too, gone when the
process ends, invisible to every other process. ``unshare`` missing fails the test.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contextplane.store import SQLiteKnowledgeStore

REPO = Path(__file__).resolve().parents[2]


def read_only(directory: Path, script: str) -> subprocess.CompletedProcess[str]:
    """Run the shell ``script`` with ``directory`` mounted read-only (for root as well)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is needed to mount the store's directory read-only")
    d = shlex.quote(str(directory))
    setup = (
        f"mount --bind {d} {d} && mount -o remount,bind,ro {d} && "
        f"if touch {d}/probe 2>/dev/null; then echo 'the mount is writable' >&2; exit 99; fi; "
    )
    return subprocess.run(
        [unshare, "-rm", "sh", "-c", setup + script],
        capture_output=True, text=True, timeout=120, cwd=REPO,
    )


def cli(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in (sys.executable, "-m", "contextplane", *args))


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "ro"
    directory.mkdir()
    with SQLiteKnowledgeStore(directory / "memory.sqlite3") as store:
        first = store.add_chunk("The deploy window is Friday evening", "fact", "operator")
        store.set_review_state(first, "confirmed", by="sam")
    assert sorted(p.name for p in directory.iterdir()) == ["memory.sqlite3"]  # a clean close
    return directory


READS = [
    ["memory", "list"],
    ["memory", "show", "1"],
    ["memory", "search", "deploy"],
    ["injections"],
    ["snapshots", "list"],
    ["explain", "1", "--query", "when is the deploy window?"],
    ["preview", "when is the deploy window?"],
    ["store", "check"],
]
WRITES = [
    ["memory", "add", "another memory"],
    ["memory", "confirm", "1"],
    ["memory", "supersede", "1", "The deploy window is Thursday"],
    ["memory", "expire", "1", "--in-days", "3"],
]


def test_every_read_command_works_and_every_write_is_one_line(store_dir: Path) -> None:
    db = str(store_dir / "memory.sqlite3")
    script = textwrap.dedent(
        f"""
        import json
        from click.testing import CliRunner
        from contextplane.cli import main
        out = {{}}
        for args in {READS + WRITES!r}:
            res = CliRunner().invoke(main, [*args, "--db", {db!r}])
            out[" ".join(args)] = [res.exit_code, res.output, repr(res.exception)]
        print(json.dumps(out))
        """
    )
    done = read_only(store_dir, f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}")
    assert done.returncode == 0, done.stderr
    outputs = json.loads(done.stdout.strip().splitlines()[-1])
    for args in READS:
        status, body, exception = outputs[" ".join(args)]
        assert status == 0, (args, body, exception)
        assert "Traceback" not in body and "cannot open" not in body, (args, body)
    assert "The deploy window is Friday evening" in outputs["memory list"][1]
    for args in WRITES:
        status, body, exception = outputs[" ".join(args)]
        assert status == 2, (args, body, exception)
        assert body.count("\n") == 1 and body.startswith(f"error: {db}: the store is read-only"), (args, body)
    assert sorted(p.name for p in store_dir.iterdir()) == ["memory.sqlite3"]  # nothing beside it


def test_the_console_reads_and_refuses_writes(store_dir: Path) -> None:
    db = store_dir / "memory.sqlite3"
    script = textwrap.dedent(
        f"""
        from starlette.testclient import TestClient
        from contextplane import PluginHost
        from contextplane.backends.sqlite import SQLiteBackend
        from contextplane.config import structure
        from contextplane_console import create_app
        config = structure({{}})
        backend = SQLiteBackend({str(db)!r}, config=config)
        app = create_app(backend, PluginHost.from_entry_points(config), csrf_token="t" * 32)
        with TestClient(app, base_url="http://127.0.0.1") as c:
            listed = c.get("/api/memory/chunks")
            assert listed.status_code == 200, listed.text
            assert [i["content"] for i in listed.json()["items"]] == ["The deploy window is Friday evening"]
            assert c.get("/memory").status_code == 200
            headers = {{"X-CSRF-Token": "t" * 32, "Origin": "http://127.0.0.1"}}
            wrote = c.post("/api/memory/chunks/1/review", json={{"state": "rejected"}}, headers=headers)
            assert wrote.status_code == 409, wrote.text
            assert "the store is read-only" in wrote.json()["error"], wrote.text
        backend.close()
        print("console ok")
        """
    )
    done = read_only(store_dir, f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "console ok" in done.stdout


def _with_open_writer(directory: Path, keep_shm: bool) -> None:
    """Leave what a writer that never closed leaves: rows only in ``-wal`` (and ``-shm``)."""
    live = directory.parent / "live"
    live.mkdir()
    store = SQLiteKnowledgeStore(live / "memory.sqlite3")
    store.add_chunk("A row that is only in the write-ahead log", "fact", "operator")
    for name in ("memory.sqlite3", "memory.sqlite3-wal", "memory.sqlite3-shm"):
        if name != "memory.sqlite3-shm" or keep_shm:
            shutil.copy(live / name, directory / name)
    store.close()


def test_writes_left_in_the_wal_are_read_when_the_shm_is_there(store_dir: Path) -> None:
    _with_open_writer(store_dir, keep_shm=True)
    done = read_only(store_dir, cli("memory", "list", "--db", str(store_dir / "memory.sqlite3")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "A row that is only in the write-ahead log" in done.stdout


def test_writes_left_in_the_wal_without_the_shm_are_refused_not_skipped(store_dir: Path) -> None:
    _with_open_writer(store_dir, keep_shm=False)
    done = read_only(store_dir, cli("memory", "list", "--db", str(store_dir / "memory.sqlite3")))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and "memory.sqlite3-wal beside it holds writes not yet in the file" in done.stderr
