"""Text from users and agents made safe for a terminal: the one escaping function every renderer uses."""

from __future__ import annotations

import re

# C0 and C1 controls (ESC starts ANSI/OSC sequences; \x9b is a one-byte CSI), DEL, the Unicode line and
# paragraph separators, bidirectional overrides, and lone surrogates (what invalid UTF-8 decodes to)
_BEYOND_C0 = "\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
_UNSAFE_KEEPING_LINES = re.compile(f"[\x00-\x09\x0b-\x1f{_BEYOND_C0}]")


def printable(text: str, keep_newlines: bool = False) -> str:
    """`text` with every character a terminal would obey shown as an escape (`\\x1b`, `\\u202e`) instead.

    `keep_newlines` keeps `\\n` for text whose line breaks are teleclaude's own (an error's lines); a value
    from outside (a reason, an agent's status) has its line breaks escaped too, so it cannot forge a line.
    """
    return (_UNSAFE_KEEPING_LINES if keep_newlines else _UNSAFE).sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
