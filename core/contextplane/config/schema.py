"""What a valid configuration is: the tables (``[context]``, ``[store]``, ...), their defaults,
and the bounds each value must keep.

Why apart from loading: every layer reads these types (a request carries a ``Config``), while
only the entry points read files and the environment; the validators live beside the fields so
a bound and its error text (``expect``) are written once, where the field is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from contextplane.notices import ConfigWarning, warn_once


def _expect(text: str) -> dict[str, str]:
    return {"expect": text}


class _FieldError(ValueError):
    """A validator's complaint, carrying the field name so the message can name the key path."""

    def __init__(self, field: str, value: Any) -> None:
        super().__init__(f"invalid value for {field}")
        self.field = field
        self.value = value


def _ge0(_i: object, a: attrs.Attribute[Any], v: float) -> None:
    if v < 0:
        raise _FieldError(a.name, v)


def _ge0_or_none(_i: object, a: attrs.Attribute[Any], v: int | None) -> None:
    if v is not None and v < 0:
        raise _FieldError(a.name, v)


def _pct(_i: object, a: attrs.Attribute[Any], v: float) -> None:
    if not 0 <= v <= 100:
        raise _FieldError(a.name, v)


def _positive_or_none(_i: object, a: attrs.Attribute[Any], v: int | None) -> None:
    if v is not None and v <= 0:
        raise _FieldError(a.name, v)


def _row_bound(_i: object, a: attrs.Attribute[Any], v: int) -> None:
    if v != 0 and v < 200:
        raise _FieldError(a.name, v)


def _unit(_i: object, a: attrs.Attribute[Any], v: float) -> None:
    if not 0 < v <= 1:
        raise _FieldError(a.name, v)


def _share(_i: object, a: attrs.Attribute[Any], v: float) -> None:
    if not 0 <= v <= 1:
        raise _FieldError(a.name, v)


def _tier(_i: object, a: attrs.Attribute[Any], v: int) -> None:
    if v not in (1, 2, 3):
        raise _FieldError(a.name, v)


@attrs.frozen
class ContextConfig:
    """The projected-context settings (ADR D6, D9, D5)."""

    budget_pct: float = attrs.field(default=8.0, validator=_pct, metadata=_expect("a number from 0 to 100"))
    context_window: int | None = attrs.field(
        default=None, validator=_positive_or_none, metadata=_expect("a whole number of tokens > 0")
    )
    budget_floor_chars: int = attrs.field(
        default=16_000, validator=_ge0, metadata=_expect("a whole number >= 0")
    )
    prior_sessions: Literal["newest", "relevant", "off"] = attrs.field(
        default="newest", metadata=_expect('one of "newest", "relevant", "off"')
    )
    prior_sessions_limit: int = attrs.field(
        default=5, validator=_ge0, metadata=_expect("a whole number >= 0")
    )
    #: The most rows the retrieved section offers the budget: its depth is as many ranked rows
    #: as the room could hold (budget-driven, ADR D6), up to this; 0 turns retrieval off. 400
    #: rows of ~200 chars fill the default 16,000-token budget.
    retrieved_max: int = attrs.field(default=400, validator=_ge0, metadata=_expect("a whole number >= 0"))
    #: Deprecated (depth follows the budget now): when set, read as ``retrieved_max``.
    retrieved_k: int | None = attrs.field(
        default=None, validator=_ge0_or_none, metadata=_expect("a whole number >= 0")
    )
    #: One row's text is cut to this many chars (at a line boundary, with a marker); 0 = no bound.
    max_row_chars: int = attrs.field(
        default=4_000, validator=_row_bound, metadata=_expect("0 (no bound) or a whole number >= 200")
    )
    #: The relevance gate: when no hit of the question reaches this relevance (``SearchHit.
    #: relevance``, 0 to 1: the share of the query's meaningful terms a row matches, IDF-weighted,
    #: or how far its embedding's cosine similarity is above what chance gives in this store,
    #: whichever is higher; see docs/hooks.md), the store cannot answer it and no retrieved row
    #: is injected. 0 injects every hit.
    min_relevance: float = attrs.field(
        default=0.3, validator=_share, metadata=_expect("a number from 0 to 1")
    )
    #: A floor on each row once the question passed ``min_relevance``: 0 (the default) offers
    #: every ranked row the budget holds; raise it to trade recall for fewer weak rows.
    min_row_relevance: float = attrs.field(
        default=0.0, validator=_share, metadata=_expect("a number from 0 to 1")
    )
    #: How the retrieved section lays out the rows the budget kept (which rows it keeps is
    #: rank's business either way): "chronological" (oldest first, by when each happened, else
    #: when it was stored) or "rank" (best match first). See README "Retrieval quality".
    retrieved_order: Literal["chronological", "rank"] = attrs.field(
        default="chronological", metadata=_expect('"chronological" or "rank"')
    )
    #: What the memory written right after a hit in its scope is worth beside it (the reply to
    #: the turn that matched, in a stored conversation): it joins the ranking with this share
    #: of the hit's rank score; 0 turns it off. See README "Retrieval quality".
    retrieved_follow: float = attrs.field(
        default=0.2, validator=_share, metadata=_expect("a number from 0 to 1")
    )
    inject_min_trust: int = attrs.field(default=1, validator=_tier, metadata=_expect("1, 2 or 3"))
    capture_full_text: bool = attrs.field(default=False, metadata=_expect("true or false"))
    provider_timeout_ms: int = attrs.field(
        default=2_000, validator=_ge0, metadata=_expect("a whole number of milliseconds >= 0")
    )
    project: str | None = attrs.field(default=None, metadata=_expect("a project id string"))

    @property
    def retrieved_cap(self) -> int:
        """The retrieved section's upper bound on depth: ``retrieved_max``, or a deprecated
        ``retrieved_k`` when a configuration still sets it (warned once, naming the new key).
        Why not keep ``retrieved_k``: it fixed the depth at 8 whatever the budget, and a
        configuration that copied that default would silently keep the old behaviour."""
        if self.retrieved_k is None:
            return self.retrieved_max
        warn_once(
            ("config", "retrieved_k"),
            f"context.retrieved_k = {self.retrieved_k} is deprecated: the retrieved section now offers "
            "as many rows as the budget could hold; it is read as context.retrieved_max (the upper "
            "bound, default 400): rename it, or remove it to follow the budget",
            ConfigWarning,
        )
        return self.retrieved_k


