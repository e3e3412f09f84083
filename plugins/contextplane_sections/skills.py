"""Skills index (ADR D6 priority 3, ADR 0060): capability awareness, degrading to names.

Skills come from the runtime (``skills_index``: ``Skill`` objects, mappings with ``name`` and
``description``, or ``(name, description)`` pairs) or from ``skills.dir`` in the Agent Skills
layout: one folder per skill, each with a ``SKILL.md`` whose YAML front matter has ``name`` and
``description``. A malformed ``SKILL.md`` is skipped with one warning naming the file.

Under budget pressure every row first degrades to its name; only then are names dropped,
never below ``[plugin.skills] floor`` (default 10), behind a "+N more skills" marker. There is
no count cap: the origin project's count cap hid skill names the budget had room for.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

from contextplane.section import (
    Config,
    ContextSection,
    Draft,
    PluginWarning,
    ProjectionRequest,
    Row,
    Shed,
    hookimpl,
    warn_once,
)
from contextplane_sections.envelopes import AVAILABLE_SKILLS

NAME = "skills"
PRIORITY = 30
DEFAULT_FLOOR = 10


@attrs.frozen
class Skill:
    name: str
    description: str = ""
    path: str | None = None


def _front_matter(text: str) -> Mapping[str, Any] | None:
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        return None
    data = yaml.safe_load(text[3:end])
    return data if isinstance(data, Mapping) else None


def read_skill(path: Path) -> Skill | None:
    """Parse one SKILL.md; warn (once per file version) and return None when it is malformed."""
    try:
        stat = path.stat()
        meta = _front_matter(path.read_text(encoding="utf-8"))
        problem = None
        if meta is None:
            problem = "has no YAML front matter between '---' lines"
        elif not isinstance(meta.get("name"), str) or not meta["name"].strip():
            problem = "front matter has no 'name'"
        elif not isinstance(meta.get("description"), str):
            problem = "front matter has no 'description'"
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        problem = f"cannot be read: {type(exc).__name__}: {exc}".split("\n")[0]
        stat = None
        meta = None
    if problem is not None or meta is None:
        key = ("skill", str(path), stat.st_mtime_ns if stat else None)
        warn_once(key, f"skipping skill {path}: it {problem}", PluginWarning)
        return None
    return Skill(meta["name"].strip(), " ".join(str(meta["description"]).split()), str(path))


_cache: dict[str, tuple[tuple[tuple[str, int], ...], tuple[Skill, ...]]] = {}
_cache_lock = threading.Lock()


def load_skills_dir(directory: str | os.PathLike[str]) -> tuple[Skill, ...]:
    """Every well-formed skill under ``directory``, sorted by name (cached on file mtimes)."""
    root = Path(directory)
    if not root.is_dir():
        warn_once(
            ("skills-dir", str(root)),
            f"skills.dir names {root}, which is not a directory, so the skills index is empty; "
            "create it or fix skills.dir",
            PluginWarning,
        )
        return ()
    files = sorted(root.glob("*/SKILL.md"))
    signature = tuple((str(f), f.stat().st_mtime_ns) for f in files)
    with _cache_lock:
        hit = _cache.get(str(root))
        if hit is not None and hit[0] == signature:
            return hit[1]
    skills = tuple(sorted((s for s in (read_skill(f) for f in files) if s is not None), key=lambda s: s.name))
    with _cache_lock:
        _cache[str(root)] = (signature, skills)
    return skills


def as_skill(item: Any) -> Skill:
    if isinstance(item, Skill):
        return item
    if isinstance(item, Mapping):
        return Skill(str(item["name"]), str(item.get("description", "")))
    if isinstance(item, tuple | list) and len(item) == 2:
        return Skill(str(item[0]), str(item[1]))
    name = getattr(item, "name", None)
    if isinstance(name, str):
        return Skill(name, str(getattr(item, "description", "")))
    raise TypeError(
        f"cannot read a skill from {type(item).__name__}; pass Skill, a mapping or (name, description)"
    )


def skills_for(request: ProjectionRequest) -> Iterable[Skill]:
    if request.skills_index is not None:
        return [as_skill(i) for i in request.skills_index]
    directory = request.config.skills.dir
    if directory:
        return load_skills_dir(request.config.resolve_path(directory))
    return []


def draft(request: ProjectionRequest) -> Draft:
    skills = list(skills_for(request))
    rows = [
        Row(s.name, i, f"{s.name}: {s.description}" if s.description else s.name, short=s.name)
        for i, s in enumerate(skills, start=1)
    ]
    return Draft(rows, {"skills": len(rows)})


async def adraft(request: ProjectionRequest) -> Draft:
    """``draft`` for the async composition: a skills index the runtime handed over is formatted
    on the loop (no I/O); reading ``skills.dir`` (a glob and a stat per skill) runs in a thread."""
    if request.skills_index is not None:
        return draft(request)
    return await asyncio.to_thread(draft, request)


def make_section(config: Config) -> ContextSection:
    floor = config.plugin_settings(NAME).get("floor", DEFAULT_FLOOR)
    if isinstance(floor, bool) or not isinstance(floor, int) or floor < 0:
        from contextplane.section import ConfigError

        raise ConfigError(
            f"invalid value for plugin.skills.floor: expected a whole number >= 0, got {floor!r}"
        )
    return ContextSection(
        NAME,
        priority=PRIORITY,
        shed=Shed.DEGRADE,
        draft=draft,
        adraft=adraft,
        envelope=AVAILABLE_SKILLS,
        floor=floor,
        more_marker="+{n} more skills (ask for the full list)",
        description="The skills index: name and description, degrading to names under pressure.",
    )


@hookimpl
def register_context_sections(register: Callable[[ContextSection], None], config: Config) -> None:
    register(make_section(config))
