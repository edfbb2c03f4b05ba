"""todos/roadmap.md: parsing items, and rewriting one item's marker without touching any other byte."""

from __future__ import annotations

import re
from functools import lru_cache

from teleclaude.planner.core.markdown import TASK_LINE, task_items
from teleclaude.planner.core.model import Marker, Problem, Roadmap, RoadmapItem, TaskItem

SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_ITEM_TEXT = re.compile(
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


@lru_cache(maxsize=16)
def parse_roadmap(text: str) -> Roadmap:
    items: list[RoadmapItem] = []
    problems: list[Problem] = []
    for task in task_items(text):
        item = _item(task, problems)
        if item is not None:
            items.append(item)
    return Roadmap(tuple(items), tuple(problems))


def _item(task: TaskItem, problems: list[Problem]) -> RoadmapItem | None:
    match = _ITEM_TEXT.match(task.text)
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


class MarkerRewriteError(ValueError):
    pass


def rewrite_marker(data: bytes, line: int, new: Marker) -> bytes:
    """`data` with the marker on 1-based `line` set to `new`; exactly one byte changes (or none)."""
    start = 0
    for _ in range(line - 1):
        start = data.find(b"\n", start) + 1
        if start == 0:
            raise MarkerRewriteError(f"the file has no line {line}")
    end = data.find(b"\n", start)
    text_line = data[start : end if end != -1 else len(data)]
    offset = 3 if line == 1 and text_line.startswith(b"\xef\xbb\xbf") else 0
    match = TASK_LINE.match(text_line[offset:].decode("latin-1"))
    if not match:
        raise MarkerRewriteError(f"line {line} is not a task item")
    position = start + offset + match.end() - 2  # the character between the brackets
    return data[:position] + new.value.encode() + data[position + 1 :]