@attrs.frozen
class PluginsConfig:
    """Which plugins load, and whether a plugin failure is fatal (strict mode)."""

    enabled: list[str] | None = attrs.field(default=None, metadata=_expect("a list of plugin names"))
    disabled: list[str] = attrs.field(factory=list, metadata=_expect("a list of plugin names"))
    strict: bool = attrs.field(default=False, metadata=_expect("true or false"))


@attrs.frozen
class StoreConfig:
    """Which backend holds the records, where the embedded store lives, and how hard its vector
    leg looks."""

    path: str | None = attrs.field(default=None, metadata=_expect("a file path"))
    #: Which backend holds the records: the embedded "sqlite" file, or one a plugin offers
    #: through the ``backend`` hook under this name (``contextplane_postgres``: "postgres").
    backend: str = attrs.field(
        default="sqlite", metadata=_expect('a backend name, e.g. "sqlite" or "postgres"')
    )
    #: The server backend's connection URL (``$CONTEXTPLANE_DATABASE_URL`` when unset).
    url: str | None = attrs.field(default=None, metadata=_expect("a connection URL"))
    #: Lists the IVF vector leg scans per query; None = max(8, lists/32). Real text clusters
    #: less than synthetic data (bench/store_real_embeddings.py): raise it for recall.
    vector_probes: int | None = attrs.field(
        default=None, validator=_positive_or_none, metadata=_expect("a whole number of lists > 0")
    )
    #: Megabytes of vectors the embedded store may hold in memory for the IVF vector leg
    #: (``store/vector_lists.py``): a store whose vectors fit (256 MB: about 170k of 384
    #: dimensions) ranks its probed lists in numpy instead of one SQL distance call per vector,
    #: about 4 ms less a turn at 100k. 0 = always in SQL.
    vector_memory_mb: int = attrs.field(
        default=256, validator=_ge0, metadata=_expect("a whole number of megabytes >= 0")
    )
    #: An exact duplicate of a deliverable row (same scope, provenance and text) is not stored
    #: twice: the write returns the existing id (ADR D7 consolidation).
    deduplicate: bool = attrs.field(default=True, metadata=_expect("true or false"))
    #: A write naming a subject held by a deliverable row of the same scope and kind supersedes
    #: it (ADR D7); false stores it beside the old row.
    auto_supersede: bool = attrs.field(default=True, metadata=_expect("true or false"))
    #: Word-set similarity at or above which a write is reported as a near duplicate for review.
    near_duplicate_threshold: float = attrs.field(
        default=0.8, validator=_unit, metadata=_expect("a number above 0 and at most 1")
    )
    #: The longest text one write from the command line or a memory tool accepts (``memory add``
    #: and ``supersede``, their ``--file`` and standard input, MCP ``memory_ingest``); a longer
    #: one is refused with its size. 0 = no bound.
    max_write_chars: int = attrs.field(
        default=100_000, validator=_ge0, metadata=_expect("0 (no bound) or a whole number of chars")
    )


