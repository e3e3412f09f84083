"""Where the configuration comes from: the search path (``--config``, ``$CONTEXTPLANE_CONFIG``,
``./contextplane.toml``, the XDG directory), ``CONTEXTPLANE_<TABLE>__<KEY>`` overrides, and
explicit overrides, merged in that order.

Why apart from structuring: reading files and the environment is the entry points' job; a
test or an embedding application structures a mapping it built without touching either.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contextplane.config.schema import Config
from contextplane.config.structuring import structure
from contextplane.errors import ConfigError

ENV_PREFIX = "CONTEXTPLANE_"
CONFIG_FILENAME = "contextplane.toml"


def _parse_env_value(value: str) -> Any:
    try:
        return tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return value


def env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Collect ``CONTEXTPLANE_<TABLE>__<KEY>`` variables into a nested dict."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX) or "__" not in key:
            continue
        table, _, name = key[len(ENV_PREFIX) :].partition("__")
        out.setdefault(table.lower(), {})[name.lower()] = _parse_env_value(value)
    return out


def find_config_file(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """Return the first config file on the documented search path, or None."""
    env = os.environ if environ is None else environ
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist: create it or drop --config")
        return p
    if env.get("CONTEXTPLANE_CONFIG"):
        p = Path(env["CONTEXTPLANE_CONFIG"])
        if not p.is_file():
            raise ConfigError(
                f"CONTEXTPLANE_CONFIG names {p}, which does not exist: create it or unset the variable"
            )
        return p
    local = Path.cwd() / CONFIG_FILENAME
    if local.is_file():
        return local
    xdg = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "contextplane" / CONFIG_FILENAME
    return xdg if xdg.is_file() else None


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Load the config file on the search path, apply environment overrides, then ``overrides``."""
    env = os.environ if environ is None else environ
    found = find_config_file(path, env)
    data: dict[str, Any] = {}
    origin = "defaults"
    base_dir = str(Path.cwd())
    if found is not None:
        try:
            data = tomllib.loads(found.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{found} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                "save it as UTF-8"
            ) from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{found} is not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"cannot read config file {found}: {exc.strerror}") from None
        origin = str(found)
        base_dir = str(found.parent)
    env_data = env_overrides(env)
    if env_data:
        data = _merge(data, env_data)
        origin = f"{origin} + environment" if found else "environment"
    if overrides:
        data = _merge(data, overrides)
    return structure(data, origin=origin, base_dir=base_dir)
