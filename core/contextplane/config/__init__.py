"""Configuration: one TOML file plus environment overrides, structured by one cattrs converter.

Search path (first hit wins): an explicit ``path``; ``$CONTEXTPLANE_CONFIG``;
``./contextplane.toml``; ``$XDG_CONFIG_HOME/contextplane/contextplane.toml`` (``~/.config``
when unset). No file means all defaults.

Environment overrides use ``CONTEXTPLANE_<TABLE>__<KEY>``, e.g.
``CONTEXTPLANE_CONTEXT__BUDGET_PCT=4``; the value is read as a TOML literal when it parses as
one, else as a string. ``CONTEXTPLANE_PLUGINS`` (comma-separated, empty = none) chooses plugins.

Unknown keys are rejected and every error names the key path and the bad value, because a
silently ignored typo in a budget setting is a production incident nobody can see.

Split by job: ``schema`` (the tables, their defaults and bounds), ``structuring`` (the one
converter, and errors naming the key path) and ``loading`` (the search path, the environment
overrides). This package is the import path the code had as one module and re-exports every name
it had; a name set here is set too in the module that reads it (``contextplane.shims``).
"""

from __future__ import annotations

from contextplane.config import loading, schema, structuring
from contextplane.config.loading import (
    CONFIG_FILENAME,
    ENV_PREFIX,
    _merge,
    _parse_env_value,
    env_overrides,
    find_config_file,
    load_config,
)
from contextplane.config.schema import (
    DEFAULT,
    Config,
    ContextConfig,
    EmbedderConfig,
    ObservabilityConfig,
    PluginsConfig,
    PromptConfig,
    SkillsConfig,
    StoreConfig,
    SubagentConfig,
    ToolsConfig,
    _expect,
    _FieldError,
    _ge0,
    _ge0_or_none,
    _pct,
    _positive,
    _positive_or_none,
    _row_bound,
    _share,
    _tier,
    _unit,
)
from contextplane.config.structuring import (
    _INTERNAL,
    _explain,
    _fields_by_path,
    _known_keys,
    _lookup,
    _register_hooks,
    _show,
    _strict_bool,
    _strict_float,
    _strict_int,
    _strict_str,
    _strict_str_list,
    converter,
    structure,
)
from contextplane.errors import ConfigError
from contextplane.notices import ConfigWarning, warn_once
from contextplane.shims import patch_through

patch_through(__name__, (schema, structuring, loading))

__all__ = [
    "CONFIG_FILENAME",
    "DEFAULT",
    "ENV_PREFIX",
    "_INTERNAL",
    "Config",
    "ConfigError",
    "ConfigWarning",
    "ContextConfig",
    "EmbedderConfig",
    "ObservabilityConfig",
    "PluginsConfig",
    "PromptConfig",
    "SkillsConfig",
    "StoreConfig",
    "SubagentConfig",
    "ToolsConfig",
    "_FieldError",
    "_expect",
    "_explain",
    "_fields_by_path",
    "_ge0",
    "_ge0_or_none",
    "_known_keys",
    "_lookup",
    "_merge",
    "_parse_env_value",
    "_pct",
    "_positive",
    "_positive_or_none",
    "_register_hooks",
    "_row_bound",
    "_share",
    "_show",
    "_strict_bool",
    "_strict_float",
    "_strict_int",
    "_strict_str",
    "_strict_str_list",
    "_tier",
    "_unit",
    "converter",
    "env_overrides",
    "find_config_file",
    "load_config",
    "loading",
    "schema",
    "structure",
    "structuring",
    "warn_once",
]