@attrs.frozen
class ToolsConfig:
    """What the memory tools an agent calls (``memory_recall``, ``memory_get``, in process or
    over MCP) hand back: one huge memory or a large ``k`` must not flood the model's context."""

    #: One row's content is cut here, with a marker naming the id and the offset to read on.
    max_row_chars: int = attrs.field(
        default=4_000, validator=_row_bound, metadata=_expect("0 (no bound) or a whole number >= 200")
    )
    #: The content of one tool result in all; the rows past it are left out and counted.
    max_result_chars: int = attrs.field(
        default=40_000, validator=_row_bound, metadata=_expect("0 (no bound) or a whole number >= 200")
    )


def _positive(_i: object, a: attrs.Attribute[Any], v: float) -> None:
    if v <= 0:
        raise _FieldError(a.name, v)


@attrs.frozen
class EmbedderConfig:
    """Which embedder turns memories into vectors for hybrid search, for every backend and
    command. No ``provider`` means full-text search only. A provider is a plugin answering the
    ``embedder`` hook for its name (docs/hooks.md): ``openai`` (any OpenAI-compatible
    ``/v1/embeddings`` server, extra ``contextplane[openai]``) and ``sentence-transformers``
    (a local model, extra ``contextplane[local]``) ship with contextplane."""

    provider: str | None = attrs.field(
        default=None, metadata=_expect('a provider name, e.g. "openai" or "sentence-transformers"')
    )
    #: The model: a name the server knows (HTTP), or a name or directory (local).
    model: str | None = attrs.field(default=None, metadata=_expect("a model name or path"))
    #: The HTTP provider's base URL, up to and including ``/v1``.
    base_url: str | None = attrs.field(default=None, metadata=_expect("a URL, e.g. http://localhost:11434/v1"))
    #: The name of the environment variable holding the API key (the key itself is never in
    #: the configuration, never logged, never stored).
    api_key_env: str | None = attrs.field(default=None, metadata=_expect("an environment variable name"))
    #: The vector width: asked of the server (models that can shorten their output), or
    #: checked against what a local model produces. None: the model's own.
    dimensions: int | None = attrs.field(
        default=None, validator=_positive_or_none, metadata=_expect("a whole number > 0")
    )
    batch_size: int = attrs.field(default=64, validator=_positive, metadata=_expect("a whole number > 0"))
    timeout_s: float = attrs.field(
        default=10.0, validator=_positive, metadata=_expect("a number of seconds > 0")
    )
    max_retries: int = attrs.field(default=3, validator=_ge0, metadata=_expect("a whole number >= 0"))
    #: Where a local model runs: "cpu" (default), "cuda", "mps".
    device: str = attrs.field(default="cpu", metadata=_expect('a torch device, e.g. "cpu"'))


@attrs.frozen
class PromptConfig:
    """Inputs of the standard stable-prefix sections (ADR D3)."""

    soul_path: str | None = attrs.field(default=None, metadata=_expect("a path to SOUL.md"))
    operating_model: str | None = attrs.field(default=None, metadata=_expect("text"))
    guidelines: str | None = attrs.field(default=None, metadata=_expect("text"))
    guidelines_path: str | None = attrs.field(default=None, metadata=_expect("a file path"))


@attrs.frozen
class SkillsConfig:
    """Where the skills index comes from (Agent Skills layout: <dir>/<skill>/SKILL.md)."""

    dir: str | None = attrs.field(default=None, metadata=_expect("a directory path"))


@attrs.frozen
class SubagentConfig:
    """One entry of the delegation roster, and its context contract (empty = no projection)."""

    name: str = attrs.field(metadata=_expect("a subagent name"))
    description: str = attrs.field(default="", metadata=_expect("text"))
    visible_to_lead: bool = attrs.field(default=True, metadata=_expect("true or false"))
    prompt: str = attrs.field(default="", metadata=_expect("text"))
    sections: list[str] = attrs.field(factory=list, metadata=_expect("a list of context section names"))
    budget_tokens: int | None = attrs.field(
        default=None, validator=_positive_or_none, metadata=_expect("a whole number of tokens > 0")
    )


