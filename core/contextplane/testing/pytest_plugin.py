"""The conformance kit's pytest plugin, loaded through the ``pytest11`` entry point.

The kit works without it (requirement ids reach the test ids through the base classes); the
plugin adds what only a plugin can:

* the ``conformance(id)`` marker on every kit check, so ``-m conformance`` selects the kit;
* a "contextplane conformance" section in every failed check's report naming the requirement
  and its sentence, even when the failure is an exception raised inside the plugin under test;
* assertion rewriting for the kit's helper modules (``contextplane.testing`` registers them);
* each check's requirement id on its report (``user_properties``, so JUnit XML has it) and a
  closing line naming the failed requirements (``contextplane.testing.failed_requirements``).

It loads nothing heavy until a kit class is used: this module is imported by every pytest run
in an environment where contextplane is installed, so it imports only ``contextplane.testing``
(lazy itself) and reads a test's requirement only when the test has one.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

import contextplane.testing  # noqa: F401  (registers the check modules for assertion rewriting)

if TYPE_CHECKING:
    from contextplane.testing.requirements import Requirement


def _requirement(item: pytest.Item) -> Requirement | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None or "requirement" not in callspec.params:
        return None
    from contextplane.testing.requirements import Requirement

    found = callspec.params["requirement"]
    return found if isinstance(found, Requirement) else None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "conformance(id): a contextplane conformance-kit check of the requirement `id`"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        req = _requirement(item)
        if req is not None:
            item.add_marker(pytest.mark.conformance(req.id))
            # On every report of the check, and in JUnit XML as a <property>.
            item.user_properties.append(("contextplane_requirement", req.id))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    req = _requirement(item)
    if req is not None and report.failed:
        report.sections.append(
            (
                "contextplane conformance",
                f"requirement {req.id}: {req.sentence}\nreference: {req.reference}",
            )
        )
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line naming the requirements the run failed, so the ids are at hand at the end."""
    failed = terminalreporter.stats.get("failed", [])
    if not failed:
        return
    from contextplane.testing.kit_run import failed_requirements

    ids = failed_requirements(failed)
    if ids:
        names = ", ".join(sorted(ids))
        terminalreporter.write_line(f"contextplane conformance: failed requirements: {names}")
