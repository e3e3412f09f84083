"""``replay``: recompose a recorded turn and say whether it is byte for byte what was delivered.

The ADR promises that replay is deterministic; this is the check. A recorded turn is composed
again from its recorded inputs (query, working state, flags, budget and window, the recorded
configuration) with today's plugins, against the store as of the history position the turn
read and the session summaries stored by then, and each section's sha256 is compared with the
one recorded. Identical means every section's hash and the whole text's hash match.

When a section differs the report says why, from what the record holds: the section's plugin
is gone, new or at another version; the configuration changed (``--now`` only: a plain replay
uses the recorded one); a memory it delivered or now delivers changed lifecycle after the turn
(``--now``), was purged since (its text is gone), or was written after it; and otherwise that
the plugin produced different output from the same recorded inputs (it is not deterministic,
or it reads something the turn inputs do not hold). A section only one side has that
delivered nothing (a plugin installed since whose section is empty) is a note, not a
difference: replay compares what was delivered. ``now=True`` recomposes against today's
store and configuration instead: what would differ if the turn ran again now.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from contextplane.config import Config
from contextplane.explain.turns import config_for, events_of, load_inputs, past_view, position_of, request_for
from contextplane.memory.history import HistoryEvent, HistoryPosition
from contextplane.memory.model import format_timestamp
from contextplane.observability.turn_inputs import config_json
from contextplane.plugins import PluginHost, get_host
from contextplane.projection import ProjectedContext, compose
from contextplane.records.turn_inputs import TurnInputs

Status = Literal["same", "changed", "added", "removed"]


@attrs.frozen
class SectionDiff:
    """One section, recorded against replayed."""

    label: str
    status: Status
    plugin: str | None
    recorded: Mapping[str, Any] | None
    replayed: Mapping[str, Any] | None
    reasons: tuple[str, ...] = ()


@attrs.frozen
class ReplayReport:
    """The outcome of one replay."""

    session_id: str
    turn_index: int
    #: "as_of" (the store and configuration as the turn saw them) or "now".
    mode: str
    identical: bool
    recorded_sha256: str | None
    replayed_sha256: str | None
    sections: tuple[SectionDiff, ...]
    #: Reasons that concern the whole turn (configuration, plugins, the record itself).
    notes: tuple[str, ...] = ()
    #: A unified diff of the recorded and replayed text, when the recorded text is at hand
    #: (the trajectory keeps it); empty when identical or not available.
    text_diff: tuple[str, ...] = ()
    history_position: HistoryPosition | None = None

    @property
    def changed(self) -> tuple[SectionDiff, ...]:
        return tuple(s for s in self.sections if s.status != "same")

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self, filter=attrs.filters.exclude(attrs.fields(ReplayReport).history_position))
        out["history_position"] = None if self.history_position is None else self.history_position.to_dict()
        return out


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def _config_changes(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    before, after = _flatten(recorded), _flatten(now)
    return [
        f"{key} {_short(before.get(key))} then, {_short(after.get(key))} now"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _describe(event: HistoryEvent) -> str:
    what = event.describe().split(" ", 2)[2]  # drop "#seq time"
    return f"{what} at {format_timestamp(event.at)}"


def _memory_reasons(
    ids: set[str], store: Any, position: HistoryPosition | None, purged: Sequence[str]
) -> list[str]:
    reasons = []
    for memory_id in sorted(ids, key=lambda i: (len(i), i)):
        if memory_id in purged:
            reasons.append(f"memory {memory_id} was purged after the turn: its text is gone")
            continue
        events = events_of(store, memory_id)
        if position is not None:
            events = [e for e in events if e.seq > position.seq]
        if not events:
            continue
        first = events[0]
        if first.event == "created":
            reasons.append(f"memory {memory_id} was written after the turn ({format_timestamp(first.at)})")
        else:
            changes = "; ".join(_describe(e) for e in events)
            reasons.append(f"memory {memory_id}'s lifecycle changed after the turn: {changes}")
    return reasons


def _unknowable(named: set[str], purged: Sequence[str], unordered: Mapping[str, str] | None) -> list[str]:
    """What the as-of view could not rebuild, when nothing else explains a difference: rows
    purged since that took part in the turn's search without being delivered (their text is
    gone, so the search's competition and statistics differ), and summaries whose order
    against the turn is not known. Why before blaming the plugin: these are the store's
    gaps, not the plugin's nondeterminism."""
    reasons = []
    gone = sorted((i for i in purged if i not in named), key=lambda i: (len(i), i))
    if gone:
        reasons.append(
            f"{'memory' if len(gone) == 1 else 'memories'} {', '.join(gone)} existed at the turn and "
            f"{'was' if len(gone) == 1 else 'were'} purged since (not delivered then; the text is gone), "
            "so the store the turn searched cannot be rebuilt exactly"
        )
    for summary_id, stamp in sorted((unordered or {}).items(), key=lambda kv: (len(kv[0]), kv[0])):
        reasons.append(
            f"session summary {summary_id} is stamped {stamp}, to the second, in the turn's own second: "
            "whether the turn could see it is not known (stored before contextplane kept sub-second times)"
        )
    return reasons


