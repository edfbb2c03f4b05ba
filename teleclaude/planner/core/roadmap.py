"""todos/roadmap.md: parsing items, and rewriting one item's marker without touching any other byte."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from teleclaude.planner.core.lazy_re import compiled
from teleclaude.planner.core.markdown import TASK_LINE, Block, chunk_summaries, decoded
from teleclaude.planner.core.model import Marker, Problem, Roadmap, RoadmapItem, TaskItem

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import AnyStr

    from teleclaude.planner.core.markdown import Summary

SLUG = compiled(r"[a-z0-9][a-z0-9-]{0,62}")
_ITEM_TEXT = compiled(
    r"(?P<slug>[^\s:(—–]*)\s*(?:\(after:(?P<after>[^)]*)\))?\s*(?:[—–:-]+\s*)?(?P<description>.*)", re.DOTALL
)


def slug_problem(slug: str) -> str | None:
    """Why `slug` cannot name a folder and a branch, or None when it can."""
    if not slug:
        return "the slug is empty"
    if not SLUG.fullmatch(slug):
        return (
            f"{slug[:80]!r} is not a valid slug: use 1-63 characters a-z, 0-9 and '-', "
            "starting with a letter or digit"
        )
    if "--" in slug or slug.endswith("-"):
        return f"{slug!r} is not a valid slug: no '--' and no trailing '-'"
    return None


def blocking_problems(roadmap: Roadmap) -> tuple[Problem, ...]:
    """Problems that stop a slug-less call: an open item whose slug or dependencies cannot be read."""
    return tuple(p for p in roadmap.problems if p.code.startswith("INVALID"))


_recent: dict[str, Summary] = {}  # the chunks of the last roadmap parsed in this process


@lru_cache(maxsize=16)
def parse_roadmap(text: str) -> Roadmap:
    global _recent
    roadmap, _recent = parse_roadmap_chunks(text, _recent)
    return roadmap


def parse_roadmap_chunks(text: str, known: Mapping[str, Summary]) -> tuple[Roadmap, dict[str, Summary]]:
    """The roadmap, reusing the chunk summaries in `known` (see `markdown.chunk_summaries`), and the
    summaries it used. A `known` that does not have the expected shape, or that says of a line what the
    line does not say, is ignored, never trusted."""
    try:
        roadmap, used = _roadmap_from(text, known)
        if known:
            _check_lines(text, roadmap)
        return roadmap, used
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        if not known:
            raise
        return _roadmap_from(text, {})


# What `slug_problem` accepts, as a pattern: 1-63 characters, no '--', no '-' at either end.
_VALID_SLUG = r"(?=[a-z0-9-]{1,63}(?![a-z0-9-]))[a-z0-9]+(?:-[a-z0-9]+)*(?![\w-])"
# A task line as `_check_lines` reads it: its marker, then its slug (markup such as `**` or a backtick
# before it allowed), then any `(after: …)` on the same line. The prefix is TASK_LINE's.
_ITEM_LINE = compiled(
    rf"[ \t]*(?:[-*+]|\d{{1,9}}[.)])[ \t]+\[([ xX>])\][\W_]*?({_VALID_SLUG})[^\w(\n]*(?:\(after:([^)\n]*)\))?"
)
_VALID_AFTER = compiled(rf" *{_VALID_SLUG}(?: *, *{_VALID_SLUG})* *")


def _check_lines(text: str, roadmap: Roadmap) -> None:
    """Raise ValueError unless every item sits on a task line of `text` with its marker, slug and
    dependencies, and every problem on a task line that agrees with the items: a summary from the cache is
    checked against the text it claims to describe (a forged one may carry the right key). One match per
    item, no parse; an item written in a way this does not read (its dependencies on the next line) only
    costs a parse afresh."""
    lines = text.split("\n")
    count, match, markers = len(lines), _ITEM_LINE.match, _MARKERS
    for item in roadmap.items:
        line = item.line
        found = match(lines[line - 1]) if 0 < line <= count else None
        if found is None:
            raise ValueError(f"line {line} holds no task item, so not the cached {item.slug!r}")
        mark, slug, after = found.groups()
        if slug != item.slug or markers[mark] is not item.marker or not _same_after(after, item.after):
            raise ValueError(f"line {line} does not hold the cached item {item.slug!r}")
    items = {item.line for item in roadmap.items} if roadmap.problems else set()
    for problem in roadmap.problems:
        if not (0 < problem.line <= count and TASK_LINE.match(lines[problem.line - 1])):
            raise ValueError(f"line {problem.line} holds no item, so no cached problem")
        # An item with a bad dependency is kept; one with a bad slug is not an item.
        if (problem.line in items) is not (problem.code == "INVALID_DEPENDENCY"):
            raise ValueError(f"line {problem.line}: the cached problem contradicts the cached items")


def _same_after(text: str | None, after: tuple[str, ...]) -> bool:
    """Whether `after` is what `_item` keeps of the `(after: …)` list `text`: its valid slugs."""
    if not text:
        return not after
    if _VALID_AFTER.fullmatch(text):  # the usual list: every slug valid, only spaces around them
        return text.replace(" ", "") == ",".join(after)
    found = (dep.strip() for dep in text.split(","))
    return tuple(dep for dep in found if dep and slug_problem(dep) is None) == after


_MARKERS = {char: Marker.from_char(char) for char in " xX>"}


def _roadmap_from(text: str, known: Mapping[str, Summary]) -> tuple[Roadmap, dict[str, Summary]]:
    chunks, used = chunk_summaries(text, "roadmap", _summarize, known)
    items: list[RoadmapItem] = []
    problems: list[Problem] = []
    for first, (slugs, marks, lines, afters, descriptions, chunk_problems) in chunks:
        offset = first - 1
        if marks:
            slug_list, after_list, description_list = (
                slugs.split("\n"),
                afters.split("\n"),
                descriptions.split("\n"),
            )
            if not len(marks) == len(slug_list) == len(lines) == len(after_list) == len(description_list):
                raise ValueError("a chunk summary of the wrong shape")
            items.extend(
                map(
                    RoadmapItem,
                    slug_list,
                    map(_MARKERS.__getitem__, marks),
                    [line + offset for line in lines],
                    [tuple(after.split(",")) if after else () for after in after_list],
                    description_list,
                )
            )
        elif slugs or lines or afters or descriptions:
            raise ValueError("a chunk summary of the wrong shape")
        for line, code, message in chunk_problems:
            problems.append(Problem(line + offset, code, message))
    return Roadmap(tuple(items), tuple(problems)), used


def _summarize(blocks: tuple[Block, ...]) -> Summary:
    """A chunk's items as columns, quick to load and to turn into items: their slugs joined by newlines,
    their marks as one string, their lines, their dependencies (each item's joined by commas, the items' by
    newlines) and their descriptions joined by newlines (none of these holds a newline or a slug a comma);
    then its problems as [line, code, message]."""
    rows: list[tuple[str, str, int, str, str]] = []
    problems: list[Problem] = []
    for task in blocks:
        if isinstance(task, TaskItem):
            item = _item(task, problems)
            if item is not None:
                rows.append((item.slug, task.mark, item.line, ",".join(item.after), item.description))
    slugs, marks, lines, afters, descriptions = zip(*rows, strict=True) if rows else ((),) * 5
    return [
        "\n".join(slugs),
        "".join(marks),
        list(lines),
        "\n".join(afters),
        "\n".join(descriptions),
        [[p.line, p.code, p.message] for p in problems],
    ]


def _item(task: TaskItem, problems: list[Problem]) -> RoadmapItem | None:
    match = _ITEM_TEXT.match(task.text)
    assert match is not None  # every part of the pattern may be empty: it matches any text
    slug, after_text, description = match["slug"], match["after"], match["description"]
    marker = Marker.from_char(task.mark)
    problem = slug_problem(slug)
    if problem:
        # A finished item with a free-text title is history; only open items must name a branch.
        code = "DONE_ITEM_IGNORED" if marker is Marker.DONE else "INVALID_SLUG"
        problems.append(Problem(task.line, code, problem))
        return None
    after = []
    for dep in filter(None, (dep.strip() for dep in (after_text or "").split(","))):
        dep_problem = slug_problem(dep)
        if dep_problem:
            problems.append(Problem(task.line, "INVALID_DEPENDENCY", f"after: {dep_problem}"))
        else:
            after.append(dep)
    return RoadmapItem(slug, marker, task.line, tuple(after), " ".join(description.split()))


def may_be_pending(text: str, slug: str) -> bool:
    """False when no line of `text` could hold a `[ ]` item named `slug`.

    Items only ever come from lines that match TASK_LINE, so this plain scan lets a call that names its
    slug skip parsing the whole roadmap once the item is `[>]` (the steady state of a build).
    """
    pending_line = r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[ \][^\n]*?" + re.escape(slug)
    return re.search(pending_line, text.replace("\\", ""), re.MULTILINE) is not None


_LINE_END = compiled(r"\r\n|\r|\n")


class MarkerRewriteError(ValueError):
    pass


def rewrite_marker(data: bytes, line: int, new: Marker) -> bytes:
    """`data` with the marker on 1-based `line` set to `new`: exactly one character changes (or none).

    Lines and encoding are read as `decode` reads them (LF, CRLF or bare CR; UTF-8, UTF-16 or Latin-1), and
    the result keeps the file's own encoding and byte order mark.
    """
    bom, codec, text = decoded(data)
    if not bom and codec == "utf-8":  # the usual file: line ends are the same bytes, so work on the bytes
        start, end_ = _line_span(data, _LINE_END_BYTES, line)
        match = TASK_LINE.match(data[start:end_].decode("utf-8"))
        if not match:
            raise MarkerRewriteError(f"line {line} is not a task item")
        position = start + len(match[0][:-2].encode("utf-8"))  # the byte between the brackets
        return data[:position] + new.value.encode("ascii") + data[position + 1 :]
    start, end = _line_span(text, _LINE_END, line)
    match = TASK_LINE.match(text[start:end])
    if not match:
        raise MarkerRewriteError(f"line {line} is not a task item")
    position = start + match.end() - 2  # the character between the brackets
    return bom + (text[:position] + new.value + text[position + 1 :]).encode(codec)


_LINE_END_BYTES = compiled(rb"\r\n|\r|\n")


def _line_span(text: AnyStr, line_end: re.Pattern[AnyStr], line: int) -> tuple[int, int]:
    """Where 1-based `line` starts and ends (before its line end) in `text`."""
    ends = line_end.finditer(text)
    start = 0
    for _ in range(line - 1):
        end = next(ends, None)
        if end is None:
            raise MarkerRewriteError(f"the file has no line {line}")
        start = end.end()
    end = next(ends, None)
    return start, end.start() if end else len(text)
