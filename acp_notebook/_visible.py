"""Text made safe to show and to send: every character that could hide, reorder or break text is spelled out.

An agent, a notebook variable or a file name can carry characters that are invisible or that change how
the text around them reads: NUL and other control characters, bidirectional overrides and isolates
(U+202E turns ``evil()`` into what reads as something else), zero-width characters, and lone
surrogates (what Python makes of undecodable bytes, which no UTF-8 encoder accepts). ``visible(text)``
replaces each with its escape (``\\u202e``, ``\\x00``, ``\\udcff``) so what a person reads is what the
text holds, and the result always encodes as UTF-8. Newlines and tabs are kept.

Pure functions; any thread.
"""

from __future__ import annotations

import re

__all__ = ["has_hidden", "visible"]

# C0 controls but tab and newline, DEL and the C1 controls; bidi marks, embeddings, overrides and
# isolates; zero-width characters and the byte-order mark; the line and paragraph separators (they
# break lines where no newline shows); lone surrogates.
_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
                     "\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, keep_cr: bool = False) -> str:
    """``text`` with every hidden or text-reordering character written as its escape.

    A carriage return is escaped too unless ``keep_cr`` (terminal-style output that redraws a line).
    """
    if keep_cr:
        return "\r".join(_HIDDEN.sub(_escape, part) for part in text.split("\r"))
    return _HIDDEN.sub(_escape, text)


def has_hidden(text: str) -> bool:
    """Whether ``visible`` would change ``text``."""
    return _HIDDEN.search(text) is not None