def _plugin_notes(then: Mapping[str, str | None], now: Mapping[str, str | None]) -> list[str]:
    """The plugin set's changes since the turn, whether or not any output changed."""
    notes = [f"plugin {name!r} was loaded then and is not now" for name in sorted(set(then) - set(now))]
    notes += [f"plugin {name!r} is loaded now and was not then" for name in sorted(set(now) - set(then))]
    notes += [
        f"plugin {name!r} changed version: {then[name]} then, {now[name]} now"
        for name in sorted(set(then) & set(now))
        if then[name] != now[name]
    ]
    return notes


def _recorded_text(backend: Any, inputs: TurnInputs) -> str | None:
    trajectory = getattr(backend, "trajectory", None)
    if trajectory is None or not inputs.trajectory_ref:
        return None
    entry = trajectory.read(inputs.session_id).get(inputs.trajectory_ref)
    if entry is None:
        return None
    text = entry.data.get("text")
    return text if isinstance(text, str) else None


def _delivered_nothing(section: Mapping[str, Any] | None) -> bool:
    """A section with no text, no ids and no error: the model saw nothing of it."""
    return (
        section is not None
        and not section.get("chars")
        and not section.get("ids")
        and not section.get("error")
    )


def _compare(
    inputs: TurnInputs,
    projection: ProjectedContext,
    host: PluginHost,
    *,
    store: Any,
    position: HistoryPosition | None,
    purged: Sequence[str],
    config_changes: Sequence[str],
    notes: list[str],
    unordered: Mapping[str, str] | None = None,
) -> list[SectionDiff]:
    recorded = {s["label"]: s for s in inputs.section_manifest()}
    replayed = {s.name: s for s in projection.sections}
    then_plugins = inputs.plugin_versions()
    now_plugins = dict(host.plugin_versions())
    out = []
    labels = [*recorded, *(name for name in replayed if name not in recorded)]  # delivery order
    for label in labels:
        before = recorded.get(label)
        after = replayed.get(label)
        now_view = (
            None
            if after is None
            else {
                "chars": after.chars,
                "sha256": after.sha256,
                "ids": list(after.item_ids),
                "suppressed": after.suppressed,
                "error": after.error,
            }
        )
        plugin = (after.plugin if after is not None else None) or (before or {}).get("plugin")
        if before is not None and after is not None and before.get("sha256") == after.sha256:
            out.append(SectionDiff(label, "same", plugin, before, now_view))
            continue
        if _delivered_nothing(before if after is None else now_view) and (before is None or after is None):
            # A section only one side has, which delivered nothing: what the model saw is the
            # same, so it is a note (a plugin installed or removed since), never a difference.
            side = "now, not then" if before is None else "then, not now"
            notes.append(f"section {label!r} (plugin {plugin!r}) is composed {side}, and delivered nothing")
            continue
        status: Status = (
            "changed"
            if before is not None and after is not None
            else "added"
            if before is None
            else "removed"
        )
        reasons: list[str] = []
        if plugin is not None:
            if plugin not in now_plugins:
                reasons.append(f"plugin {plugin!r} is not loaded now")
            elif plugin not in then_plugins:
                reasons.append(f"plugin {plugin!r} was not loaded when the turn was recorded")
            elif then_plugins[plugin] != now_plugins[plugin]:
                reasons.append(
                    f"plugin {plugin!r} changed version: {then_plugins[plugin]} then, "
                    f"{now_plugins[plugin]} now"
                )
        if after is not None and after.error:
            reasons.append(f"the section failed on replay: {after.error}")
        ids_then = set((before or {}).get("ids", ()))
        ids_now = set(after.item_ids) if after is not None else set()
        reasons.extend(_memory_reasons(ids_then ^ ids_now, store, position, purged))
        if config_changes:
            reasons.append(
                f"the configuration changed since the turn ({len(config_changes)} keys; see the notes)"
            )
        if not reasons:
            reasons.extend(_unknowable(ids_then ^ ids_now, purged, unordered))
        if not reasons:
            reasons.append(
                f"plugin {plugin!r} produced different output from the same recorded inputs "
                "(same version, configuration and store state): it is not deterministic, or it reads "
                "something the turn inputs do not record"
            )
        out.append(SectionDiff(label, status, plugin, before, now_view, tuple(reasons)))
    return out


