"""Fit drafts to the budget, then render them inside their envelopes (ADR D6).

Split by job: ``rows`` (a row's text escaped, measured, cut to the row bound; the render order),
``plans`` (``SectionPlan`` per draft, the ``Layout`` of envelopes and its exact running total)
and ``shedding`` (``fit``, ``restore`` and the shed steps between). Each module's docstring says
the rules it keeps.

This package is also the import path the code had as one module, and re-exports every name it
had; a name set here (``monkeypatch.setattr(fitting, "escape_measured", ...)``) is set too in
the module that reads it (``contextplane.shims``). Names with a leading underscore are the
package's own, shared between its modules, not an API.
"""

from __future__ import annotations

from contextplane.fitting import plans, rows, shedding
from contextplane.fitting.plans import (
    _DELIVERY_ORDER,
    _ENVELOPE_TAG,
    _NO_LINES,
    _NONE,
    _ROW_ID,
    _SIZE,
    _TEXT,
    ENVELOPE_SEPARATOR,
    Layout,
    SectionPlan,
)
from contextplane.fitting.rows import (
    _LINE,
    _LINE_LEN,
    CONTINUATION,
    CUT_MARKER,
    ROW_PREFIX,
    _line_len,
    _line_of,
    _lines,
    _rank_order,
    _render_order,
    _row_key,
    cut_row,
    escape_measured,
    format_row,
    log,
)
from contextplane.fitting.shedding import (
    _CUR,
    _DEGRADE,
    _DROP_ROWS,
    _DROP_SECTION,
    _MIN_LINE,
    _NEVER,
    _SHORT,
    _above_the_first_kept_shed,
    _degrade,
    _degrade_all,
    _degrade_away,
    _degrade_rows,
    _drop_rows,
    _drop_section,
    _drop_to,
    _give_back,
    fit,
    overflow_key,
    restore,
)
from contextplane.shims import patch_through
from contextplane.types import ShedStep, Step

patch_through(__name__, (rows, plans, shedding))

__all__ = [
    "CONTINUATION",
    "CUT_MARKER",
    "ENVELOPE_SEPARATOR",
    "ROW_PREFIX",
    "_CUR",
    "_DEGRADE",
    "_DELIVERY_ORDER",
    "_DROP_ROWS",
    "_DROP_SECTION",
    "_ENVELOPE_TAG",
    "_LINE",
    "_LINE_LEN",
    "_MIN_LINE",
    "_NEVER",
    "_NONE",
    "_NO_LINES",
    "_ROW_ID",
    "_SHORT",
    "_SIZE",
    "_TEXT",
    "Layout",
    "SectionPlan",
    "ShedStep",
    "Step",
    "_above_the_first_kept_shed",
    "_degrade",
    "_degrade_all",
    "_degrade_away",
    "_degrade_rows",
    "_drop_rows",
    "_drop_section",
    "_drop_to",
    "_give_back",
    "_line_len",
    "_line_of",
    "_lines",
    "_rank_order",
    "_render_order",
    "_row_key",
    "cut_row",
    "escape_measured",
    "fit",
    "format_row",
    "log",
    "overflow_key",
    "plans",
    "restore",
    "rows",
    "shedding",
]
