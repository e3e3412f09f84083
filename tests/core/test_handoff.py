"""The worker-thread hand-off the one-hop async route uses (contextplane.handoff)."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time

import pytest

from contextplane import handoff
from contextplane.handoff import MAX_WORKERS, hand_off, settled_within

_who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def test_a_call_runs_off_the_loop_thread_with_the_callers_context() -> None:
    async def main() -> tuple[str, int]:
        _who.set("turn-7")
        return await hand_off(lambda: (_who.get(), threading.get_ident()))

    who, ident = asyncio.run(main())
    assert who == "turn-7"
    assert ident != threading.get_ident()


def test_a_calls_exception_reaches_the_caller_with_its_type_and_text() -> None:
    def fail() -> None:
        raise KeyError("no such section")

    async def main() -> None:
        await hand_off(fail)

    with pytest.raises(KeyError, match="no such section"):
        asyncio.run(main())


def test_a_stuck_call_does_not_hold_up_the_next_one() -> None:
    release = threading.Event()

    async def main() -> str:
        stuck = hand_off(release.wait, 30)
        try:
            return await asyncio.wait_for(hand_off(lambda: "next"), 5)
        finally:
            release.set()
            await stuck

    assert asyncio.run(main()) == "next"


def test_calls_past_the_worker_limit_wait_and_all_complete() -> None:
    gate = threading.Event()
    running = 0
    most = 0
    lock = threading.Lock()

    def call(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        gate.wait(10)
        with lock:
            running -= 1
        return i

    async def main() -> list[int]:
        futures = [hand_off(call, i) for i in range(MAX_WORKERS + 5)]
        await asyncio.sleep(0.2)
        gate.set()
        return list(await asyncio.gather(*futures))

    assert asyncio.run(main()) == list(range(MAX_WORKERS + 5))
    assert most <= MAX_WORKERS


def test_a_cancelled_caller_drops_the_result_and_the_worker_goes_on() -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def call() -> str:
        started.set()
        release.wait(10)
        finished.set()
        return "late"

    async def main() -> str:
        future = hand_off(call)
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        future.cancel()
        release.set()
        await asyncio.get_running_loop().run_in_executor(None, finished.wait, 10)
        await asyncio.sleep(0.05)  # the worker's result reaches the loop, which drops it
        assert future.cancelled()
        return await hand_off(lambda: "again")

    assert asyncio.run(main()) == "again"


def test_settled_within_says_whether_the_future_finished_and_never_cancels_it() -> None:
    async def main() -> tuple[bool, bool, str]:
        release = threading.Event()
        future = hand_off(lambda: release.wait(10) and "done")
        early = await settled_within(future, 0.05)
        release.set()
        late = await settled_within(future, 5)
        return early, late, future.result()

    assert asyncio.run(main()) == (False, True, "done")


def test_a_forked_child_starts_its_own_workers() -> None:
    async def once() -> int:
        return await hand_off(lambda: 41) + 1

    assert asyncio.run(once()) == 42  # the parent has workers now
    pid = os.fork()
    if pid == 0:  # the child: the parent's worker threads do not exist here
        try:
            result = asyncio.run(asyncio.wait_for(once(), 5))
            os._exit(0 if result == 42 and handoff._pool.started == 1 else 3)
        except BaseException:
            os._exit(4)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.02)
    os.kill(pid, 9)
    pytest.fail("the forked child's hand-off did not finish within 20 s")
