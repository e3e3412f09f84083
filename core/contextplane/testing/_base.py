"""The machinery every conformance base class shares: requirement ids in test ids, known gaps.

Why a class-level ``pytest_generate_tests``: pytest calls it on an *instance of the
implementer's subclass*, so the subclass's ``known_gaps`` decide the marks while the kit's
test methods are parametrised. Each check method takes one ``requirement`` argument; the
parameter id is the requirement id, so the test id reads ``test_shed_order[CTX-SHED-ORDER]``
and ``pytest -k CTX-SHED-ORDER`` selects it, with or without the kit's pytest plugin loaded.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import pytest

from contextplane.testing.requirements import REQUIREMENTS, Requirement, requirement

F = TypeVar("F", bound=Callable[..., Any])

_ATTR = "__contextplane_requirement__"


class KitUsageError(Exception):
    """The test class is set up wrongly (a fixture missing or returning the wrong thing).

    Distinct from ``ConformanceFailure``: this is about the test, not the plugin under test.
    """


def checks(req_id: str) -> Callable[[F], F]:
    """Mark a kit method as the check of one requirement (validated at import time)."""
    req = requirement(req_id)

    def mark(fn: F) -> F:
        setattr(fn, _ATTR, req)
        return fn

    return mark


def requirement_of(fn: object) -> Requirement | None:
    """The requirement a kit method checks, or None for an ordinary method."""
    found = getattr(fn, _ATTR, None)
    return found if isinstance(found, Requirement) else None


class PluginNotLoadable(Exception):
    """The plugin under test (or a companion) cannot even be registered or asked for its
    sections, so no requirement can be checked: the message is the host's recorded failure."""


class MissingFixture(KitUsageError, NotImplementedError):
    """A required fixture was not defined by the implementer's class (the fsspec/pandas
    convention: the base fixture raises ``NotImplementedError`` saying what to return)."""


def required_fixture(owner: object, name: str, doc: str | None) -> MissingFixture:
    """The error a required fixture raises when the implementer did not override it."""
    cls = type(owner).__name__
    what = " ".join((doc or "").split())
    return MissingFixture(
        f"{cls} must define the fixture {name!r} (a method decorated with @pytest.fixture in the "
        f"class): {what}"
    )


class ConformanceBase:
    """Shared by every aggregate: requirement parametrisation, known gaps, capability skips."""

    #: Requirements this implementation knowingly does not meet: ``{id: reason}``. Each becomes a
    #: strict xfail: the check still runs, and fixing the gap without removing the entry fails.
    known_gaps: ClassVar[Mapping[str, str]] = {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        req = requirement_of(metafunc.function)
        if req is None:
            return
        gaps = dict(type(self).known_gaps)
        for gap in gaps:
            if gap not in REQUIREMENTS:
                near = difflib.get_close_matches(gap, list(REQUIREMENTS), n=1)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise KitUsageError(
                    f"{type(self).__name__}.known_gaps names {gap!r}, which is not a requirement id{hint}"
                )
        marks: list[pytest.MarkDecorator] = []
        if req.id in gaps:
            marks.append(
                pytest.mark.xfail(
                    reason=f"known gap {req.id}: {gaps[req.id]}", strict=True, raises=AssertionError
                )
            )
        metafunc.parametrize("requirement", [pytest.param(req, id=req.id, marks=marks)])

    def require_capability(self, req: Requirement, declared: bool, how: str) -> None:
        """Skip ``req`` when its optional capability is not declared, naming the capability."""
        if req.capability is not None and not declared:
            pytest.skip(f"capability {req.capability!r} not declared ({how}); {req.id} not checked")


class DeclaredCapabilities(ConformanceBase):
    """A kit whose implementer lists its optional capabilities in ``capabilities``: a name the
    kit does not know (``known_capabilities``) is refused at collection, and a requirement on an
    undeclared capability is skipped, saying what to add. (The store, records and runtime kits;
    written once here, they had three copies.)"""

    #: The optional capabilities this kit knows; each kit sets it.
    known_capabilities: ClassVar[frozenset[str]] = frozenset()
    #: The optional capabilities the implementation has; undeclared ones skip their checks.
    capabilities: ClassVar[frozenset[str]] = frozenset()

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        known = type(self).known_capabilities
        unknown = set(type(self).capabilities) - known
        if unknown:
            raise KitUsageError(
                f"{type(self).__name__}.capabilities names {sorted(unknown)}; known capabilities: "
                f"{sorted(known)}"
            )
        super().pytest_generate_tests(metafunc)

    def _require(self, req: Requirement) -> None:
        if req.capability is not None:
            self.require_capability(
                req,
                req.capability in type(self).capabilities,
                f'add "{req.capability}" to {type(self).__name__}.capabilities',
            )
