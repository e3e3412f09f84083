"""``ContextAssembler``: the projection for runtimes that are not LangGraph (ADR D8).

An external runtime (ACP, a hand-written loop, another framework) owns its session state and
its model calls; it asks the assembler for the two things contextplane owns: the stable
prefix, built once, and the projected context, composed per turn by the same
``compose_projected_context`` the native middleware calls. For identical inputs the two
surfaces produce byte-identical projected text.

The caller places them: the prefix as the system prompt (cacheable), the projection after
the last history block, for this request only, never into its stored history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import attrs

from contextplane.authority import StablePrefix, build_stable_prefix
from contextplane.config import Config
from contextplane.observability.snapshots import PromptRecorder
from contextplane.plugins import PluginHost, get_host
from contextplane.projection import ProjectedContext, compose_projected_context
from contextplane.request import BuildContext, Mode


@attrs.frozen
class Source:
    """One delivered item: which section it came from and its id (for attribution UIs)."""

    section: str
    item_id: str


class Assembly(NamedTuple):
    """What ``assemble`` returns; unpacks as ``(stable_prefix, projected_context, sources)``."""

    stable_prefix: StablePrefix
    projected_context: ProjectedContext
    sources: tuple[Source, ...]


class ContextAssembler:
    """Builds the stable prefix once and composes one projection per turn."""

    def __init__(
        self,
        *,
        host: PluginHost | None = None,
        config: Config | None = None,
        knowledge_store: Any = None,
        skills_index: Sequence[Any] | None = None,
        tools: Sequence[str] = (),
        tool_descriptions: Mapping[str, str] | None = None,
        recorder: PromptRecorder | None = None,
        project: str | None = None,
        budget_tokens: int | None = None,
        context_window: int | None = None,
    ) -> None:
        self.host = host if host is not None else get_host(config)
        self.config = config if config is not None else self.host.config
        self.knowledge_store = knowledge_store
        self.skills_index = skills_index
        self.build_context = BuildContext(
            config=self.config, tools=tuple(tools), tool_descriptions=dict(tool_descriptions or {})
        )
        self.recorder = recorder
        self.project = project
        self.budget_tokens = budget_tokens
        self.context_window = context_window
        self._prefix: StablePrefix | None = None

    @property
    def stable_prefix(self) -> StablePrefix:
        """Built on first use, then reused for the life of the assembler (ADR D1)."""
        if self._prefix is None:
            self._prefix = build_stable_prefix(self.host, self.build_context)
        return self._prefix

    def assemble(
        self,
        query: str,
        *,
        session_id: str = "",
        turn_index: int = 0,
        state: Mapping[str, Any] | None = None,
        incognito: bool = False,
        goal_turn: bool = False,
        record: bool = True,
        call_index: int = 0,
    ) -> Assembly:
        """Compose this turn's projection for ``query``; ``record`` notifies the injection log
        (never for incognito) and, with a recorder, writes a snapshot for call ``call_index``."""
        projection = compose_projected_context(
            query,
            self.knowledge_store,
            self.skills_index,
            state or {},
            incognito=incognito,
            goal_turn=goal_turn,
            budget_tokens=self.budget_tokens,
            record=record,
            session_id=session_id,
            turn_index=turn_index,
            project=self.project,
            mode=Mode.INCOGNITO if incognito else Mode.GOAL_TURN if goal_turn else Mode.EXTERNAL,
            context_window=self.context_window,
            host=self.host,
            config=self.config,
        )
        prefix = self.stable_prefix
        if record and self.recorder is not None:
            turn = self.recorder.begin_turn(projection, query=query, reason="external")
            ref = self.recorder.register_prefix(prefix, session_id=session_id, incognito=incognito)
            self.recorder.capture(
                session_id=session_id,
                turn_index=turn_index,
                call_index=call_index,
                prefix=ref,
                turn=turn,
                incognito=incognito,
            )
        sources = tuple(Source(s.name, i) for s in projection.sections for i in s.item_ids)
        return Assembly(prefix, projection, sources)
