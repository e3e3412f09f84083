"""Section types: the two kinds of thing a plugin contributes.

A *prompt section* is part of the stable prefix (ADR D3). It is rendered once, when the
runtime is built, and its place comes from the authority order plus its ``before``/``after``
constraints, never from registration order.

A *context section* is part of the projected context (ADR D6). Each turn it produces a
*draft*: rows, each with an id, a rank and a text. The core fits the drafts to the budget by
shedding, as each section's ``shed`` behaviour says, then renders them inside envelopes.
Sections never render their own envelope, so the budget arithmetic and the escaping of
untrusted text live in one place.
"""

from __future__ import annotations

import enum
import inspect
import re
import types
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs

from contextplane.request import BuildContext, ProjectionRequest

_NAME = re.compile(r"^[a-z][a-z0-9_]*(?:[.-][a-z0-9_]+)*$")
_TAG = re.compile(r"^[a-z][a-z0-9_]*$")


#: The meta of a row given none: one shared read-only empty mapping, so the rows a provider
#: drafts every turn do not each allocate a dict that nothing writes.
_NO_META: Mapping[str, Any] = types.MappingProxyType({})


def _check_name(_inst: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError(
            f"invalid section {attribute.name} {value!r}: use lower-case letters, digits, '_', '.' or '-', "
            "starting with a letter (e.g. 'team_calendar')"
        )


def _check_tag(_inst: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not isinstance(value, str) or not _TAG.match(value):
        raise ValueError(
            f"invalid envelope {attribute.name} {value!r}: use lower-case letters, digits and '_', "
            "starting with a letter (e.g. 'injected_memory')"
        )


def _names(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


class Shed(enum.Enum):
    """How a context section gives up space when the projection is over budget.

    The core sheds sections from the lowest priority (largest number) up, exhausting each
    section's behaviour before touching the next, and re-measures after every step.
    """

    #: Never shed. If never-shed sections alone exceed the budget, one warning is emitted.
    NEVER = "never"
    #: Drop rows one at a time, lowest-ranked first; an empty section disappears.
    DROP_ROWS = "drop_rows"
    #: Replace rows by their short form one at a time (lowest-ranked first), then drop short
    #: rows down to the section's ``floor``, replacing them with a "+N more" marker.
    DEGRADE = "degrade"
    #: Drop the whole section in one step.
    DROP_SECTION = "drop_section"


@attrs.frozen
class Envelope:
    """The tag a group of context sections is wrapped in, with its trusted framing text.

    ``untrusted`` declares that the envelope holds data recalled from memory or fetched from
    outside. It is a declaration only: the core escapes every row either way, and what tells
    the model the content is reference data, never instructions, is the ``preamble``. It is
    part of the envelope's identity, so sections that share a tag must declare it alike.
    """

    tag: str = attrs.field(validator=_check_tag)
    preamble: str = ""
    untrusted: bool = False


@attrs.frozen
class Row:
    """One deliverable item of a context section.

    ``rank`` orders rows inside a section: 1 is the most important and is shed last. ``text``
    is raw (the core escapes it); ``short`` is the degraded form used by ``Shed.DEGRADE``.
    """

    id: str = attrs.field(converter=str)
    rank: float = attrs.field()
    text: str = attrs.field()
    short: str | None = None
    trust_tier: int = 0
    #: Free-form facts about the row (read-only and shared when none are given).
    meta: Mapping[str, Any] = attrs.field(default=_NO_META, eq=False, hash=False)

    @rank.validator
    def _check_rank(self, _attribute: attrs.Attribute[float], value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ValueError(f"row {self.id!r}: rank must be a number, got {value!r}")

    @text.validator
    def _check_text(self, _attribute: attrs.Attribute[str], value: str) -> None:
        if not isinstance(value, str):
            raise ValueError(f"row {self.id!r}: text must be str, got {type(value).__name__}")


def _row_tuple(value: Iterable[Row]) -> tuple[Row, ...]:
    return tuple(value)


@attrs.frozen
class Draft:
    """What a context section offers for one turn, before the budget is applied."""

    rows: tuple[Row, ...] = attrs.field(converter=_row_tuple, factory=tuple)
    #: Free-form facts about how the draft was made (e.g. a digest's fallback reason).
    meta: Mapping[str, Any] = attrs.field(factory=dict, eq=False, hash=False)
    #: This turn's heading, in place of the section's: for a heading that says what this
    #: turn's rows have in common, so each row need not repeat it (the retrieved section names
    #: the kind, trust and scope most of its rows share once). Escaped like row text, since
    #: it is built from stored values; counted against the budget like the section's heading.
    heading: str | None = attrs.field(default=None)
    #: The order rows are *rendered* in, when it is not rank order: a key of a row. Shedding
    #: still goes by rank (D6: the lowest-ranked row goes first); only the delivered rows are
    #: then laid out by this key (stable, so equal keys keep rank order). Why: memories read
    #: best in the order things happened, while the budget must keep the best-ranked ones.
    render_key: Callable[[Row], Any] | None = attrs.field(default=None, eq=False, hash=False)

    @heading.validator
    def _check_heading(self, _attribute: attrs.Attribute[str | None], value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise ValueError(f"Draft.heading must be str or None, got {type(value).__name__}")

    @render_key.validator
    def _check_key(self, _attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None and not callable(value):
            raise ValueError(
                f"Draft.render_key must be a function of a Row (or None), got {type(value).__name__}"
            )


class DraftMeta(dict[str, Any]):
    """A draft's ``meta`` as the core hands it to fitting, with the draft's layout choices
    (``heading``, ``render_key``) riding along: the composition passes (rows, meta) through
    both drafting loops, and this keeps the layout with them without widening every step.
    The section report reads it as a plain mapping."""

    __slots__ = ("heading", "render_key")

    def __init__(self, meta: Mapping[str, Any], heading: str | None, render_key: Callable[[Row], Any] | None):
        super().__init__(meta)
        self.heading = heading
        self.render_key = render_key


@attrs.frozen
class PromptSection:
    """A named part of the stable prefix with an optional position constraint."""

    name: str = attrs.field(validator=_check_name)
    render: Callable[[BuildContext], str] = attrs.field(eq=False)
    before: tuple[str, ...] = attrs.field(converter=_names, factory=tuple)
    after: tuple[str, ...] = attrs.field(converter=_names, factory=tuple)
    #: Where the section sits in the D3 authority order (lower wins). Standard sections use
    #: 10..50; third-party sections normally leave this ``None`` and use before/after.
    authority: int | None = None
    description: str = ""


@attrs.frozen
class ContextSection:
    """A named part of the projected context, with priority, shed behaviour and mode flags.

    How a provider runs is read off what it is, not declared beside it, so the declaration
    cannot disagree with the code: an ``async def draft`` is awaited (concurrently with the
    turn's other async providers, cancelled at ``context.provider_timeout_ms``); a plain
    ``draft`` is called in a worker thread by the async composition, since it may do blocking
    I/O, unless ``cheap=True`` says it only computes. ``adraft`` is for the provider that has
    both forms: each composition calls its native one, so the synchronous path pays nothing for
    the asynchronous one (the conformance kit checks that the two agree). The synchronous
    composition runs an async ``draft`` to completion on a private event loop. (When the turn's
    memory store reads in worker threads anyway, the async composition calls every section's
    synchronous ``draft`` in the turn's one worker thread instead: see ``aprojection``.)
    """

    name: str = attrs.field(validator=_check_name)
    #: Lower numbers are delivered first and shed last (working state is 10, retrieved 50).
    priority: int = attrs.field()
    shed: Shed = attrs.field(converter=Shed)
    #: ``(request) -> Draft | Iterable[Row]``, or an ``async def`` returning the same.
    draft: Callable[[ProjectionRequest], Draft | Iterable[Row] | Awaitable[Draft | Iterable[Row]]] = (
        attrs.field(eq=False)
    )
    envelope: Envelope = attrs.field()
    #: True when the rows come from memory, so incognito never calls ``draft``.
    carries_memory: bool = False
    #: True when goal (autonomous) turns never call ``draft`` (the prior-session digest).
    goal_suppressed: bool = False
    #: A heading line inside the envelope, e.g. "Always-on memories:"; trusted text.
    heading: str = ""
    #: An inner tag wrapping this section's rows inside the envelope, e.g. "prior_sessions".
    inner_tag: str | None = attrs.field(default=None)
    #: For ``Shed.DEGRADE``: the number of short rows that are never dropped.
    floor: int = attrs.field(default=0)
    #: The "+N more" marker for ``Shed.DEGRADE``; ``{n}`` is replaced by the hidden count.
    more_marker: str = "+{n} more"
    #: A declared upper bound on this section's rendered size for its documented inputs.
    max_chars: int | None = None
    description: str = ""
    #: The async form of a synchronous ``draft``: the same draft from the same request, for a
    #: provider whose I/O has both forms (the standard memory sections, over the store's
    #: ``search`` and ``asearch``). ``aprojection.acompose`` awaits it; ``compose`` calls ``draft``.
    adraft: Callable[[ProjectionRequest], Awaitable[Draft | Iterable[Row]]] | None = attrs.field(
        default=None, eq=False
    )
    #: True for a synchronous ``draft`` that only computes (microseconds, no I/O, no lock it
    #: may wait on): ``acompose`` calls it on the event loop instead of in a worker thread.
    cheap: bool = False

    @property
    def asynchronous(self) -> bool:
        """True when the async composition awaits this section (``adraft``, or an ``async def``
        ``draft``) rather than calling a synchronous ``draft``."""
        return self.adraft is not None or inspect.iscoroutinefunction(self.draft)

    def __attrs_post_init__(self) -> None:
        if inspect.iscoroutinefunction(self.draft):
            if self.adraft is not None:
                raise ValueError(
                    f"section {self.name!r}: draft is already async, so there is nothing for adraft to "
                    "add; pass the coroutine function as draft only"
                )
            if self.cheap:
                raise ValueError(
                    f"section {self.name!r}: cheap=True is for a synchronous draft (run on the event "
                    "loop); an async draft is always awaited there, so drop cheap"
                )
        if self.adraft is not None and not callable(self.adraft):
            raise ValueError(
                f"section {self.name!r}: adraft must be an async function of the request, got "
                f"{type(self.adraft).__name__}"
            )

    @priority.validator
    def _check_priority(self, _attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"section {self.name!r}: priority must be an int, got {value!r}")

    @floor.validator
    def _check_floor(self, _attribute: attrs.Attribute[int], value: int) -> None:
        if value < 0:
            raise ValueError(f"section {self.name!r}: floor must be >= 0, got {value}")

    @inner_tag.validator
    def _check_inner(self, attribute: attrs.Attribute[str | None], value: str | None) -> None:
        if value is not None:
            _check_tag(self, attribute, value)
