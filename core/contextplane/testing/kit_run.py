"""Which requirements a kit run failed, by id: for an author proving their own tests can fail,
and for tooling that reads a pytest run.

Two ways in, one answer (a set of requirement ids):

* ``run_checks(kit_class, fixtures)`` calls every check of a kit class directly, outside
  pytest's collection, each with fresh fixture values from ``fixtures`` (a context manager per
  check, so a backend is closed after its check), and returns a ``KitRun``: its ``failed``
  maps each failing id to the failure text. This is the shape of scikit-learn's
  ``check_estimator(..., on_fail=None)``: the kit does not stop at the first failure, it says
  which promises were broken. An author breaks their adapter on purpose and asserts
  ``run.failed_ids == {"RUNTIME-NEVER-STORED"}``.
* In a pytest run, every kit check's report carries its id in ``report.user_properties`` as
  ``("contextplane_requirement", id)`` (so JUnit XML has it as a ``<property>``), and
  ``failed_requirements(reports)`` gives the ids of the failed ones; the kit's pytest plugin
  prints them at the end of the run.

Why a check that raises anything but ``ConformanceFailure`` or a skip is not counted as a
failed requirement by ``run_checks``: such an error is a broken fixture or harness as often as
a broken adapter, and a tool that folded it into the set would let a test pass on the wrong
failure. It propagates, with a note naming the requirement it was checking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Final, Literal

import attrs
import pytest

from contextplane.testing._base import ConformanceBase, KitUsageError, requirement_of
from contextplane.testing.requirements import REQUIREMENTS, ConformanceFailure, Requirement, requirement

#: The ``user_properties`` name under which a kit check's report carries its requirement id.
REQUIREMENT_PROPERTY: Final[str] = "contextplane_requirement"

Status = Literal["passed", "failed", "skipped"]
#: Given the requirement about to be checked, a context manager yielding the check's fixture
#: values by name (every argument of the check but ``requirement``).
Fixtures = Callable[[Requirement], AbstractContextManager[Mapping[str, Any]]]


@attrs.frozen
class KitCheck:
    """One check of a kit class: the requirement it checks and its method's name."""

    requirement: Requirement
    name: str


@attrs.frozen
class CheckResult:
    """What one check said: passed, failed (``message`` is the failure text, id first) or
    skipped (an optional capability not declared; ``message`` says which)."""

    requirement: Requirement
    status: Status
    message: str = ""


@attrs.frozen
class KitRun:
    """Every check ``run_checks`` ran, in documentation order."""

    results: tuple[CheckResult, ...]

    @property
    def failed(self) -> dict[str, str]:
        """Each failed requirement's id and its failure text."""
        return {r.requirement.id: r.message for r in self.results if r.status == "failed"}

    @property
    def failed_ids(self) -> frozenset[str]:
        return frozenset(self.failed)

    @property
    def passed_ids(self) -> frozenset[str]:
        return frozenset(r.requirement.id for r in self.results if r.status == "passed")


def kit_checks(kit_class: type[ConformanceBase]) -> tuple[KitCheck, ...]:
    """The checks of a kit class (``BackendConformance``, a subclass of ``RuntimeConformance``,
    ...), in documentation order."""
    if not (isinstance(kit_class, type) and issubclass(kit_class, ConformanceBase)):
        raise KitUsageError(f"{kit_class!r} is not a conformance kit class (a ConformanceBase subclass)")
    order = {rid: n for n, rid in enumerate(REQUIREMENTS)}
    found = [
        KitCheck(req, name)
        for name in dir(kit_class)
        if (req := requirement_of(getattr(kit_class, name, None))) is not None
    ]
    return tuple(sorted(found, key=lambda c: order[c.requirement.id]))


def run_checks(
    kit_class: type[ConformanceBase], fixtures: Fixtures, *, only: Iterable[str] | None = None
) -> KitRun:
    """Run every check of ``kit_class`` (or the ids in ``only``), each on a new instance with
    the values ``fixtures(requirement)`` yields, and say what each did. ``known_gaps`` are not
    applied: the run reports what fails."""
    wanted = None if only is None else {requirement(i).id for i in only}  # a typo names the nearest id
    results: list[CheckResult] = []
    for check in kit_checks(kit_class):
        req = check.requirement
        if wanted is not None and req.id not in wanted:
            continue
        try:
            with fixtures(req) as values:
                getattr(kit_class(), check.name)(requirement=req, **values)
        except ConformanceFailure as failure:
            results.append(CheckResult(req, "failed", str(failure)))
        except pytest.skip.Exception as skipped:
            results.append(CheckResult(req, "skipped", str(skipped.msg)))
        except BaseException as exc:
            exc.add_note(f"raised while checking {req.id} ({kit_class.__name__}.{check.name})")
            raise
        else:
            results.append(CheckResult(req, "passed"))
    return KitRun(tuple(results))


def requirement_id(report: Any) -> str | None:
    """The requirement id a pytest report (``TestReport``) carries, or None for a test that is
    not a kit check."""
    for name, value in getattr(report, "user_properties", ()):
        if name == REQUIREMENT_PROPERTY:
            return str(value)
    return None


def failed_requirements(reports: Iterable[Any]) -> frozenset[str]:
    """The ids of the kit checks that failed among pytest ``reports`` (a terminal reporter's
    ``stats["failed"]``, or the reports a ``pytest_runtest_logreport`` hook collected): a
    check's call that failed, a strict known gap that passed included; a fixture's error in
    setup is not a requirement's failure and is left out."""
    return frozenset(
        rid
        for report in reports
        if getattr(report, "failed", False)
        and getattr(report, "when", "call") == "call"
        and (rid := requirement_id(report)) is not None
    )
