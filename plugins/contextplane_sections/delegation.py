"""Delegation roster (ADR D3, authority 30): the subagents the lead may delegate to.

Built from ``[[subagents]]`` in the configuration, listing only those with
``visible_to_lead = true``; a hidden subagent never appears in the lead's prompt.
"""

from __future__ import annotations

from collections.abc import Callable

from contextplane.section import BuildContext, PromptSection, hookimpl

NAME = "delegation_roster"
AUTHORITY = 30


def render(ctx: BuildContext) -> str:
    visible = sorted((s for s in ctx.config.subagents if s.visible_to_lead), key=lambda s: s.name)
    if not visible:
        return ""
    lines = ["Subagents you can delegate to (use the task tool with the subagent's name):"]
    for s in visible:
        lines.append(f"- {s.name}: {s.description}" if s.description else f"- {s.name}")
    return "\n".join(lines)


SECTION = PromptSection(
    NAME, render, authority=AUTHORITY, description="Visible subagents and when to delegate."
)


@hookimpl
def register_prompt_sections(register: Callable[[PromptSection], None]) -> None:
    register(SECTION)
