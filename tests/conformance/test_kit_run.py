"""``contextplane.testing.run_checks`` / ``failed_requirements``: the public way to learn which
requirements a kit run failed (the adapters' tests prove their broken adapters fail with it;
test_records_kit.py reads the same ids off a pytest run's reports)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from contextplane.testing import (
    REQUIREMENT_PROPERTY,
    BackendConformance,
    KitUsageError,
    Requirement,
    failed_requirements,
    kit_checks,
    requirement_id,
    requirements_of,
    run_checks,
)
from contextplane.testing.memory import InMemoryBackend
from tests.conformance.cases_faulty_backends import DropsTheCachePrefix, NewestFirstLog

CACHE = "RECORDS-SNAPSHOTS-CACHE-PREFIX"


def _backends(**parts: Any) -> Any:
    @contextmanager
    def fixtures(_req: Requirement) -> Iterator[dict[str, Any]]:
        backend = InMemoryBackend(**{k: v() for k, v in parts.items()})
        try:
            yield {"backend": backend}
        finally:
            backend.close()

    return fixtures


Plain = type("Plain", (BackendConformance,), {"capabilities": frozenset()})


def test_a_run_names_what_failed_passed_and_skipped() -> None:
    run = run_checks(Plain, _backends(snapshots=DropsTheCachePrefix, injections=NewestFirstLog))
    assert run.failed_ids == {CACHE, "RECORDS-INJECTIONS-APPEND"}
    assert run.failed[CACHE].startswith(f"[{CACHE}] ")
    every = [r.id for r in requirements_of("records")]
    assert [r.requirement.id for r in run.results] == every  # documentation order, none left out
    assert {r.requirement.id for r in run.results if r.status == "skipped"} == {"RECORDS-TRAJECTORY"}
    assert run.passed_ids == set(every) - run.failed_ids - {"RECORDS-TRAJECTORY"}


def test_a_working_backend_fails_nothing_and_only_limits_the_run() -> None:
    run = run_checks(Plain, _backends(), only=[CACHE])
    assert [(r.requirement.id, r.status) for r in run.results] == [(CACHE, "passed")]
    assert run.failed == {}
    with pytest.raises(KeyError, match="did you mean 'RECORDS-SNAPSHOTS-CACHE-PREFIX'"):
        run_checks(Plain, _backends(), only=["RECORDS-SNAPSHOT-CACHE-PREFIX"])


def test_an_error_that_is_not_a_requirement_s_failure_propagates_naming_the_check() -> None:
    @contextmanager
    def broken(_req: Requirement) -> Iterator[dict[str, Any]]:
        raise RuntimeError("the fixture broke")
        yield {}

    with pytest.raises(RuntimeError, match="the fixture broke") as raised:
        run_checks(Plain, broken, only=[CACHE])
    assert (
        f"raised while checking {CACHE} (Plain.test_records_snapshots_cache_prefix)" in raised.value.__notes__
    )


def test_kit_checks_lists_a_kit_class_s_checks_and_refuses_anything_else() -> None:
    assert [c.requirement.id for c in kit_checks(BackendConformance)] == [
        r.id for r in requirements_of("records")
    ]
    with pytest.raises(KitUsageError, match="is not a conformance kit class"):
        kit_checks(InMemoryBackend)  # type: ignore[arg-type]


def _report(outcome: str, when: str = "call", rid: str | None = CACHE) -> pytest.TestReport:
    props = [(REQUIREMENT_PROPERTY, rid)] if rid else []
    return pytest.TestReport("t.py::x", ("t.py", 1, "x"), {}, outcome, None, when, user_properties=props)  # type: ignore[arg-type]


def test_failed_requirements_reads_pytest_reports() -> None:
    reports = [
        _report("failed"),
        _report("failed", rid="RECORDS-BACKEND"),
        _report("passed", rid="RECORDS-TRAJECTORY"),
        _report("failed", when="setup", rid="RECORDS-ASYNC-PARITY"),  # a fixture's error, not a requirement's
        _report("failed", rid=None),  # not a kit check
    ]
    assert failed_requirements(reports) == {CACHE, "RECORDS-BACKEND"}
    assert requirement_id(reports[2]) == "RECORDS-TRAJECTORY" and requirement_id(reports[4]) is None
