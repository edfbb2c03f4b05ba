"""One pass over a markdown file that finds its headings and task items, with source lines.

mistune decides what is a list item (so items in code blocks, block quotes and HTML are never items), but it
keeps no source positions and does not know the `[>]` marker. Before parsing, every line that starts like a
task item gets an invisible line tag right after its marker; the tag survives into the item's text, which
tells us which source line each real item came from. Tags inside code or HTML are simply never seen.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import mistune

from teleclaude.planner.core.model import Heading, TaskItem

# A line that could open a task item: bullet or ordered marker, then `[ ]`, `[x]`, `[X]` or `[>]`.
TASK_LINE = re.compile(r"^([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[[ xX>]\])", re.MULTILINE)
_TAG_OPEN, _TAG_CLOSE = "\ue000", "\ue001"
_TAGGED_TEXT = re.compile(r"\[([ xX>])\]" + _TAG_OPEN + r"(\d+)" + _TAG_CLOSE + r"(.*)", re.DOTALL)

_markdown = mistune.create_markdown(renderer=None)
Token = dict[str, Any]  # mistune's token: {"type": ..., "children": [...], "attrs": {...}, "raw": ...}


def _parse(text: str) -> list[Token]:
    tokens = _markdown(text)
    assert not isinstance(tokens, str)  # without a renderer mistune returns its tokens
    return tokens


Block = Heading | TaskItem

# For `teleclaude lint`: a line a reader would take for a task item, near misses included (`- []`, `-[ ]`,
# `- [o]`, `[ ] text` without a bullet). Real items match too; `near_items` keeps the ones that are not.
NEAR_TASK_LINE = re.compile(
    r"^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]*\[[ \txXoOvV>*.~\u2713\u2714-]{0,3}\]|\[[ xX>]?\][ \t])",
    re.MULTILINE,
)
# Git's conflict markers at the start of a line (`=======` alone is also a setext underline, so not that one).
_CONFLICT_MARKER = re.compile(r"^(?:<{7}|\|{7}|>{7})(?: |$)", re.MULTILINE)
# A task item after a character some editors show as a line break but markdown does not: form feed,
# vertical tab, NEL, U+2028/U+2029 and the ASCII separators. Such an item is running text.
_HIDDEN_TASK = re.compile(r"[\v\f\x1c-\x1e\x85\u2028\u2029][ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]*\[[ xX>]\]")
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+|(?=\r?$))", re.MULTILINE)
_SETEXT_TEXT = re.compile(r"^[^\n]*\S[^\n]*(?=\r?\n {0,3}(?:=+|-+)[ \t]*\r?$)", re.MULTILINE)
_TAG = re.compile(_TAG_OPEN + r"(\d+)" + _TAG_CLOSE)


@dataclass(frozen=True)
class SourceHeading(Heading):
    """A heading that knows its 1-based source line (from `located_blocks`, for lint messages)."""

    line: int = 0


_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def decode(data: bytes) -> str:
    """Text of a file for parsing, every line end (CRLF, LF, a bare CR) read as `\\n` (docs/design.md §1)."""
    text = decoded(data)[2]
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def decoded(data: bytes) -> tuple[bytes, str, str]:
    """(byte order mark, codec, text) of a file: UTF-8 or UTF-16 after their BOM, else UTF-8; bytes that are
    neither are read as Latin-1 rather than refused. `text.encode(codec)` is the bytes after the BOM."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return bom, codec, data[len(bom) :].decode(codec)
            except UnicodeDecodeError:
                break
    try:
        return b"", "utf-8", data.decode("utf-8")
    except UnicodeDecodeError:
        return b"", "latin-1", data.decode("latin-1")


def conflict_lines(text: str) -> tuple[int, ...]:
    """Lines holding a git conflict marker (`<<<<<<<`, `|||||||`, `>>>>>>>`): the file is mid-merge."""
    return tuple(_line_of(text, match.start()) for match in _CONFLICT_MARKER.finditer(text))


def hidden_task_lines(text: str) -> tuple[int, ...]:
    """Lines where a task item follows a form feed, NEL, U+2028 or the like: it reads as text, not an item."""
    return tuple(_line_of(text, match.start()) for match in _HIDDEN_TASK.finditer(text))


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


@lru_cache(maxsize=64)
def blocks(text: str) -> tuple[Block, ...]:
    """Headings and task items in document order (nested items included, quotes/code/HTML excluded)."""
    found: list[Block] = []
    _walk(_parse(_tag_task_lines(text)), found, depth=0)
    return tuple(found)


