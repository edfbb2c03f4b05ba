"""One pass over a markdown file that finds its headings and task items, with source lines.

mistune decides what is a list item (so items in code blocks, block quotes and HTML are never items), but it
keeps no source positions and does not know the `[>]` marker. Before parsing, every line that starts like a
task item gets an invisible line tag right after its marker; the tag survives into the item's text, which
tells us which source line each real item came from. Tags inside code or HTML are simply never seen.
"""

from __future__ import annotations

import re
from functools import lru_cache

import mistune

from teleclaude.core.model import Heading, TaskItem

# A line that could open a task item: bullet or ordered marker, then `[ ]`, `[x]`, `[X]` or `[>]`.
TASK_LINE = re.compile(r"^([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[[ xX>]\])", re.MULTILINE)
_TAG_OPEN, _TAG_CLOSE = "\ue000", "\ue001"
_TAGGED_TEXT = re.compile(r"\[([ xX>])\]" + _TAG_OPEN + r"(\d+)" + _TAG_CLOSE + r"(.*)", re.DOTALL)

_parse = mistune.create_markdown(renderer=None)

Block = Heading | TaskItem


def decode(data: bytes) -> str:
    """Text of a file for parsing; bytes that are not UTF-8 are read as Latin-1 rather than refused."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


@lru_cache(maxsize=64)
def blocks(text: str) -> tuple[Block, ...]:
    """Headings and task items in document order (nested items included, quotes/code/HTML excluded)."""
    found: list[Block] = []
    _walk(_parse(_tag_task_lines(text)), found, depth=0)
    return tuple(found)


def task_items(text: str) -> tuple[TaskItem, ...]:
    return tuple(b for b in blocks(text) if isinstance(b, TaskItem))


def _tag_task_lines(text: str) -> str:
    pieces, last, line = [], 0, 1
    for match in TASK_LINE.finditer(text):
        line += text.count("\n", last, match.start())
        pieces += [text[last : match.end()], f"{_TAG_OPEN}{line}{_TAG_CLOSE}"]
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


def _walk(tokens: list[dict], found: list[Block], depth: int) -> None:
    for token in tokens:
        kind = token["type"]
        if kind == "heading":
            found.append(Heading(token["attrs"]["level"], _untagged(plain_text(token["children"])).strip()))
        elif kind == "list":
            for item in token["children"]:
                _list_item(item, found, depth)


def _list_item(item: dict, found: list[Block], depth: int) -> None:
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


def plain_text(tokens: list[dict]) -> str:
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
