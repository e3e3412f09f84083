"""Operator guidelines (ADR D3, authority 50): domain-specific behavioural rules.

From ``prompt.guidelines`` (inline text) or ``prompt.guidelines_path`` (a file; a configured
file that does not exist is a ``ConfigError`` naming it). Last in authority: anything above
wins where they conflict.
"""

from __future__ import annotations

from collections.abc import Callable

from contextplane.section import BuildContext, ConfigError, PromptSection, hookimpl

NAME = "operator_guidelines"
AUTHORITY = 50


def render(ctx: BuildContext) -> str:
    prompt = ctx.config.prompt
    parts = []
    if prompt.guidelines:
        parts.append(prompt.guidelines.strip())
    if prompt.guidelines_path:
        path = ctx.config.resolve_path(prompt.guidelines_path)
        try:
            parts.append(path.read_text(encoding="utf-8").strip())
        except OSError:
            raise ConfigError(
                f"prompt.guidelines_path names {path}, which cannot be read: fix the path"
            ) from None
    if not parts:
        return ""
    return "Operator guidelines:\n" + "\n".join(parts)


SECTION = PromptSection(NAME, render, authority=AUTHORITY, description="Operator rules for this deployment.")


@hookimpl
def register_prompt_sections(register: Callable[[PromptSection], None]) -> None:
    register(SECTION)
