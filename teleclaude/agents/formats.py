"""The text formats drivers write: TOML strings, a markdown file's front matter (pure)."""

from __future__ import annotations

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def basic_string(text: str) -> str:
    """A one-line TOML basic string."""
    return '"' + "".join(_ESCAPES.get(char) or _control(char) for char in text) + '"'


def multiline_string(text: str) -> str:
    """A TOML multi-line basic string holding exactly `text` (TOML trims the newline after the opening)."""
    out, quotes = [], 0
    for char in text:
        quotes = quotes + 1 if char == '"' else 0
        if quotes == 3:  # three quotes in a row would close the string
            out.append('\\"')
            quotes = 0
        elif char == "\\":
            out.append("\\\\")
        elif char in '\n\t"':
            out.append(char)
        else:
            out.append(_control(char))
    if out and out[-1] == '"':  # a quote right before the closing delimiter would merge with it
        out[-1] = '\\"'
    return '"""\n' + "".join(out) + '"""'


def _control(char: str) -> str:
    """Characters TOML strings may not hold raw (controls other than tab and newline, and DEL), escaped."""
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return _ESCAPES.get(char, f"\\u{code:04X}")
    return char


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """(`key: value` pairs of a leading `---` block, the rest of the text)."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 3)
    if end == -1:
        return {}, text
    meta = {}
    for line in text[4:end].splitlines():
        key, colon, value = line.partition(":")
        if colon:
            meta[key.strip()] = value.strip()
    return meta, text[end + len("\n---\n") :]
