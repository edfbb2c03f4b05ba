"""Text from users and agents made safe for a terminal: the one escaping function every renderer uses, and
the one rule for text typed into a worker's pane."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    import re

# C0 and C1 controls (ESC starts ANSI/OSC sequences; \x9b is a one-byte CSI), DEL, the Unicode line and
# paragraph separators, bidirectional overrides, and lone surrogates (what invalid UTF-8 decodes to)
_BEYOND_C0 = "\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = f"[\x00-\x1f{_BEYOND_C0}]"
_UNSAFE_KEEPING_LINES = f"[\x00-\x09\x0b-\x1f{_BEYOND_C0}]"


def printable(text: str, keep_newlines: bool = False) -> str:
    """`text` with every character a terminal would obey shown as an escape (`\\x1b`, `\\u202e`) instead.

    `keep_newlines` keeps `\\n` for text whose line breaks are teleclaude's own (an error's lines); a value
    from outside (a reason, an agent's status) has its line breaks escaped too, so it cannot forge a line.
    """
    if text.isprintable():  # every character above is not (Cc, Cf, Cs, Zl, Zp): nothing to escape, no `re`
        return text
    return _pattern(_UNSAFE_KEEPING_LINES if keep_newlines else _UNSAFE).sub(_escape, text)


def untypable(text: str) -> str | None:
    """The first character of `text` that may not be typed into a worker's pane, escaped as `printable`
    shows it (`\\x03`); None when every character is plain text.

    Keys typed into a pane are obeyed, not shown: Ctrl-C (\\x03) kills the agent, a carriage return submits
    a line of its own, ESC starts a sequence (a bracketed paste's end), DEL erases, a C1 control is a
    one-byte CSI; a bidi override or a line separator makes the worker read other than what was sent. So the
    rule is `printable`'s: refused is exactly what it would escape, tab and newline included.
    """
    found = None if text.isprintable() else _pattern(_UNSAFE).search(text)
    return _escape(found) if found else None


def _pattern(source: str) -> re.Pattern[str]:
    """The pattern compiled (by `re`'s own cache): `re` is imported only for text that needs it, so a hook
    that prints a plain line does without it (it costs a third of Python's start)."""
    import re

    return re.compile(source)


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
