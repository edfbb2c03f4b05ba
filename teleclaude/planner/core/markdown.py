"""One pass over a markdown file that finds its headings and task items, with source lines.

mistune decides what is a list item (so items in code blocks, block quotes and HTML are never items), but it
keeps no source positions and does not know the `[>]` marker. Before parsing, every line that starts like a
task item gets an invisible line tag right after its marker; the tag survives into the item's text, which
tells us which source line each real item came from. Tags inside code or HTML are simply never seen.

Large files are parsed in chunks that end where a top-level item starts (`chunk_summaries`): each chunk is
parsed on its own, so only a changed chunk is parsed again, and a chunk's result is reused by the hash of
its text. A chunk counts only when mistune itself agrees that the line after it opens a top-level item;
otherwise it grows into the next one. Before any text reaches mistune, `check_limits` refuses what would
cost it quadratic time or memory (docs/design.md §1 "Limits").
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from teleclaude.errors import ErrorCode, Failure
from teleclaude.planner.core.lazy_re import compiled
from teleclaude.planner.core.model import Heading, TaskItem

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import Any

    Token = dict[str, Any]  # mistune's token: {"type": ..., "children": [...], "attrs": {...}, "raw": ...}
    Summary = Any  # what a parser keeps of a chunk's blocks: JSON-able (lists, strings, numbers, None)

# A line that could open a task item: bullet or ordered marker, then `[ ]`, `[x]`, `[X]` or `[>]`.
TASK_LINE = compiled(r"^([ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[[ xX>]\])", re.MULTILINE)
_TAG_OPEN, _TAG_CLOSE = "\ue000", "\ue001"
_TAGGED_TEXT = compiled(r"\[([ xX>])\]" + _TAG_OPEN + r"(\d+)" + _TAG_CLOSE + r"(.*)", re.DOTALL)


@lru_cache(maxsize=1)
def _markdown() -> Any:
    import mistune  # ~15 ms: a call whose chunks are all cached never pays for it

    return mistune.create_markdown(renderer=None)


def _parse(text: str) -> list[Token]:
    check_limits(text)
    tokens: list[Token] = _markdown()(text)  # without a renderer mistune returns its tokens
    return tokens


# Limits (docs/design.md §1): past them a file is refused rather than parsed for minutes in gigabytes.
MAX_INDENT = 200  # columns of leading spaces, tabs (4 columns) and `>` on one line: ~100 nested levels
MAX_CHUNK_CHARS = 2_000_000  # characters without a line where a top-level item could start
_DEEP_LINE = compiled(rf"^[ \t>]{{{MAX_INDENT // 4 + 1},}}", re.MULTILINE)


class TooComplex(Failure):
    """A markdown file past the documented parse limits."""

    code = ErrorCode.FILE_ERROR
    next_step = "Flatten the nesting or split the file (see docs/design.md, Limits), then call again."


def check_limits(text: str) -> None:
    for match in _DEEP_LINE.finditer(text):
        width = sum(4 if char == "\t" else 1 for char in match[0])
        if width > MAX_INDENT:
            line = _line_of(text, match.start())
            raise TooComplex(
                f"line {line} is nested {width} columns deep; at most {MAX_INDENT} columns "
                "of indentation and `>` are read"
            )


Block = Heading | TaskItem

# For `teleclaude lint`: a line a reader would take for a task item, near misses included (`- []`, `-[ ]`,
# `- [o]`, `[ ] text` without a bullet). Real items match too; `near_items` keeps the ones that are not.
NEAR_TASK_LINE = compiled(
    r"^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]*\[[ \txXoOvV>*.~\u2713\u2714-]{0,3}\]|\[[ xX>]?\][ \t])",
    re.MULTILINE,
)
# Git's conflict markers at the start of a line (`=======` alone is also a setext underline, so not that one).
_CONFLICT_MARKER = compiled(r"^(?:<{7}|\|{7}|>{7})(?: |$)", re.MULTILINE)
# A task item after a character some editors show as a line break but markdown does not: form feed,
# vertical tab, NEL, U+2028/U+2029 and the ASCII separators. Such an item is running text.
_HIDDEN_TASK = compiled(r"[\v\f\x1c-\x1e\x85\u2028\u2029][ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]*\[[ xX>]\]")
_ATX_HEADING = compiled(r"^ {0,3}#{1,6}(?:[ \t]+|(?=\r?$))", re.MULTILINE)
_SETEXT_TEXT = compiled(r"^[^\n]*\S[^\n]*(?=\r?\n {0,3}(?:=+|-+)[ \t]*\r?$)", re.MULTILINE)
_TAG = compiled(_TAG_OPEN + r"(\d+)" + _TAG_CLOSE)


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
    if "<<<<<<<" not in text and "|||||||" not in text and ">>>>>>>" not in text:
        return ()  # the usual case, without scanning every line start of a large file
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


# --- chunks ------------------------------------------------------------------------------------------

# A task item at column 0: where a chunk may end. Group 1 (the text after the marker) picks which ones do,
# so that boundaries depend on the text around them, not on their position, and survive edits elsewhere.
# Chunks are cut and hashed in the UTF-8 bytes of the text (encoded once; no copy of a chunk is made unless
# it is parsed), so the pattern is a bytes one.
_TOP_ITEM = compiled(rb"^(?:[-*+]|\d{1,9}[.)])[ \t]+\[[ xX>]\]([^\n]*)", re.MULTILINE)
CHUNK_SPREAD = 32  # about one column-0 item in 32 ends a chunk (a power of two: `crc & (SPREAD - 1)`)
CHUNK_FORMAT = "3"  # part of every chunk key: bump it when a summary's shape or meaning changes


def chunk_summaries(
    text: str,
    kind: str,
    summarize: Callable[[tuple[Block, ...]], Summary],
    known: Mapping[str, Summary],
) -> tuple[list[tuple[int, Summary]], dict[str, Summary]]:
    """(first line, summary) of every chunk of `text` in order, and every {key: summary} this consulted.

    `summarize` turns a chunk's blocks (lines counted from the chunk's first line) into a JSON-able value.
    A summary is taken from `known` when the key (the hash of `kind`, the chunk and the line after it) is
    there, else computed; the second value holds every key used, so a caller can keep exactly those. One
    more key, the hash of the whole text, lists the file's chunks: a file met again unchanged is not cut up.
    """
    data = text.encode("utf-8", "surrogatepass")
    view = memoryview(data)
    whole = _chunk_key(f"{kind}/whole", view, b"")  # a file parsed before as it is: its chunks are listed
    listed = _listed(known.get(whole), known)
    if listed is not None:
        return [(line, known[key]) for line, key in listed], dict(known)  # `known` is that parse's keys
    from zlib import crc32

    spread = CHUNK_SPREAD - 1
    starts = [0]
    starts += [m.start() for m in _TOP_ITEM.finditer(data, 1) if not crc32(m[1]) & spread]
    starts.append(len(data))
    out: list[tuple[int, Summary]] = []
    used: dict[str, Summary] = {}
    listing: list[list[Any]] = []
    index, line = 0, 1
    while index < len(starts) - 1:
        span = 1
        while True:
            first, end = starts[index], starts[min(index + span, len(starts) - 1)]
            after = _first_line(data, end)
            key = _chunk_key(kind, view[first:end], after)
            if key in known:
                summary = known[key]
            else:
                body = data[first:end].decode("utf-8", "surrogatepass")
                summary = _summarize_chunk(body, after.decode("utf-8", "surrogatepass"), line, summarize)
            used[key] = summary
            if summary is not None or index + span >= len(starts) - 1:
                break
            span *= 2  # mistune read the line after it as something else: grow (doubling keeps it linear)
        out.append((line, summary))
        listing.append([line, key])
        line += data.count(b"\n", first, end)
        index += span
    used[whole] = listing
    return out, used


def _listed(listing: Summary, known: Mapping[str, Summary]) -> list[tuple[int, str]] | None:
    """The [first line, chunk key] pairs of a whole file's entry, or None unless every chunk is known."""
    if not isinstance(listing, list):
        return None
    pairs = []
    for pair in listing:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int)):
            return None
        if not (isinstance(pair[1], str) and pair[1] in known):
            return None
        pairs.append((pair[0], pair[1]))
    return pairs


