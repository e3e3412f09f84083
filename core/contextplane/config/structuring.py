"""A raw mapping becomes a ``Config`` through one cattrs converter, strict about types, and any
error names the key path, the expected value and what was found.

Why strict hooks: cattrs would turn ``"8"`` into ``8.0`` and ``1`` into ``True``; a TOML file
that says a string where a number belongs is a typo, and a silently coerced budget is a
production incident nobody can see. Why ``_explain``: cattrs' exception groups name Python
attributes; an operator needs ``context.budget_pct`` and the nearest known key.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn

from contextplane.config.schema import (
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
    _FieldError,
)
from contextplane.errors import ConfigError

converter = cattrs.Converter(forbid_extra_keys=True)


def _strict_bool(value: Any, _t: type) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError("not a boolean")


def _strict_int(value: Any, _t: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("not an integer")
    return value


def _strict_float(value: Any, _t: type) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("not a number")
    return float(value)


def _strict_str(value: Any, _t: type) -> str:
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


def _strict_str_list(value: Any, _t: type) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("not a list of strings")
    return list(value)


def _register_hooks(conv: cattrs.Converter) -> None:
    conv.register_structure_hook_func(lambda t: t == list[str], _strict_str_list)
    conv.register_structure_hook(bool, _strict_bool)
    conv.register_structure_hook(int, _strict_int)
    conv.register_structure_hook(float, _strict_float)
    conv.register_structure_hook(str, _strict_str)
    for cls in (
        ContextConfig,
        PluginsConfig,
        StoreConfig,
        EmbedderConfig,
        PromptConfig,
        SkillsConfig,
        SubagentConfig,
        ObservabilityConfig,
        ToolsConfig,
    ):
        conv.register_structure_hook(cls, make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True))
    conv.register_structure_hook(
        Config,
        make_dict_structure_fn(Config, conv, _cattrs_forbid_extra_keys=True),
    )


_register_hooks(converter)

_INTERNAL = {"base_dir", "source"}


def _fields_by_path() -> dict[str, attrs.Attribute[Any]]:
    out: dict[str, attrs.Attribute[Any]] = {}
    for top in attrs.fields(Config):
        if top.name in _INTERNAL:
            continue
        sub = top.type
        if isinstance(sub, type) and attrs.has(sub):
            for f in attrs.fields(sub):
                out[f"{top.name}.{f.name}"] = f
    return out


def _lookup(data: Any, path: list[str]) -> Any:
    cur = data
    for part in path:
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


def _show(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _known_keys(table: str) -> list[str]:
    """The keys a table of the configuration accepts ("" for the top level)."""
    cls: Any = Config
    for part in [p for p in table.split(".") if p and not p.isdigit()]:
        field = next((f for f in attrs.fields(cls) if f.name == part), None)
        sub = field.type if field is not None else None
        if field is not None and part == "subagents":
            sub = SubagentConfig
        if not (isinstance(sub, type) and attrs.has(sub)):
            return []
        cls = sub
    return [f.name for f in attrs.fields(cls) if f.name not in _INTERNAL]


def _explain(exc: BaseException, raw: Mapping[str, Any], origin: str) -> ConfigError:
    fields = _fields_by_path()
    lines: list[str] = []

    def fmt(e: BaseException, t: Any) -> str:
        if isinstance(e, _FieldError):
            return f"__field__ {e.field}"
        return cattrs.v.format_exception(e, t)

    for msg in cattrs.transform_error(exc, path="$", format_exception=fmt):
        text, _, where = msg.rpartition(" @ ")
        parts = [p for p in where.removeprefix("$").replace("[", ".").replace("]", "").split(".") if p]
        if text.startswith("__field__ "):
            parts.append(text.split(" ", 1)[1])
        parts = [p.strip("'\"") for p in parts]
        dotted = ".".join(parts)
        if text.startswith("extra fields found"):
            extra = text.partition("(")[2].rstrip(")")
            for key in [k.strip().strip("'\"") for k in extra.split(",") if k.strip()]:
                full = f"{dotted}.{key}" if dotted else key
                near = difflib.get_close_matches(key, _known_keys(dotted), n=1)
                hint = f" (did you mean {'.'.join([*parts, near[0]])}?)" if near else ""
                lines.append(f"unknown key {full}: remove it or check its spelling{hint}")
            continue
        if text.startswith("required field missing"):
            lines.append(f"missing required key {dotted}")
            continue
        value = _lookup(raw, parts)
        generic = ".".join(p for p in parts if not p.isdigit())
        field = fields.get(generic) or fields.get(".".join(parts[-2:]) if len(parts) >= 2 else "")
        if field is None and parts and parts[0] == "subagents":
            field = {f.name: f for f in attrs.fields(SubagentConfig)}.get(parts[-1])
        expect = field.metadata.get("expect") if field is not None else None
        why = f"expected {expect}" if expect else text
        lines.append(f"invalid value for {dotted}: {why}, got {_show(value)}")
    detail = "; ".join(lines) if lines else str(exc)
    return ConfigError(f"{detail} (in {origin})")


def structure(data: Mapping[str, Any], *, origin: str = "configuration", base_dir: str = ".") -> Config:
    """Structure a raw mapping into ``Config``; raises ``ConfigError`` naming each bad key."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"configuration must be a table, got {type(data).__name__} (in {origin})")
    for reserved in _INTERNAL:
        if reserved in data:
            raise ConfigError(f"unknown key {reserved}: remove it or check its spelling (in {origin})")
    try:
        cfg = converter.structure(dict(data), Config)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        raise _explain(exc, data, origin) from None
    return attrs.evolve(cfg, base_dir=base_dir, source=origin)
