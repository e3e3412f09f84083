"""Crossing between synchronous code and an event loop, the two ways composition needs.

Why a module of its own: both compositions need it (``projection`` runs an async provider to
completion; ``aprojection`` bounds every provider by the time limit), and so do the async
store and embedder helpers, so it sits below all of them and imports nothing of contextplane.

- ``run_to_completion`` runs an awaitable from synchronous code. When the calling thread
  already runs an event loop (a sync hook called from async code), a second loop cannot run
  on it, so the awaitable gets a loop of its own in a worker thread while the caller waits, as
  any synchronous call would.
- ``bounded`` awaits with the provider time limit and, at the limit, cancels and stops
  waiting, whether or not the awaitable honours the cancellation (one that swallows it runs
  on as a straggler, kept referenced so it is neither collected nor reported as lost).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

#: Tasks cancelled at a time limit that have not finished yet (a strong reference each).
_stragglers: set[asyncio.Future[Any]] = set()


def overran(elapsed_s: float, timeout_s: float) -> TimeoutError:
    """The error of a provider that returned, but after the limit (both paths measure this)."""
    return TimeoutError(
        f"took {elapsed_s:.3f}s, over the {timeout_s:.3f}s limit (context.provider_timeout_ms)"
    )


def over_limit(timeout_s: float) -> TimeoutError:
    """The error of a provider that gave no result within the limit (it was cancelled)."""
    return TimeoutError(
        f"no result within the {timeout_s:.3f}s limit (context.provider_timeout_ms); cancelled"
    )


def _settle(future: asyncio.Future[Any]) -> None:
    _stragglers.discard(future)
    if not future.cancelled():
        future.exception()  # retrieved: a straggler's late failure is not an unhandled one


def abandon(future: asyncio.Future[Any]) -> None:
    """Cancel ``future`` and stop waiting for it; keep it referenced until it finishes."""
    future.cancel()
    if not future.done():
        _stragglers.add(future)
        future.add_done_callback(_settle)


def stragglers() -> int:
    """How many abandoned tasks are still running (tests and diagnostics)."""
    return len(_stragglers)


async def bounded(awaitable: Awaitable[T], timeout_s: float | None) -> T:
    """``await awaitable``, cancelled at ``timeout_s`` (None: no limit) with ``over_limit``."""
    future = asyncio.ensure_future(awaitable)
    if timeout_s is None:
        return await future
    done, _ = await asyncio.wait({future}, timeout=timeout_s)
    if not done:
        abandon(future)
        raise over_limit(timeout_s)
    return future.result()


def run_to_completion(awaitable: Awaitable[T], timeout_s: float | None = None) -> T:
    """Run ``awaitable`` from synchronous code and return its result, cancelled at ``timeout_s``."""

    async def main() -> T:
        return await bounded(awaitable, timeout_s)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="contextplane-sync") as pool:
        return pool.submit(context.run, asyncio.run, main()).result()