@attrs.frozen
class ObservabilityConfig:
    """Prompt snapshots and the trajectory (ADR D5): where they live and how long they stay."""

    #: Record a prompt snapshot per model call in the turn's backend.
    snapshots: bool = attrs.field(default=True, metadata=_expect("true or false"))
    #: Record each composed turn's inputs (query, working state, flags, configuration, plugins,
    #: history position) beside its snapshots, so ``explain`` and ``replay`` can read it back.
    turn_inputs: bool = attrs.field(default=True, metadata=_expect("true or false"))
    #: Keep the trajectory (ADR 0102): the append-only JSONL that snapshots reference.
    trajectory: bool = attrs.field(default=True, metadata=_expect("true or false"))
    #: A separate telemetry database for snapshots (embedded backend); None means the store file.
    telemetry_db: str | None = attrs.field(default=None, metadata=_expect("a file path"))
    #: Trajectory JSONL directory; None means a ``trajectories`` directory beside the store file.
    trajectory_dir: str | None = attrs.field(default=None, metadata=_expect("a directory path"))
    retention_days: float = attrs.field(
        default=30.0, validator=_ge0, metadata=_expect("a number of days >= 0")
    )
    retention_count: int = attrs.field(
        default=100_000, validator=_ge0, metadata=_expect("a whole number of snapshots >= 0")
    )
    full_text_max_bytes: int = attrs.field(
        default=65_536, validator=_ge0, metadata=_expect("a whole number of bytes >= 0")
    )
    redact_defaults: bool = attrs.field(default=True, metadata=_expect("true or false"))
    redact_patterns: list[str] = attrs.field(factory=list, metadata=_expect("a list of regular expressions"))
    #: How durable a turn's records (injection row, turn inputs, snapshots, trajectory) are once
    #: their write returned, as durable as the memories by default. "full": no crash of the
    #: application or the database server loses one (PostgreSQL: the commit waits for its WAL
    #: flush; SQLite: WAL with ``synchronous = NORMAL``, the memory store's own setting).
    #: "relaxed": PostgreSQL commits them with ``synchronous_commit = off``, so a server crash
    #: may lose the last fraction of a second of them (never corrupting any); SQLite as "full".
    #: "fsync": on SQLite too every record waits for the disk, surviving a machine crash
    #: (``synchronous = FULL`` on the records file, the trajectory fsynced: an fsync per record,
    #: 3-20 ms a turn on a local disk); PostgreSQL as "full".
    records_durability: Literal["full", "relaxed", "fsync"] = attrs.field(
        default="full", metadata=_expect('"full", "relaxed" or "fsync"')
    )


@attrs.frozen
class Config:
    """The whole configuration. ``plugin`` holds free-form tables for third-party plugins."""

    context: ContextConfig = attrs.field(factory=ContextConfig)
    plugins: PluginsConfig = attrs.field(factory=PluginsConfig)
    store: StoreConfig = attrs.field(factory=StoreConfig)
    embedder: EmbedderConfig = attrs.field(factory=EmbedderConfig)
    prompt: PromptConfig = attrs.field(factory=PromptConfig)
    skills: SkillsConfig = attrs.field(factory=SkillsConfig)
    subagents: list[SubagentConfig] = attrs.field(factory=list)
    observability: ObservabilityConfig = attrs.field(factory=ObservabilityConfig)
    tools: ToolsConfig = attrs.field(factory=ToolsConfig)
    plugin: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    #: Directory relative paths in the file are resolved against (not a TOML key).
    base_dir: str = attrs.field(default=".", metadata={"internal": True})
    #: Where the values came from, for error messages and ``contextplane preview``.
    source: str = attrs.field(default="defaults", metadata={"internal": True})

    def resolve_path(self, value: str) -> Path:
        """Resolve a configured path against the config file's directory."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else Path(self.base_dir) / p

    def plugin_settings(self, name: str) -> Mapping[str, Any]:
        """The ``[plugin.<name>]`` table, or an empty mapping."""
        return self.plugin.get(name, {})


DEFAULT = Config()


#: Keys added since turns were first recorded that change what a turn delivers, each with the
#: value that behaves as contextplane did before the key existed. A recorded configuration
#: without one of them is replayed with that value (``explain``, ``replay``), so a turn recorded
#: before the change replays as it ran instead of differing for a reason nobody chose.
BEHAVIOUR_BEFORE: dict[tuple[str, str], Any] = {
    ("context", "retrieved_follow"): 0.0,  # 0.3.0: the turn after a conversation hit
}
