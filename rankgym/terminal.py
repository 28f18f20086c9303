"""Text for a terminal: strings from users, envs and agents with their control bytes escaped.

A group id, a tool name or an agent's reply may hold ESC sequences that recolour, retitle or
clear a terminal (or forge a fake prompt line). :func:`printable` shows them as ``\\x1b``-style
escapes instead, so what is printed is exactly what is stored, made visible.

What this module does not do: it does not quote for a shell, HTML or Markdown, and it leaves
every printable character (any script, emoji) as it is.
"""

from __future__ import annotations

import re

# C0 controls except tab/newline, DEL, C1 controls, lone surrogates, bidi overrides/isolates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    if c == 0x0A:
        return "\\n"
    if c == 0x09:
        return "\\t"
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: object, one_line: bool = False) -> str:
    """``str(text)`` with control characters escaped; ``one_line`` escapes newlines and tabs too."""
    return (_UNSAFE_LINE if one_line else _UNSAFE).sub(_escape, str(text))
