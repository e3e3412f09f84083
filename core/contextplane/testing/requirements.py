"""Every requirement the conformance kit checks: a stable id and the one contract sentence.

Why ids: a failure has to tell a plugin or store author *which* promise they broke, in words
they can look up (docs/conformance.md lists the same table), and ``pytest -k CTX-SHED-ORDER``
has to select exactly that check. Ids never change meaning once published; a new rule gets a
new id. The sentence is the contract as the ADR states it, not a description of the test.

The tables themselves live in ``section_requirements``, ``store_requirements`` and
``runtime_requirements`` (one per kind of author); this module is the API over them and keeps
``ConformanceFailure`` (its name, ``contextplane.testing.requirements.ConformanceFailure``, is in
every failure report).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final, NoReturn

import attrs

from contextplane.testing.requirement_entry import Kind
from contextplane.testing.runtime_requirements import RUNTIME
from contextplane.testing.section_requirements import CONTEXT, PROMPT
from contextplane.testing.store_requirements import RECORDS, STORE


class ConformanceFailure(AssertionError):
    """A requirement was not met. The message starts with the id, then the sentence, then detail.

    An ``AssertionError`` subclass so pytest reports it as a failure (not an error) and a
    strict xfail for a known gap catches it like any failed assertion.
    """


@attrs.frozen
class Requirement:
    """One checkable promise: the id used in test ids, the sentence, and what it needs."""

    id: str
    kind: Kind
    sentence: str
    #: The optional capability this requirement needs; without it the check is skipped.
    capability: str | None = None

    def message(self, detail: str) -> str:
        """The failure text: id, sentence, then what the kit saw."""
        return f"[{self.id}] {self.sentence}\n  {detail}"

    def fail(self, detail: str) -> NoReturn:
        """Fail the running check, naming this requirement."""
        raise ConformanceFailure(self.message(detail))

    def check(self, condition: object, detail: str) -> None:
        """Fail with ``detail`` unless ``condition`` holds."""
        if not condition:
            self.fail(detail)

    @property
    def reference(self) -> str:
        """Where the requirement is explained: the reference's section, in the copy of
        docs/conformance.md installed with the kit (``conformance_doc``), so a failure points to
        text the reader has, not to a source tree they may not."""
        return f"{conformance_doc()}#{self.id.lower()}"

    def __str__(self) -> str:
        return self.id


def conformance_doc() -> Path:
    """The kit's reference, docs/conformance.md: the copy a wheel ships beside this module
    (``contextplane/testing/conformance.md``, by the wheel's ``force-include``), else the
    source tree's (an editable install, a checkout)."""
    here = Path(__file__).resolve().parent
    shipped = here / "conformance.md"
    if shipped.is_file():
        return shipped
    return here.parents[2] / "docs" / "conformance.md"


_ALL: tuple[Requirement, ...] = tuple(
    Requirement(*entry) for entry in (*PROMPT, *CONTEXT, *STORE, *RECORDS, *RUNTIME)
)

#: Every requirement by id, in documentation order.
REQUIREMENTS: Final[Mapping[str, Requirement]] = MappingProxyType({r.id: r for r in _ALL})

#: Capabilities a store may declare; the kit skips the checks of an undeclared one.
STORE_CAPABILITIES: Final[frozenset[str]] = frozenset(
    {"migration", "concurrent_writes", "consistent_read", "vector_space", "exact_restore", "following"}
)
#: Capabilities a backend may declare for the records kit.
RECORDS_CAPABILITIES: Final[frozenset[str]] = frozenset({"trajectory"})
#: Capabilities a runtime adapter's harness may declare for the runtime kit.
RUNTIME_CAPABILITIES: Final[frozenset[str]] = frozenset({"tools", "incognito", "goal_turn", "resume"})


def requirement(req_id: str) -> Requirement:
    """The requirement with this id; a typo raises naming the nearest id."""
    try:
        return REQUIREMENTS[req_id]
    except KeyError:
        import difflib

        near = difflib.get_close_matches(req_id, list(REQUIREMENTS), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise KeyError(f"no conformance requirement {req_id!r}{hint}") from None


def requirements_of(kind: Kind) -> tuple[Requirement, ...]:
    """The requirements of one kind, in documentation order."""
    return tuple(r for r in _ALL if r.kind == kind)
