"""Full-text capture rules (ADR D5): off by default, bounded in bytes, redacted.

Full text is an operator diagnostic, not the record: snapshots normally hold references and
hashes, and the trajectory holds the content. When an operator turns capture on
(``context.capture_full_text``), what is kept is redacted by rules before it is bounded, so a
secret cut in half by the bound cannot survive as a recognisable prefix.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

import attrs

#: Default rules: (name, pattern). Each match is replaced by ``[REDACTED:<name>]``.
DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    # "Authorization: Bearer <token>" and bare "Bearer <token>".
    ("bearer", r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]+=*"),
    # Provider-style secret keys: sk-..., sk-ant-..., rk_live_..., pk_live_..., ghp_..., xoxb-...
    (
        "api_key",
        r"\b(?:sk|rk|pk)[-_](?:ant-|live_|test_|proj-)?[A-Za-z0-9_\-]{16,}"
        r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
        r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}"
        r"|\bAKIA[0-9A-Z]{16}\b"
        r"|\bAIza[0-9A-Za-z_\-]{35}",
    ),
    # key=value / "key": "value" assignments whose key names a secret.
    (
        "api_key",
        r"(?i)(?<![A-Za-z0-9])(?:api[_-]?key|secret|access[_-]?token|auth[_-]?token|password)"
        r"(?P<sep>[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{6,}",
    ),
    ("email", r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b"),
)

TRUNCATION_MARKER = "\n[... truncated at {limit} bytes]"


def _compile(rules: Iterable[tuple[str, str]]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for name, pattern in rules:
        try:
            out.append((name, re.compile(pattern)))
        except re.error as exc:
            raise ValueError(
                f"redaction rule {name!r}: invalid regular expression {pattern!r}: {exc}"
            ) from None
    return tuple(out)


@attrs.frozen
class Redactor:
    """Applies redaction rules in order; custom rules come after the defaults."""

    rules: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def from_patterns(cls, extra: Sequence[str] = (), *, defaults: bool = True) -> Redactor:
        """Build from the ``observability.redact_patterns`` list (each named ``custom``)."""
        base = list(DEFAULT_RULES) if defaults else []
        return cls(_compile([*base, *(("custom", p) for p in extra)]))

    def redact(self, text: str) -> str:
        for name, pattern in self.rules:
            if "sep" in pattern.groupindex:
                text = pattern.sub(functools.partial(_keep_key, name=name), text)
            else:
                text = pattern.sub(f"[REDACTED:{name}]", text)
        return text


def _keep_key(match: re.Match[str], name: str) -> str:
    # Keep "api_key=" so the reader sees what was there, drop only the value.
    whole = match.group(0)
    value_start = match.end("sep") - match.start(0)
    return whole[:value_start] + f"[REDACTED:{name}]"


def bound_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (marker included), on a character boundary."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    marker = TRUNCATION_MARKER.format(limit=limit)
    room = limit - len(marker.encode("utf-8"))
    if room <= 0:
        return data[:limit].decode("utf-8", errors="ignore")
    return data[:room].decode("utf-8", errors="ignore") + marker


def capture_text(text: str, redactor: Redactor, limit: int) -> str:
    """What full-text capture stores: redacted first, then bounded."""
    return bound_bytes(redactor.redact(text), limit)
