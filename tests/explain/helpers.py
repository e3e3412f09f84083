"""A small deployment for explain and replay tests: the standard memory sections, a real backend."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contextplane import PluginHost, ProjectedContext, compose_projected_context, plugin_host_with
from contextplane.backends.sqlite import SQLiteBackend
from contextplane.config import Config, structure
from contextplane_sections import always_on, prior_sessions, retrieved, working_state

MEMORY_SECTIONS = [working_state, always_on, prior_sessions, retrieved]


def config(**context: Any) -> Config:
    return structure({"context": {"context_window": 200_000, "project": "web", **context}})


def host_with(cfg: Config, *extra: object, sections: list[object] | None = None) -> PluginHost:
    return plugin_host_with([*(MEMORY_SECTIONS if sections is None else sections), *extra], cfg)


@contextlib.contextmanager
def backend_at(path: Path, cfg: Config, **kw: Any) -> Iterator[SQLiteBackend]:
    backend = SQLiteBackend(path, config=cfg, **kw)
    try:
        yield backend
    finally:
        backend.close()


def turn(
    host: PluginHost, backend: Any, query: str, *, session: str = "s1", index: int = 1, **kw: Any
) -> ProjectedContext:
    """One recorded turn (injection row and turn inputs; no model call)."""
    return compose_projected_context(
        query,
        backend,
        None,
        kw.pop("state", {"goal": "Ship it"}),
        session_id=session,
        turn_index=index,
        host=host,
        **kw,
    )
