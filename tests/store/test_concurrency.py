"""Two processes, four threads each, writing at once: every acknowledged write is present."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from contextplane.store import SQLiteKnowledgeStore

WRITES_PER_THREAD = 40

_WRITER = textwrap.dedent(
    """
    import json, sys, threading
    from contextplane.store import SQLiteKnowledgeStore

    path, tag, per_thread = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SQLiteKnowledgeStore(path)
    acked, lock = [], threading.Lock()
    start = threading.Barrier(4)

    def work(thread):
        start.wait()
        for i in range(per_thread):
            content = f"{tag} thread {thread} write {i}"
            if i % 10 == 9:  # mix in bulk writes
                ids = store.add_chunks([{"content": content + " bulk a"}, {"content": content + " bulk b"}])
                pairs = list(zip(ids, [content + " bulk a", content + " bulk b"]))
            else:
                pairs = [(store.add_chunk(content, namespace=f"session:{tag}"), content)]
            with lock:
                acked.extend(pairs)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    store.close()
    print(json.dumps(acked))
    """
)


def test_two_processes_four_threads(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    SQLiteKnowledgeStore(path).close()  # create once so both writers open an existing store
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), tag, str(WRITES_PER_THREAD)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("alpha", "beta")
    ]
    acked: list[tuple[str, str]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        acked.extend((str(i), c) for i, c in json.loads(out))
    expected_per_process = 4 * (WRITES_PER_THREAD + WRITES_PER_THREAD // 10)
    assert len(acked) == 2 * expected_per_process
    assert len({i for i, _ in acked}) == len(acked), "two writes acknowledged with the same id"
    with SQLiteKnowledgeStore(path) as store:
        stored = {c.id: c.content for c in store.list_chunks()}
        assert len(stored) == len(acked)
        for chunk_id, content in acked:
            assert stored[chunk_id] == content
        # FTS saw every write too
        assert len(store.search("thread", k=10_000)) == len(acked)
