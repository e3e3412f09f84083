"""``compose_projected_context``: the one projection every runtime surface calls (ADR D8).

The projected context is derived, per request, and never persisted (ADR D2). The composition
itself is ``contextplane.engine``: ``engine.assembly`` (the request checks, the budget with
deterministic shedding, the envelopes, the reports), ``engine.drafting`` (every provider's
draft with its failures isolated, all reading memory through one point-in-time view of the
store) and ``engine.driver`` (the sync driver). This module is the import path callers and
third parties have always used, and re-exports every name they import from it.
``compose_projected_context`` (D8) composes on the default runtime its store carries
(``contextplane.default_runtime``), so its backend is resolved once per store, not per turn.

Why the module keeps a class of its own: tests patch names on it
(``monkeypatch.setattr(projection, "resolve_backend", counting)``); when this was one module,
the patch reached the function that read the name. Setting a name here sets it too in each
engine module that holds the same object under that name, so a patch keeps reaching the code.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Final

from contextplane.backends import resolve_backend
from contextplane.default_runtime import compose_projected_context
from contextplane.engine import assembly, drafting, driver
from contextplane.engine.assembly import (
    Drafting,
    Skipped,
    ToDraft,
    _check_envelopes,
    _checked,
    _resolve,
    assemble,
    d8_request,
    needs_memory,
    prepare,
    row_limit,
    section_reports,
    split,
)
from contextplane.engine.drafting import (
    as_rows,
    awaitable,
    consistent_view,
    draft_failed,
    log,
    position_of,
    warn_no_view,
)
from contextplane.engine.driver import compose, compose_turn
from contextplane.types import InjectionRecord, ProjectedContext, SectionReport, approx_tokens

#: The old private name of ``engine.drafting.as_rows`` (tests import it).
_as_rows = as_rows

#: The modules a name set here is set in too.
HOMES: Final[tuple[types.ModuleType, ...]] = (assembly, drafting, driver)

_ABSENT: Final = object()


class _Shim(types.ModuleType):
    """This module, with ``setattr`` reaching the homes of the name (see the module docstring)."""

    def __setattr__(self, name: str, value: Any) -> None:
        old = self.__dict__.get(name, _ABSENT)
        super().__setattr__(name, value)
        if old is _ABSENT:
            return
        for home in HOMES:
            if home.__dict__.get(name, _ABSENT) is old:
                setattr(home, name, value)


sys.modules[__name__].__class__ = _Shim

__all__ = [
    "Drafting",
    "InjectionRecord",
    "ProjectedContext",
    "SectionReport",
    "Skipped",
    "ToDraft",
    "_as_rows",
    "_check_envelopes",
    "_checked",
    "_resolve",
    "approx_tokens",
    "as_rows",
    "assemble",
    "awaitable",
    "compose",
    "compose_projected_context",
    "compose_turn",
    "consistent_view",
    "d8_request",
    "draft_failed",
    "log",
    "needs_memory",
    "position_of",
    "prepare",
    "resolve_backend",
    "row_limit",
    "section_reports",
    "split",
    "warn_no_view",
]
