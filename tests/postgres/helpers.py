"""Helpers for the PostgreSQL tests: URLs built from the test server's, and a deterministic embedder."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from tests.store.helpers import HashEmbedder

__all__ = ["HashEmbedder", "socket_dir", "url_for"]


def socket_dir(url: str) -> str:
    return parse_qs(urlsplit(url).query)["host"][0]


def url_for(url: str, *, user: str = "postgres", password: str = "", database: str = "postgres") -> str:
    """The test server's URL with another role, password or database."""
    auth = f"{user}:{password}" if password else user
    return f"postgresql://{auth}@/{database}?host={socket_dir(url)}"
