"""Where the PostgreSQL backend connects, and how that place is shown without its password.

The URL comes from ``[store] url``, else ``$CONTEXTPLANE_DATABASE_URL``. Anything the backend
prints or logs (errors, ``name``, ``repr``) uses ``redact``: a password in the URL
(``postgresql://user:secret@host/db``) or in a key/value string (``password=secret``) is shown
as ``***``, so a traceback pasted into an issue never carries a credential.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final

from contextplane.config import Config
from contextplane.errors import ConfigError

URL_ENV_VAR: Final[str] = "CONTEXTPLANE_DATABASE_URL"

_URL_PASSWORD = re.compile(r"^(?P<head>[a-z][a-z0-9+.-]*://[^/?#@:]*):(?P<pw>[^@/?#]*)@", re.I)
_KV_PASSWORD = re.compile(r"(?P<key>\bpassword\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'|\S+)", re.I)
_QUERY_PASSWORD = re.compile(r"(?P<key>[?&]password=)(?P<pw>[^&#]*)", re.I)


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (URL userinfo, query or key=value form)."""
    if "://" in url:
        text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:***@", url)
        return _QUERY_PASSWORD.sub(lambda m: f"{m['key']}***", text)
    return _KV_PASSWORD.sub(lambda m: f"{m['key']}***", url)


def database_url(config: Config, environ: Mapping[str, str] | None = None) -> str:
    """The configured connection URL: ``store.url``, else ``$CONTEXTPLANE_DATABASE_URL``."""
    env = os.environ if environ is None else environ
    url = config.store.url or env.get(URL_ENV_VAR, "")
    if not url.strip():
        raise ConfigError(
            'store.backend = "postgres" needs a connection URL: set store.url '
            f"(e.g. postgresql://app@db.internal/contextplane) or ${URL_ENV_VAR} (in {config.source})"
        )
    return url.strip()