def replay(
    backend: Any,
    session_id: str,
    turn_index: int,
    *,
    host: PluginHost | None = None,
    now: bool = False,
    config: Config | None = None,
    exact_ranking: bool = True,
) -> ReplayReport:
    """Recompose a recorded turn (see the module docstring) and compare it with the record.

    ``now`` recomposes against today's store and today's configuration (``config``, default
    the host's) instead of the store as of the turn and the recorded configuration."""
    host = host if host is not None else get_host()
    inputs = load_inputs(backend, session_id, turn_index)
    position = position_of(inputs)
    notes: list[str] = []
    if not inputs.state_exact:
        notes.append("the working state held values that are not JSON data; they were recorded as their repr")
    if now:
        cfg = config if config is not None else host.config
        changes = _config_changes(inputs.config_data(), json.loads(config_json(cfg)[0]))
        notes.extend(f"configuration: {change}" for change in changes)
        request = request_for(inputs, cfg, store=backend.memories, backend=backend)
        projection = compose(request, host=host, strict=False)
        purged: Sequence[str] = ()
        diffs = _compare(
            inputs,
            projection,
            host,
            store=backend.memories,
            position=position,
            purged=purged,
            config_changes=changes,
            notes=notes,
        )
        mode = "now"
    else:
        cfg = config if config is not None else config_for(inputs, host.config, notes)
        with past_view(backend, inputs, exact_ranking=exact_ranking) as (view, past_backend):
            request = request_for(inputs, cfg, store=view, backend=past_backend)
            projection = compose(request, host=host, strict=False)
            overlay = getattr(view, "overlay", None)
            purged = tuple(overlay.purged_after) if overlay is not None else ()
            unordered = dict(getattr(past_backend.summaries, "unordered", {}))
            if overlay is not None and not overlay.exact_ranking:
                notes.append("full-text ranking used today's index statistics (exact_ranking off)")
        diffs = _compare(
            inputs,
            projection,
            host,
            store=backend.memories,
            position=position,
            purged=purged,
            config_changes=(),
            notes=notes,
            unordered=unordered,
        )
        mode = "as_of"
    notes.extend(_plugin_notes(inputs.plugin_versions(), dict(host.plugin_versions())))
    replayed_sha = hashlib.sha256(projection.text.encode()).hexdigest() if projection.text else None
    identical = replayed_sha == inputs.projection_sha256 and all(d.status == "same" for d in diffs)
    if config is not None and inputs.config_sha256 != config_json(cfg)[1] and not now:
        notes.append("a configuration other than the recorded one was given")
    text_diff: tuple[str, ...] = ()
    if not identical:
        then = _recorded_text(backend, inputs)
        if then is not None:
            text_diff = tuple(
                difflib.unified_diff(
                    then.splitlines(), projection.text.splitlines(), "recorded", "replayed", lineterm="", n=1
                )
            )
    return ReplayReport(
        session_id,
        turn_index,
        mode,
        identical,
        inputs.projection_sha256,
        replayed_sha,
        tuple(diffs),
        tuple(notes),
        text_diff,
        position,
    )
