"""Tool guidance (ADR D3, authority 40): usage notes for the tools bound at build time.

Capability gating: the section names only tools in ``BuildContext.tools``. Guidance configured
for a tool that is not bound (``[plugin.tool_guidance.guidance]``) is left out, so the prompt
never advertises a capability the agent does not have.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from contextplane.section import BuildContext, ConfigError, PromptSection, hookimpl

NAME = "tool_guidance"
AUTHORITY = 40


def configured_guidance(ctx: BuildContext) -> Mapping[str, str]:
    guidance = ctx.config.plugin_settings(NAME).get("guidance", {})
    if not isinstance(guidance, Mapping) or not all(isinstance(v, str) for v in guidance.values()):
        raise ConfigError(
            "invalid value for plugin.tool_guidance.guidance: expected a table of tool name = text"
        )
    return guidance


def render(ctx: BuildContext) -> str:
    if not ctx.tools:
        return ""
    guidance = configured_guidance(ctx)
    lines = ["Tools available in this session:"]
    for tool in sorted(set(ctx.tools)):
        note = guidance.get(tool) or ctx.tool_descriptions.get(tool, "")
        lines.append(f"- {tool}: {note}" if note else f"- {tool}")
    return "\n".join(lines)


SECTION = PromptSection(
    NAME, render, authority=AUTHORITY, description="Per-tool usage notes, bound tools only."
)


@hookimpl
def register_prompt_sections(register: Callable[[PromptSection], None]) -> None:
    register(SECTION)
