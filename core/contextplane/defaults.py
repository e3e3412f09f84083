"""The embedded defaults a runtime gets when no plugin chooses otherwise.

``open_backend`` (in ``contextplane.backends``) is the full answer; ``open_knowledge_store``
is its memory store, for callers that only read and write memories.
"""

from __future__ import annotations

import os
from typing import Any

from contextplane.backends import open_backend
from contextplane.plugins import PluginHost


def open_knowledge_store(host: PluginHost, path: str | os.PathLike[str] | None = None) -> Any:
    """The memory store of the backend ``open_backend`` chooses (its records go with it)."""
    return open_backend(host, path).memories
