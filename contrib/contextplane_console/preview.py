"""The preview: compose a projection for a query with a turn's options, and record nothing.

It composes through the console's ``contextplane.runtime.Runtime`` (``record=False``), the same
composition every runtime surface calls, so the budget table shown is the one a model call
with these options would get; no injection-log row, snapshot or trajectory entry is written
for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from contextplane import (
    BuildContext,
    ProjectedContext,
    StablePrefix,
    build_stable_prefix,
)
from contextplane.memory.model import validate_namespace
from contextplane.observability.snapshots import budget_rows, shed_steps
from contextplane.runtime import Runtime
from contextplane_console.errors import refuse
from contextplane_console.params import (
    checkbox,
    json_bool,
    json_int,
    json_text,
    only_fields,
    required_text,
    whole,
)

DEFAULT_SESSION: Final[str] = "console-preview"
FIELDS: Final[tuple[str, ...]] = (
    "query",
    "incognito",
    "goal_turn",
    "context_window",
    "budget_tokens",
    "session_id",
    "project",
)


@attrs.frozen
class PreviewOptions:
    """One preview's turn: the query and the options a runtime would pass."""

    query: str
    incognito: bool = False
    goal_turn: bool = False
    #: The model's context window in tokens; None uses ``context.context_window``.
    context_window: int | None = None
    #: An explicit budget in tokens (0 = unbounded); None derives it from the window.
    budget_tokens: int | None = None
    session_id: str = DEFAULT_SESSION
    #: The turn's project scope (the id after ``project:``); None uses ``context.project``.
    project: str | None = None

    @classmethod
    def from_form(cls, form: Mapping[str, str]) -> PreviewOptions:
        project = (form.get("project") or "").strip() or None
        return cls(
            query=required_text(form, "query", "the text to compose a projection for"),
            incognito=checkbox(form, "incognito"),
            goal_turn=checkbox(form, "goal_turn"),
            context_window=whole(form, "context_window", default=None, lo=1),
            budget_tokens=whole(form, "budget_tokens", default=None, lo=0),
            session_id=(form.get("session_id") or "").strip() or DEFAULT_SESSION,
            project=project_id(project),
        )

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> PreviewOptions:
        only_fields(obj, FIELDS)
        query = json_text(obj, "query")
        if query is None or not query.strip():
            raise refuse("query", "required: the text to compose a projection for")
        return cls(
            query=query,
            incognito=json_bool(obj, "incognito"),
            goal_turn=json_bool(obj, "goal_turn"),
            context_window=json_int(obj, "context_window", lo=1),
            budget_tokens=json_int(obj, "budget_tokens", lo=0),
            session_id=json_text(obj, "session_id", default=DEFAULT_SESSION) or DEFAULT_SESSION,
            project=project_id(json_text(obj, "project")),
        )


def project_id(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    try:
        if value != value.strip():
            raise ValueError(value)
        validate_namespace(f"project:{value}", "project")
    except ValueError:
        raise refuse("project", f"{value!r} is not a project id (no surrounding spaces)") from None
    return value


@attrs.frozen
class Preview:
    options: PreviewOptions
    projection: ProjectedContext
    prefix: StablePrefix

    def summary(self) -> dict[str, Any]:
        """The budget summary: what was used of what budget, and whether it fit."""
        p = self.projection
        return {
            "used_chars": p.used_chars,
            "approx_tokens": p.approx_tokens,
            "budget_chars": p.budget_chars,
            "within_budget": p.within_budget,
            "shed_steps": len(p.overflow),
        }

    def budget(self) -> list[dict[str, Any]]:
        return budget_rows(self.projection)

    def overflow(self) -> list[dict[str, Any]]:
        return shed_steps(self.projection)

    def as_json(self) -> dict[str, Any]:
        return {
            "options": attrs.asdict(self.options),
            "summary": self.summary(),
            "budget": self.budget(),
            "overflow": self.overflow(),
            "stable_prefix": {
                "sha256": self.prefix.sha256,
                "sections": [attrs.asdict(s) for s in self.prefix.sections],
                "errors": list(self.prefix.errors),
            },
            "projected_context": self.projection.as_dict(),
        }


def run_preview(runtime: Runtime, options: PreviewOptions) -> Preview:
    """Compose for ``options`` against the runtime's memories, recording nothing."""
    request = runtime.request(
        options.query,
        incognito=options.incognito,
        goal_turn=options.goal_turn,
        budget_tokens=options.budget_tokens,
        context_window=options.context_window,
        session_id=options.session_id,
        project=options.project,
        record=False,
    )
    projection = runtime.compose(request).projection
    # Built here, not the runtime's: a preview tells no observer of a prefix.
    prefix = build_stable_prefix(runtime.host, BuildContext(config=runtime.config), notify=False)
    return Preview(options, projection, prefix)
