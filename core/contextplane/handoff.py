"""Handing a blocking call to a worker thread from an event loop, for as little as it can cost.

Why not ``loop.run_in_executor`` / ``asyncio.to_thread``: a one-turn composition on the
embedded store is about a millisecond of work, and the executor's round trip (a work item and
a ``concurrent.futures.Future`` chained to an ``asyncio.Future``, a semaphore, a shared queue
every idle worker contends for) and ``asyncio.wait``'s timer cost 80-100 us on the machines we
measure on: about a tenth of the turn (bench/async_bench.py). Here a call goes straight to an
idle worker's own queue, its result straight to the caller's future by one
``call_soon_threadsafe``, and a time limit is one timer handle.

- **As many workers as the default executor would have**, ``MAX_WORKERS`` (``min(32, CPUs +
  4)``), so concurrent turns share the machine as they did through the executor; a call that
  finds every worker busy waits in a backlog the first worker to finish takes from. A call that
  never returns holds its worker, as it would hold an executor thread. Workers are daemon
  threads, so a stuck provider cannot hang the interpreter's exit.
- **Context variables** of the caller are visible in the call (the call runs in a copy of the
  caller's context), as with ``asyncio.to_thread``.
- **A cancelled caller** cancels only its future: the call runs on in its worker and its
  result is dropped; ``future.cancelled()`` is checked before a result is set.
- **Fork**: a child process starts with no workers (the parent's threads do not exist there).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Final, TypeVar

T = TypeVar("T")

#: Workers kept at most (the default executor's size); calls past that wait for one to finish.
MAX_WORKERS: Final[int] = min(32, (os.cpu_count() or 1) + 4)

_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


def _deliver(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """On the caller's loop: settle the caller's future, unless the caller gave up on it."""
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class _Pool:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[queue.SimpleQueue[_Job]] = []
        self.backlog: collections.deque[_Job] = collections.deque()
        self.started = 0

    def submit(self, job: _Job) -> None:
        with self.lock:
            if self.idle:
                inbox = self.idle.pop()
            elif self.started < MAX_WORKERS:
                self.started += 1
                inbox = queue.SimpleQueue()
                threading.Thread(
                    target=self._work, args=(inbox,), name=f"contextplane-handoff-{self.started}", daemon=True
                ).start()
            else:
                self.backlog.append(job)
                return
        inbox.put(job)

    def _work(self, inbox: queue.SimpleQueue[_Job]) -> None:
        job: _Job | None = inbox.get()
        while job is not None:
            call, loop, future = job
            try:
                ok, value = True, call()
            except BaseException as exc:  # handed to the caller, who raises it
                ok, value = False, exc
            with contextlib.suppress(RuntimeError):  # the caller's loop closed: nobody waits
                loop.call_soon_threadsafe(_deliver, future, ok, value)
            del call, future, value
            with self.lock:
                if self.backlog:
                    job = self.backlog.popleft()
                    continue
                self.idle.append(inbox)
            job = inbox.get()


_pool = _Pool()


def _after_fork() -> None:
    global _pool
    _pool = _Pool()


os.register_at_fork(after_in_child=_after_fork)


def hand_off(call: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """Start ``call(*args)`` in a worker thread, in a copy of the caller's context; the
    returned future (of the running loop) settles with its result or its exception."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()
    _pool.submit(((lambda: context.run(call, *args)), loop, future))
    return future


async def settled_within(future: asyncio.Future[Any], seconds: float) -> bool:
    """Wait until ``future`` is done or ``seconds`` have passed; True when it is done. Never
    cancels ``future`` (a cancelled waiter leaves it running)."""
    if future.done():
        return True
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: Any = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    timer = loop.call_later(seconds, wake)
    future.add_done_callback(wake)
    try:
        await waiter
    finally:
        timer.cancel()
        future.remove_done_callback(wake)
    return future.done()
