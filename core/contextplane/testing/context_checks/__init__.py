"""Conformance checks of context sections (ADR D6): the draft, the budget, the boundaries.

Each check composes through ``compose_projected_context`` on a private plugin host, so a
section passes exactly when it behaves in a real turn. Three groups: what one draft is
(``ContextDraftChecks``), how the section sheds under the budget (``ContextBudgetChecks``),
and what must never cross a boundary (``ContextIsolationChecks``).

Every composition a check makes is made through both paths, ``compose_projected_context`` and
``acompose_projected_context``, and a difference fails the check as CTX-ASYNC-PARITY: a
runtime may take either path, so every scenario a check sets up must hold on both. (Declaring
CTX-ASYNC-PARITY a known gap checks the sync path alone.)

Split by job: ``base`` (the harness, the author's fixtures, the parity comparison), ``drafts``,
``budget`` and ``isolation`` (one group of checks each). This package is the import path the
kit had as one module and re-exports every name it had; a name set here is set too in the module
that reads it (``contextplane.shims``). Being a package, its modules are covered by the kit's
assertion rewriting (``contextplane.testing`` registers the package name).
"""

from __future__ import annotations

from contextplane.shims import patch_through
from contextplane.testing.context_checks import base, budget, drafts, isolation
from contextplane.testing.context_checks.base import (
    ContextSectionHarness,
    SpyStore,
    _budgets,
    _ContextSectionBase,
    _error_kind,
    _row_diff,
    _rows_of,
    async_difference,
    drafted,
    parity_difference,
)
from contextplane.testing.context_checks.budget import (
    ContextBudgetChecks,
    _room_freed,
    _shed_alone,
)
from contextplane.testing.context_checks.drafts import (
    ContextDraftChecks,
)
from contextplane.testing.context_checks.isolation import (
    _INSTRUCTION_TOKEN,
    _ROLE_AT_LINE_START,
    _TAG,
    ContextIsolationChecks,
)

patch_through(
    __name__,
    (
        base,
        drafts,
        budget,
        isolation,
    ),
)

__all__ = [
    "_INSTRUCTION_TOKEN",
    "_ROLE_AT_LINE_START",
    "_TAG",
    "ContextBudgetChecks",
    "ContextDraftChecks",
    "ContextIsolationChecks",
    "ContextSectionHarness",
    "SpyStore",
    "_ContextSectionBase",
    "_budgets",
    "_error_kind",
    "_room_freed",
    "_row_diff",
    "_rows_of",
    "_shed_alone",
    "async_difference",
    "base",
    "budget",
    "drafted",
    "drafts",
    "isolation",
    "parity_difference",
]