def task_items(text: str) -> tuple[TaskItem, ...]:
    return tuple(b for b in blocks(text) if isinstance(b, TaskItem))


@lru_cache(maxsize=16)
def located_blocks(text: str) -> tuple[Block, ...]:
    """`blocks`, with every heading a `SourceHeading` that knows its line. Costs a second parse: lint only."""
    found: list[Block] = []
    _walk(_parse(_tag_heading_lines(_tag_task_lines(text))), found, depth=0)
    return tuple(found)


@lru_cache(maxsize=16)
def near_items(text: str, pattern: re.Pattern[str] = NEAR_TASK_LINE) -> tuple[int, ...]:
    """Lines matching `pattern` that mistune reads as running text (a paragraph or a list item's text, not
    code, HTML or a quote) and that are not the first line of a task item: what looks like an item, isn't.
    """
    tagged = _tag_line_ends(text, pattern)
    lines: list[int] = []
    _collect_text_tags(_parse(tagged), lines)
    real = {task.line for task in task_items(text)}
    return tuple(sorted(set(lines) - real))


def _tag_line_ends(text: str, pattern: re.Pattern[str]) -> str:
    pieces, last, line = [], 0, 1
    for match in pattern.finditer(text):
        line += text.count("\n", last, match.start())
        end = text.find("\n", match.start())
        end = len(text) if end == -1 else end
        if end > match.start() and text[end - 1] == "\r":
            end -= 1
        pieces += [text[last:end], f"{_TAG_OPEN}{line}{_TAG_CLOSE}"]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _collect_text_tags(tokens: list[Token], lines: list[int]) -> None:
    for token in tokens:
        kind = token["type"]
        if kind in ("paragraph", "block_text"):
            lines.extend(int(number) for number in _TAG.findall(plain_text(token["children"])))
        elif kind in ("list", "list_item"):
            _collect_text_tags(token.get("children", []), lines)


def _tag_heading_lines(text: str) -> str:
    """A line tag at the start of every ATX heading's text and at the end of every setext heading's text."""
    starts = {m.end(): m.start() for m in _ATX_HEADING.finditer(text)}
    ends = {m.end(): m.start() for m in _SETEXT_TEXT.finditer(text)}
    pieces, last = [], 0
    for position in sorted(starts.keys() | ends.keys()):
        line_start = starts.get(position, ends.get(position))
        line = text.count("\n", 0, line_start) + 1
        pieces += [text[last:position], f"{_TAG_OPEN}{line}{_TAG_CLOSE}"]
        last = position
    pieces.append(text[last:])
    return "".join(pieces)


def _tag_task_lines(text: str) -> str:
    pieces, last, line = [], 0, 1
    for match in TASK_LINE.finditer(text):
        line += text.count("\n", last, match.start())
        pieces += [text[last : match.end()], f"{_TAG_OPEN}{line}{_TAG_CLOSE}"]
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


def _walk(tokens: list[Token], found: list[Block], depth: int) -> None:
    for token in tokens:
        kind = token["type"]
        if kind == "heading":
            found.append(_heading(token))
        elif kind == "list":
            for item in token["children"]:
                _list_item(item, found, depth)


def _list_item(item: Token, found: list[Block], depth: int) -> None:
    children = item.get("children", [])
    if children and children[0]["type"] in ("block_text", "paragraph"):
        match = _TAGGED_TEXT.match(plain_text(children[0]["children"]))
        if match:
            mark, line, rest = match.groups()
            found.append(TaskItem(int(line), mark, _untagged(rest).strip(), depth))
    for child in children:
        if child["type"] == "list":
            for nested in child["children"]:
                _list_item(nested, found, depth + 1)


def _heading(token: Token) -> Heading:
    text = plain_text(token["children"])
    level, clean = token["attrs"]["level"], _untagged(text).strip()
    tag = _TAG.search(text)  # only `located_blocks` tags heading lines
    return SourceHeading(level, clean, int(tag[1])) if tag else Heading(level, clean)


def plain_text(tokens: list[Token]) -> str:
    """Inline tokens as the reader sees them: emphasis and code marks dropped, soft breaks as newlines."""
    parts = []
    for token in tokens:
        if "children" in token:
            parts.append(plain_text(token["children"]))
        elif token["type"] in ("softbreak", "linebreak"):
            parts.append("\n")
        else:
            parts.append(token.get("raw", ""))
    return "".join(parts)


def _untagged(text: str) -> str:
    """Tags that landed where they do not open an item (e.g. a lazy continuation line) are removed."""
    if _TAG_OPEN not in text:
        return text
    return re.sub(_TAG_OPEN + r"\d+" + _TAG_CLOSE, "", text)