def _first_line(data: bytes, position: int) -> bytes:
    end = data.find(b"\n", position)
    return data[position : len(data) if end == -1 else end]


def _chunk_key(kind: str, body: memoryview, after: bytes) -> str:
    """The hash of `CHUNK_FORMAT`, `kind`, the chunk's bytes and the line after it, NUL-separated."""
    digest = _blake2b()(f"{CHUNK_FORMAT}\0{kind}\0".encode(), digest_size=16)
    digest.update(body)
    digest.update(b"\0")
    digest.update(after)
    key: str = digest.hexdigest()
    return key


@lru_cache(maxsize=1)
def _blake2b() -> Any:
    try:
        from _blake2 import blake2b  # hashlib's own, without loading OpenSSL first (~3 ms)
    except ImportError:  # pragma: no cover - an interpreter without the module
        from hashlib import blake2b
    return blake2b


def _summarize_chunk(
    body: str, after: str, line: int, summarize: Callable[[tuple[Block, ...]], Summary]
) -> Summary:
    """The summary of `body` parsed on its own, or None unless `after` then opens a top-level item."""
    if len(body) > MAX_CHUNK_CHARS:
        raise TooComplex(
            f"the {len(body):,} characters from line {line} on hold no top-level item where parsing could "
            f"pause; at most {MAX_CHUNK_CHARS:,} are parsed at once"
        )
    if not after:
        return summarize(blocks(body))
    lines = body.count("\n")
    found = blocks(body + after)
    last = found[-1] if found else None
    if not (isinstance(last, TaskItem) and last.line == lines + 1 and last.depth == 0):
        return None
    return summarize(found[:-1])
