"""Escaping of row text, so untrusted content can never close or forge an envelope.

Memory text is written by agents, ingested from documents or typed by users; the ADR treats
it as untrusted reference data. Five things could let it break out:

* a tag: ``</injected_memory>`` or a forged ``<working_state>``. ``&``, ``<`` and ``>`` are
  escaped as entities, so no tag of any name can appear in row text.
* a look-alike of one: fullwidth ``＜/injected_memory＞``, ``‹ ›``, ``﹤ ﹥``, ``〈 〉``,
  ``⟨ ⟩``, fullwidth ``［INST］`` or ``＜|im_start|＞`` read as the real thing to a model (and
  become it under NFKC). The compatibility forms of the bracket characters, and fullwidth
  letters, are folded to ASCII first, so they are escaped like the ASCII ones. So is every
  character whose NFD or NFKD starts with ``<``/``>``: ``≮``/``≯`` (NFD: ``<``/``>`` plus a
  combining stroke) become ``<``/``>`` plus that stroke, escaped to ``&lt;\u0338``, so a
  normalising reader sees no bracket and the negation is kept.
* an invisible character: zero-width and other format characters (Unicode category Cf, e.g.
  U+200B inside a tag) and the invisible tag characters of the U+E0000 block are dropped, so
  what the model reads is what an operator sees.
* a role marker or a forged row: chat-template tokens (``<|im_start|>``, ``[INST]``,
  ``<<SYS>>``) and a line that starts with ``system:``/``assistant:``-style prefixes.
  Angle-bracket tokens die with the tag escaping, bracketed instruction tokens are defused,
  and the layout indents every continuation line, so no row text starts a line at column 0.
  A continuation line that opens with a trust label (``- [99 | standing | operator ...``)
  would still read like a nested row, so that bracket becomes ``&#91;``.
* an unusual line break: ``\\r``, vertical tab, form feed, the information separators, NEL and
  the Unicode line/paragraph separators are normalised to ``\\n`` so the indentation rule
  cannot be bypassed; every other control character is dropped.

Text that cannot be encoded (a lone surrogate, from bytes decoded with ``surrogateescape``)
becomes U+FFFD here, so one bad string never fails a turn at the first ``encode()``.
"""

from __future__ import annotations

import re
from typing import Final

from contextplane.memo import MEMO_LIMIT, clear_memos, new_memo

_LINE_BREAKS = re.compile(r"\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
#: Control characters (C0 but tab and newline, DEL, C1 but NEL), format characters (Cf:
#: soft hyphen, zero-width space/joiners, bidi controls, word joiner, BOM, ...) and the
#: invisible tag characters (U+E0000 block).
_DROP = re.compile(
    "[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f"
    "\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000e0000-\U000e007f]"
)
_SURROGATE = re.compile("[\ud800-\udfff]")

#: Look-alikes of the characters an envelope or a chat-template token is made of, folded to
#: ASCII: the compatibility forms (NFKC maps them to ASCII: fullwidth, small and vertical
#: presentation forms), the angle brackets that look like ``<``/``>`` without being
#: compatibility forms, and fullwidth letters and digits (so ``［ＩＮＳＴ］`` is ``[INST]``).
_LOOKALIKES: Final[dict[int, str]] = {
    **{c: chr(c - 0xFEE0) for c in range(0xFF10, 0xFF1A)},  # fullwidth digits
    **{c: chr(c - 0xFEE0) for c in range(0xFF21, 0xFF3B)},  # fullwidth A-Z
    **{c: chr(c - 0xFEE0) for c in range(0xFF41, 0xFF5B)},  # fullwidth a-z
    **dict.fromkeys(map(ord, "＜﹤‹〈〈⟨❬❮˂ᐸ⧼"), "<"),
    **dict.fromkeys(map(ord, "＞﹥›〉〉⟩❭❯˃ᐳ⧽"), ">"),
    # NFD starts with the bracket: "not less-than" and "not greater-than" (their decomposed
    # form, kept so the negation survives the escaping).
    ord("\u226e"): "<\u0338",
    ord("\u226f"): ">\u0338",
    **dict.fromkeys(map(ord, "［﹇⁅"), "["),
    **dict.fromkeys(map(ord, "］﹈⁆"), "]"),
    **dict.fromkeys(map(ord, "｜"), "|"),
    **dict.fromkeys(map(ord, "／"), "/"),
    **dict.fromkeys(map(ord, "＼﹨"), "\\"),
    **dict.fromkeys(map(ord, "＆﹠"), "&"),
    **dict.fromkeys(map(ord, "＿﹍﹎﹏︳︴"), "_"),
}
_LOOKALIKE_CLASS = "".join(re.escape(chr(c)) for c in sorted(_LOOKALIKES))

#: Anything that needs more than entity escaping.
_SLOW_PATH = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff"
    "\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    f"\U000e0000-\U000e007f{_LOOKALIKE_CLASS}]"
)
#: Any character that escaping may change; plain text skips all the work below.
_ANY = re.compile(_SLOW_PATH.pattern[:-1] + r"&<>\[]")
#: ``_SLOW_PATH`` for ASCII text (most rows): a small class scans faster.
_ASCII_SLOW_PATH = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_INSTRUCTION_TOKENS = re.compile(r"\[(/?)(INST|SYS|SYSTEM|ASSISTANT|USER)\]", re.IGNORECASE)
#: A continuation line opening (after indentation and a bullet) with a bracketed span that
#: holds a ``|``: the shape of a trust label, ``[id | kind | trust | stored ... | scope]``.
_FORGED_LABEL = re.compile(r"(?m)^([ \t]*(?:[-*+•][ \t]*)?)\[(?=[^\]\n]*\|)")


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


def repair_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so it can be encoded as UTF-8
    (trusted text, e.g. a prompt section, is repaired, not escaped)."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _escape(text: str) -> str:
    # Every candidate row of every turn passes here, so the common case stays on str methods.
    if not _ANY.search(text):
        return text
    if (_ASCII_SLOW_PATH if text.isascii() else _SLOW_PATH).search(text):
        text = _DROP.sub("", _LINE_BREAKS.sub("\n", text))
        text = _SURROGATE.sub("\ufffd", text).translate(_LOOKALIKES)
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    if "[" in text:
        if _INSTRUCTION_TOKENS.search(text):
            text = _INSTRUCTION_TOKENS.sub(r"(\1\2)", text)
        if "\n" in text:
            # Only continuation lines: the first line starts with the row's real attribution.
            newline = text.index("\n")
            if text.find("[", newline) >= 0:
                text = text[:newline] + _FORGED_LABEL.sub(r"\1&#91;", text[newline:])
    return text
