"""One writer process of the concurrency test: 4 threads adding, confirming, rejecting and
superseding against one PostgreSQL schema; every acknowledged write is logged to a JSON file.

Run as ``python -m tests.postgres.concurrency_worker URL SCHEMA WORKER OPS OUT CHAINS``.
"""

from __future__ import annotations

import json
import random
import sys
import threading
from typing import Any

from contextplane.errors import StoreError
from contextplane_postgres import PostgresBackend

THREADS = 4


def head_of(store: Any, start: str) -> str:
    cur = store.get(start)
    while cur is not None and cur.superseded_by is not None:
        start = cur.superseded_by
        cur = store.get(start)
    return start


def run_thread(
    store: Any, worker: int, thread: int, ops: int, chains: list[str], log: list[dict[str, Any]]
) -> None:
    rng = random.Random(worker * 100 + thread)
    own: list[str] = []
    heads = dict(enumerate(chains))
    for i in range(ops):
        r = rng.random()
        if r < 0.4 or not own:
            content = f"note w{worker} t{thread} i{i} kiwi"
            cid = store.add_chunk(content, "general", "extracted", namespace=f"project:w{worker}")
            own.append(cid)
            log.append({"op": "add", "id": cid, "content": content})
        elif r < 0.55:
            cid = rng.choice(own)
            store.set_review_state(cid, "confirmed")
            log.append({"op": "review", "id": cid, "state": "confirmed"})
        elif r < 0.7:
            cid = rng.choice(own)
            store.set_review_state(cid, "rejected")
            log.append({"op": "review", "id": cid, "state": "rejected"})
        else:
            c = rng.randrange(len(chains))
            for _attempt in range(50):
                old = heads[c] = head_of(store, heads[c])
                try:
                    new = store.supersede(
                        old,
                        f"chain c{c} by w{worker} t{thread} i{i}",
                        source_type="operator",
                        # alternate sections: always-on shows one version, retrieved the next
                        delivery_policy=rng.choice(["always", "retrieved"]),
                    )
                except StoreError as exc:
                    if "already invalidated" not in str(exc):
                        raise
                    continue  # another writer moved the head first: follow it and retry
                heads[c] = new
                log.append({"op": "supersede", "chain": c, "old": old, "new": new})
                break
            else:
                raise RuntimeError(f"chain {c}: 50 supersede attempts lost the race")


def main() -> None:
    url, schema, worker, ops, out, chains = sys.argv[1:7]
    backend = PostgresBackend(url, schema=schema, pool_max_size=THREADS + 1)
    logs: list[list[dict[str, Any]]] = [[] for _ in range(THREADS)]
    errors: list[str] = []

    def target(t: int) -> None:
        try:
            run_thread(backend.memories, int(worker), t, int(ops), json.loads(chains), logs[t])
        except BaseException as exc:
            errors.append(f"thread {t}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=target, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    backend.close()
    with open(out, "w") as fh:
        json.dump({"logs": logs, "errors": errors}, fh)


if __name__ == "__main__":
    main()
