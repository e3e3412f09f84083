"""The record path written once (issue 25, item 2): the records observer is sans-IO and the host
writes its rows, a write's failure reaches the plan, and one adapter serves every record part's
async form.

Before, the records observer had a sync hook and an async twin per hook (``aobserve_projection``,
``aobserve_model_call``) and ``contextplane.records.aio`` a helper per record method.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import contextplane.records.aio as records_aio
from contextplane import (
    ContextSection,
    Envelope,
    Row,
    Shed,
    acompose_projected_context,
    compose_projected_context,
    hookimpl,
    plugin_host_with,
)
from contextplane.observability import observer
from contextplane.recorder import rows_of
from contextplane.records import InjectionRow
from contextplane.records.plans import Plan, Write, Writes, awrite, sans_io, write
from contextplane.testing.memory import InMemoryBackend, InMemoryInjectionLog, InMemorySessionSummaries


class Kiwi:
    plugin_name = "kiwi_rows"

    @hookimpl
    def register_context_sections(self, register: Any) -> None:
        rows = [Row("k1", 1, "kiwi harvest starts in May")]
        register(ContextSection("kiwi", 50, Shed.DROP_ROWS, lambda _r: rows, Envelope("kiwi")))


class NativeLog(InMemoryInjectionLog):
    """An injection log with an async client of its own (``arecord``): where each write ran."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def record(self, row: InjectionRow) -> int:
        self.threads.append(threading.current_thread().name)
        return super().record(row)


def test_the_records_observer_has_no_async_twin_and_returns_its_rows_unwritten() -> None:
    assert not hasattr(observer, "aobserve_projection") and not hasattr(observer, "aobserve_model_call")
    backend = InMemoryBackend()
    p = compose_projected_context("kiwi?", backend, host=plugin_host_with([Kiwi()]), budget_tokens=2_000)
    assert p.request is not None and len(backend.injections.rows()) == 1
    told = observer.observe_projection(p, p.request)
    assert isinstance(told, Writes) and told.parts is backend
    assert len(backend.injections.rows()) == 1  # returned, not written: the host writes it
    rows, _ = rows_of(told.plan)
    assert (rows[0].part, rows[0].method) == ("injections", "record")


@pytest.mark.parametrize("on_loop", [False, True], ids=["sync", "async"])
def test_the_host_writes_the_records_observers_rows_on_each_path(on_loop: bool) -> None:
    log = NativeLog()
    backend = InMemoryBackend(injections=log)
    host = plugin_host_with([Kiwi()])
    args: dict[str, Any] = {"host": host, "budget_tokens": 2_000, "session_id": "s"}

    if on_loop:

        async def main() -> tuple[Any, str]:
            p = await acompose_projected_context("kiwi?", backend, **args)
            return p, threading.current_thread().name

        p, loop_thread = asyncio.run(main())
        assert log.threads == [loop_thread]  # the native ``arecord``, awaited on the loop
    else:
        p = compose_projected_context("kiwi?", backend, **args)
        assert log.threads == [threading.current_thread().name]
    assert p.record_status == "recorded"
    assert [r.session_id for r in log.rows()] == ["s"] and not host.failures


class BrokenLog(InMemoryInjectionLog):
    threaded_async = True

    def record(self, row: InjectionRow) -> int:
        raise OSError("disk full")


@pytest.mark.parametrize("on_loop", [False, True], ids=["sync", "async"])
def test_a_failed_record_write_marks_the_turn_through_the_plan_and_is_isolated(on_loop: bool) -> None:
    backend = InMemoryBackend(injections=BrokenLog())
    host = plugin_host_with([Kiwi()])
    args: dict[str, Any] = {"host": host, "budget_tokens": 2_000, "session_id": "s"}
    compose = acompose_projected_context if on_loop else compose_projected_context
    p = asyncio.run(compose("kiwi?", backend, **args)) if on_loop else compose("kiwi?", backend, **args)
    assert (
        p.record_status.startswith("failed: storing the turn's injection-log row")
        and "disk full" in p.record_status
    )
    assert [f.describe() for f in host.failures] == [
        "plugin 'contextplane.records' (distribution contextplane) failed during observe_projection: OSError: disk full"
    ]


