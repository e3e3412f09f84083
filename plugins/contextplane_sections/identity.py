"""Identity (ADR D3, authority 10): the operator-authored SOUL.md, verbatim.

The path is ``prompt.soul_path`` (relative to the config file). A configured path that does
not exist is a ``ConfigError`` naming the path: an agent silently started without its persona
is worse than one that refuses to start. With no path configured the section is empty and one
warning says so.
"""

from __future__ import annotations

from collections.abc import Callable

from contextplane.section import BuildContext, ConfigError, PluginWarning, PromptSection, hookimpl, warn_once

NAME = "identity"
AUTHORITY = 10


def render(ctx: BuildContext) -> str:
    configured = ctx.config.prompt.soul_path
    if not configured:
        warn_once(
            ("identity", "unset"),
            "prompt.soul_path is not set, so the stable prefix has no identity section",
            PluginWarning,
        )
        return ""
    path = ctx.config.resolve_path(configured)
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ConfigError(
            f"prompt.soul_path names {path}, which does not exist: write the agent's SOUL.md there "
            "or fix the path"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"prompt.soul_path: cannot read {path}: {exc}") from None


SECTION = PromptSection(NAME, render, authority=AUTHORITY, description="The agent's persona (SOUL.md).")


@hookimpl
def register_prompt_sections(register: Callable[[PromptSection], None]) -> None:
    register(SECTION)
