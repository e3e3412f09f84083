"""``ContextAssembler``: the projection for runtimes that are not LangGraph (ADR D8).

An external runtime (ACP, a hand-written loop, another framework) owns its session state and
its model calls; it asks the assembler for the two things contextplane owns: the stable
prefix, built once, and the projected context. The assembler is a thin layer over a
``contextplane.runtime.Runtime`` (``self.runtime``), the same wiring the native middleware
holds: per turn it builds one ``ProjectionRequest`` (surface ``EXTERNAL``) and composes it
with ``Runtime.compose``, so for identical inputs the two surfaces produce byte-identical
projected text and identical records. Per model call it calls ``Runtime.deliver`` with the
plain-message codec, which strips legacy context frames from the history, places the
projection last, and lets the records observer write the prompt snapshot.

The caller sends the delivered messages (the prefix as the system prompt, cacheable), for
this request only, never into its stored history. An async runtime calls ``aassemble`` and
``adeliver``: the same results, composed by ``Runtime.acompose``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import attrs

from contextplane.authority import StablePrefix
from contextplane.config import Config
from contextplane.delivery import PLAIN
from contextplane.plugins import PluginHost, get_host
from contextplane.projection import ProjectedContext
from contextplane.request import BuildContext, ProjectionRequest, Surface
from contextplane.runtime import Runtime
from contextplane.signatures import parameters_of


@attrs.frozen
class Source:
    """One delivered item: which section it came from and its id (for attribution UIs)."""

    section: str
    item_id: str


@attrs.frozen
class Assembly:
    """What ``assemble`` returns.

    It still unpacks (and indexes) as the 3-tuple ``(stable_prefix, projected_context,
    sources)`` it used to be; ``messages`` is the history as delivered to the model call:
    without context frames, the projection message last.
    """

    stable_prefix: StablePrefix
    projected_context: ProjectedContext
    sources: tuple[Source, ...]
    messages: tuple[Any, ...] = attrs.field(default=(), converter=tuple)

    def _triple(self) -> tuple[StablePrefix, ProjectedContext, tuple[Source, ...]]:
        return (self.stable_prefix, self.projected_context, self.sources)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._triple())

    def __len__(self) -> int:
        return 3

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Any, ...]: ...
    def __getitem__(self, index: int | slice) -> Any:
        return self._triple()[index]


class ContextAssembler:
    """Builds the stable prefix once, composes one projection per turn, delivers it per call.

    ``backend`` is where the records go (injection log, prompt snapshots, trajectory); by
    default the backend ``knowledge_store`` belongs to, if any.
    """

    def __init__(
        self,
        *,
        host: PluginHost | None = None,
        config: Config | None = None,
        knowledge_store: Any = None,
        skills_index: Sequence[Any] | None = None,
        tools: Sequence[str] = (),
        tool_descriptions: Mapping[str, str] | None = None,
        backend: Any = None,
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
        self.backend = backend
        self.project = project
        self.budget_tokens = budget_tokens
        self.context_window = context_window
        #: The wiring every turn shares: store and backend resolved once, the prefix built once.
        self.runtime = Runtime(
            host=self.host,
            config=self.config,
            backend=backend,
            knowledge_store=knowledge_store,
            skills_index=skills_index,
            build=self.build_context,
        )

    @property
    def stable_prefix(self) -> StablePrefix:
        """Built on first use, then reused for the life of the assembler (ADR D1)."""
        prefix = self.runtime.prefix
        assert isinstance(prefix, StablePrefix)  # built from ``build_context``
        return prefix

    def request(
        self,
        query: str,
        *,
        session_id: str = "",
        turn_index: int = 0,
        state: Mapping[str, Any] | None = None,
        incognito: bool = False,
        goal_turn: bool = False,
        record: bool = True,
    ) -> ProjectionRequest:
        """The turn's ``ProjectionRequest`` (surface ``EXTERNAL``)."""
        return self.runtime.request(
            query,
            state=state,
            session_id=session_id,
            turn_index=turn_index,
            project=self.project,
            surface=Surface.EXTERNAL,
            incognito=incognito,
            goal_turn=goal_turn,
            budget_tokens=self.budget_tokens,
            context_window=self.context_window,
            record=record,
            extra={"reason": "turn"},
        )

    def _call(
        self,
        query: str,
        *,
        session_id: str = "",
        turn_index: int = 0,
        state: Mapping[str, Any] | None = None,
        incognito: bool = False,
        goal_turn: bool = False,
        record: bool = True,
        history: Sequence[Any] = (),
        call_index: int = 0,
    ) -> tuple[ProjectionRequest, Sequence[Any], int]:
        """The parameters of ``assemble`` and ``aassemble``: the turn's request, and the call
        it is delivered to (``history``, ``call_index``)."""
        request = self.request(
            query,
            session_id=session_id,
            turn_index=turn_index,
            state=state,
            incognito=incognito,
            goal_turn=goal_turn,
            record=record,
        )
        return request, history, call_index

    @parameters_of(_call)
    def assemble(self, *args: Any, **kwargs: Any) -> Assembly:
        """Compose this turn's projection for ``query`` and deliver it to model call
        ``call_index`` after ``history`` (plain ``{"role", "content"}`` messages).

        ``record`` has the records observer write the injection-log row and the trajectory
        entry (never for incognito) and the snapshot of this call; ``record=False`` records
        nothing (a preview). Later calls of the same turn go through ``deliver``, not here:
        composing again would log the turn twice."""
        request, history, call_index = self._call(*args, **kwargs)
        turn = self.runtime.compose(request)
        delivered = self.runtime.deliver(turn, history, PLAIN, call_index=call_index)
        return self._assembly(turn.projection, delivered.messages)

    @parameters_of(_call)
    async def aassemble(self, *args: Any, **kwargs: Any) -> Assembly:
        """``assemble`` for an async runtime (``Runtime.acompose``, then ``adeliver``): the same
        ``Assembly`` for the same inputs, without blocking the loop while sections read memory
        and the records are written."""
        request, history, call_index = self._call(*args, **kwargs)
        turn = await self.runtime.acompose(request)
        delivered = await self.runtime.adeliver(turn, history, PLAIN, call_index=call_index)
        return self._assembly(turn.projection, delivered.messages)

    def _assembly(self, projection: ProjectedContext, messages: Sequence[Any]) -> Assembly:
        sources = tuple(Source(s.name, i) for s in projection.sections for i in s.item_ids)
        return Assembly(self.stable_prefix, projection, sources, messages)

    def deliver(
        self, projection: ProjectedContext, history: Sequence[Any] = (), *, call_index: int
    ) -> list[Any]:
        """The messages for one model call of the turn ``projection`` was composed for:
        ``history`` without context frames, then the projection as a marked user message.
        Writes the call's snapshot when the projection was composed with ``record``."""
        return self.runtime.deliver(projection, history, PLAIN, call_index=call_index).messages

    async def adeliver(
        self, projection: ProjectedContext, history: Sequence[Any] = (), *, call_index: int
    ) -> list[Any]:
        """``deliver`` for an async runtime: the same messages; the snapshot is written without
        blocking the loop."""
        return (await self.runtime.adeliver(projection, history, PLAIN, call_index=call_index)).messages