def _forgiving(seen: list[str]) -> Plan[str]:
    """A plan that answers a failed write by writing elsewhere: what a write's failure thrown
    into the plan allows."""
    try:
        yield Write("primary", "put", ("row",))
    except OSError as exc:
        seen.append(f"caught {exc}")
        yield Write("spare", "put", ("row",))
    return "done"


class Part:
    def __init__(self, fail: bool, threaded: bool = True) -> None:
        self.fail, self.rows, self.threaded_async = fail, [], threaded

    def put(self, row: str) -> None:
        if self.fail:
            raise OSError("disk full")
        self.rows.append(row)


class Parts:
    def __init__(self, threaded: bool) -> None:
        self.primary, self.spare = Part(True, threaded), Part(False, threaded)


class NativePart(Part):
    async def aput(self, row: str) -> None:
        self.put(row)


@pytest.mark.parametrize("driver", ["write", "awrite-threaded", "awrite-native"])
def test_a_failed_write_is_thrown_into_the_plan(driver: str) -> None:
    seen: list[str] = []
    parts = Parts(threaded=driver != "awrite-native")
    if driver == "awrite-native":
        parts.primary, parts.spare = NativePart(True, False), NativePart(False, False)
    plan = _forgiving(seen)
    done = write(parts, plan) if driver == "write" else asyncio.run(awrite(parts, plan))
    assert done == "done" and seen == ["caught disk full"] and parts.spare.rows == ["row"]


class Audit:
    """A third-party sans-IO observer: it returns its rows, the host writes them."""

    plugin_name = "audit"

    def __init__(self) -> None:
        self.log = Part(False, threaded=False)
        self.calls: list[str] = []

    @hookimpl
    @sans_io
    def observe_projection(self, projection: Any) -> Writes[None]:
        self.calls.append(threading.current_thread().name)

        def plan() -> Plan[None]:
            yield Write("log", "put", (projection.session_id,))

        return Writes(self, plan())


def test_a_third_party_sans_io_observer_is_called_on_the_loop_and_its_rows_written() -> None:
    audit = Audit()
    host = plugin_host_with([Kiwi(), audit])

    async def main() -> str:
        await acompose_projected_context(
            "kiwi?", InMemoryBackend(), host=host, budget_tokens=0, session_id="a"
        )
        return threading.current_thread().name

    loop_thread = asyncio.run(main())
    compose_projected_context("kiwi?", InMemoryBackend(), host=host, budget_tokens=0, session_id="b")
    assert audit.calls == [loop_thread, threading.current_thread().name]
    assert audit.log.rows == ["a", "b"] and not host.failures


class NativeSummaries(InMemorySessionSummaries):
    calls: list[str]

    async def anewest(self, limit: int, *, exclude_session: str | None = None) -> list[Any]:
        self.calls.append("anewest")
        return self.newest(limit, exclude_session=exclude_session)


def test_one_adapter_awaits_a_parts_async_form_or_runs_the_sync_one_in_a_thread() -> None:
    assert records_aio.__all__ == ["acall", "in_threads"]  # one adapter, not a helper per method
    plain, native = InMemorySessionSummaries(), NativeSummaries()
    native.calls = []
    for summaries in (plain, native):
        summaries.add("a", "kiwi deploy window moved", topic="deploy")

    async def main() -> tuple[Any, Any, str]:
        got = await records_aio.acall(native, "newest", 5, exclude_session=None)
        counted = await records_aio.acall(plain, "count")
        return got, counted, threading.current_thread().name

    got, counted, _ = asyncio.run(main())
    assert native.calls == ["anewest"] and got == native.newest(5) and counted == 1
