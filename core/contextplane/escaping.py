"""Escaping of row text, so untrusted content can never close or forge an envelope.

Memory text is written by agents, ingested from documents or typed by users; the ADR treats
it as untrusted reference data. Three things could let it break out:

* a tag: ``</injected_memory>`` or a forged ``<working_state>``. ``&``, ``<`` and ``>`` are
  escaped as entities, so no tag of any name can appear in row text.
* a role marker: chat-template tokens (``<|im_start|>``, ``[INST]``, ``<<SYS>>``) and a line
  that starts with ``system:``/``assistant:``-style prefixes. Angle-bracket tokens die with
  the tag escaping, bracketed instruction tokens are defused, and the layout indents every
  continuation line, so no row text starts a line at column 0.
* an unusual line break: ``\\r``, vertical tab, form feed, NEL and the Unicode line/paragraph
  separators are normalised to ``\\n`` so the indentation rule cannot be bypassed; other
  control characters are dropped.
"""

from __future__ import annotations

import re

from contextplane.memo import MEMO_LIMIT, clear_memos, new_memo

_LINE_BREAKS = re.compile(r"\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
#: Anything that needs more than entity escaping: odd line breaks and control characters.
_SLOW_PATH = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
#: Any character that escaping may change; plain text skips all the work below.
_ANY = re.compile(r"[&<>\[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
_INSTRUCTION_TOKENS = re.compile(r"\[(/?)(INST|SYS|SYSTEM|ASSISTANT|USER)\]", re.IGNORECASE)


#: Escaped forms of recently seen texts (see ``contextplane.memo``).
_MEMO: dict[str, str] = new_memo()


def clear_escape_memo() -> None:
    """Drop every composition memo, this one and the measured lines of ``fitting`` (benchmarks
    measure the cold path with it)."""
    clear_memos()


def escape_untrusted(text: str) -> str:
    """Return ``text`` safe to place inside any envelope (see the module docstring)."""
    done = _MEMO.get(text)
    if done is not None:
        return done
    escaped = _escape(text)
    if len(_MEMO) >= MEMO_LIMIT:
        _MEMO.clear()
    _MEMO[text] = escaped
    return escaped


def _escape(text: str) -> str:
    # Every candidate row of every turn passes here, so the common case stays on str methods.
    if not _ANY.search(text):
        return text
    if _SLOW_PATH.search(text):
        text = _CONTROL.sub("", _LINE_BREAKS.sub("\n", text))
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    if "[" in text and _INSTRUCTION_TOKENS.search(text):
        text = _INSTRUCTION_TOKENS.sub(r"(\1\2)", text)
    return text
