"""One recorded D8 turn, timed alone: the sync compose of ``bench/async_bench.py``'s part 1.

``async_bench`` times sync and async turns in pairs, so its one-turn figures move with the load
between runs; this times only the sync turn (400 turns after 60 warm, wall and thread CPU), for
comparing two trees alternated (``bench/ab_trees.sh BEFORE 2 bench/compose_turn_bench.py``).
Same store as the async bench: 2,000 memories over three scopes, its sections, ``record=True``.

    python bench/compose_turn_bench.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import async_bench

from contextplane import compose_projected_context
from contextplane.config import structure


def main() -> int:
    config = structure({"context": {"context_window": 200_000, "project": "web"}})
    host = async_bench.plugin_host_with(async_bench.SECTIONS, config)
    with tempfile.TemporaryDirectory() as tmp:
        backend = async_bench.seeded_backend(Path(tmp), config)
        store = backend.memories

        def turn(n: int) -> int:
            projection = compose_projected_context(
                async_bench.QUERIES[n % len(async_bench.QUERIES)],
                store,
                skills_index=async_bench.SKILLS,
                state=async_bench.STATE,
                session_id=f"s-{n % 20}",
                turn_index=n,
                host=host,
                record=True,
            )
            return len(projection.text)

        for n in range(60):
            turn(n)
        wall: list[float] = []
        cpu: list[float] = []
        chars = 0
        for n in range(60, 460):
            c, t = time.thread_time(), time.perf_counter()
            chars = turn(n)
            wall.append(time.perf_counter() - t)
            cpu.append(time.thread_time() - c)
        backend.close()
    print(
        f"compose p50 {statistics.median(wall) * 1e3:.2f} ms wall, {statistics.median(cpu) * 1e3:.2f} ms CPU "
        f"(400 turns; last projection {chars} chars)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
