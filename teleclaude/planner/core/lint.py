"""`teleclaude lint`: what is wrong in todos/ and done/, found with the planner's own parsers.

Pure: texts in, `Finding`s out. The caller decides which texts (the working copy, or the staged blobs of a
commit) and gives the names of the `done/` archive folders. Every code has one severity (`SEVERITY`):
errors are states the planner refuses or misreads; warnings are states it reads fine but probably not as
the author meant.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from teleclaude.planner.core.decide import open_dependencies
from teleclaude.planner.core.layout import BUGS, DONE, PLAN, REVIEW, ROADMAP, archive_parts
from teleclaude.planner.core.markdown import (
    Block,
    conflict_lines,
    hidden_task_lines,
    located_blocks,
    near_items,
)
from teleclaude.planner.core.model import Marker, Roadmap, RoadmapItem, TaskItem
from teleclaude.planner.core.plan import GROUP_HEADING, parse_plan, tasks_by_group
from teleclaude.planner.core.review import parse_review, verdict_items
from teleclaude.planner.core.roadmap import parse_roadmap, slug_problem


class Severity(Enum):
    ERROR = "error"
    WARNING = "warning"


E, W = Severity.ERROR, Severity.WARNING
SEVERITY: dict[str, Severity] = {
    # roadmap
    "INVALID_SLUG": E,  # an open item's slug cannot name a folder and a branch
    "INVALID_DEPENDENCY": E,  # an `(after: …)` entry that is not a slug
    "DUPLICATE_SLUG": E,
    "CYCLIC_DEPENDENCY": E,
    "ACTIVE_BLOCKED": E,  # `[>]` on an item whose dependencies are still open
    "UNKNOWN_DEPENDENCY": W,  # neither on the roadmap nor archived: taken as delivered, maybe a typo
    "MISSPELLED_DEPENDENCY": E,  # unknown, and close to a slug that is known: taken as delivered, a typo
    "DEPENDENCY_NOT_READ": E,  # `(afer: x)`, or `(after: x)` after the description: read as its text
    "NO_ROADMAP": W,  # `teleclaude lint` of a checkout without todos/roadmap.md: nothing was checked
    # any todos/ file
    "MALFORMED_ITEM": E,  # looks like a task item (`- []`, `-[ ]`, `[ ] x`) but is not read as one
    "HIDDEN_ITEM": E,  # a task item after a form feed, NEL or U+2028: markdown reads it as text
    "CONFLICT_MARKER": E,  # `<<<<<<<` / `>>>>>>>`: a merge left unfinished; the planner refuses the roadmap
    "ENCODING": E,  # NUL bytes: UTF-16 without a byte order mark, or not text at all
    # implementation-plan.md
    "NO_BUILD_TASK": E,  # not a single build task: the plan does not prepare anything
    "GROUP_HEADING": W,  # a heading that mentions a group but is not read as `Group N`, or a repeated N
    "TASK_OUTSIDE_GROUP": W,  # a checkbox outside every Group when the plan has groups: ignored
    # review-findings.md
    "VERDICT": E,  # not exactly one verdict checked
    # bugs.md
    "BUG_NOT_A_TASK": W,  # a top-level list item without a checkbox: not read as a bug
    # done/
    "ARCHIVE_NAME": E,  # not NNN-slug
    "ARCHIVE_NUMBER_DUPLICATE": W,
    "ARCHIVE_NUMBER_GAP": W,
}

_GROUP_WORD = re.compile(r"\W*groups?\b", re.IGNORECASE)
_BULLET_WITHOUT_BOX = re.compile(r"^(?:[-*+]|\d{1,9}[.)])[ \t]+(?!\[)\S", re.MULTILINE)
_PLAN_PATH = re.compile(r"todos/[^/]+/" + re.escape(PLAN))
_REVIEW_PATH = re.compile(r"todos/[^/]+/" + re.escape(REVIEW))


@dataclass(frozen=True)
class Finding:
    path: str  # relative to the checkout, `/`-separated
    line: int  # 1-based; 0 when it concerns the whole file or folder
    code: str
    severity: Severity
    message: str

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def to_text(self) -> str:
        return f"{self.path}:{self.line}: {self.code} {self.severity.value}: {self.message}"

    def to_dict(self) -> dict[str, str | int]:
        return {
            "path": self.path,
            "line": self.line,
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
        }


def lintable(path: str) -> bool:
    """Whether `lint` has checks for this checkout-relative path (a `done/` path counts for its folder)."""
    return (
        path in (ROADMAP, BUGS)
        or bool(_PLAN_PATH.fullmatch(path) or _REVIEW_PATH.fullmatch(path))
        or path.startswith(DONE + "/")
    )


def no_roadmap() -> Finding:
    message = "there is no roadmap, so nothing was checked: `teleclaude init` creates todos/roadmap.md"
    return _finding(ROADMAP, 0, "NO_ROADMAP", message)


def lint(
    files: Mapping[str, str], done_names: Iterable[str] = (), check_done: bool = True
) -> tuple[Finding, ...]:
    """Findings for `files` (checkout-relative path → text) and, with `check_done`, the `done/` names.

    The names also tell the roadmap check which items are archived; pass them whenever you have them.
    """
    names = tuple(done_names)
    archived = {parts[1] for parts in map(archive_parts, names) if parts}
    findings: list[Finding] = []
    for path, text in sorted(files.items()):
        if path == ROADMAP:
            findings += lint_roadmap(text, archived)
        elif path == BUGS:
            findings += lint_bugs(text)
        elif _PLAN_PATH.fullmatch(path):
            findings += lint_plan(path, text)
        elif _REVIEW_PATH.fullmatch(path):
            findings += lint_review(path, text)
    if check_done:
        findings += lint_done(names)
    return tuple(findings)


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(finding.is_error for finding in findings)


def _finding(path: str, line: int, code: str, message: str) -> Finding:
    return Finding(path, line, code, SEVERITY[code], message)


# --- roadmap ----------------------------------------------------------------------------------------


def lint_roadmap(text: str, archived: set[str] | frozenset[str] = frozenset()) -> list[Finding]:
    roadmap = parse_roadmap(text)
    findings = [
        _finding(ROADMAP, p.line, p.code, p.message)
        for p in roadmap.problems
        if p.code in SEVERITY  # a finished item with a free-text title is history, not a problem
    ]
    findings += _malformed(ROADMAP, text)
    findings += _duplicates(roadmap)
    findings += _dependencies(roadmap, archived)
    findings += _cycles(roadmap)
    return sorted(findings, key=lambda f: f.line)


def _malformed(path: str, text: str) -> list[Finding]:
    """What any todos/ file can get wrong: items that are not read as items, merge leftovers, encodings."""
    findings = [
        _finding(
            path, line, "MALFORMED_ITEM", "looks like a task item but is not read as one; write `- [ ] text`"
        )
        for line in near_items(text)
    ]
    findings += [
        _finding(
            path,
            line,
            "HIDDEN_ITEM",
            "a task item after a form feed, NEL or line separator is text, not an item; "
            "start it on a line of its own",
        )
        for line in hidden_task_lines(text)
    ]
    findings += [
        _finding(path, line, "CONFLICT_MARKER", "a git conflict marker: finish the merge and remove it")
        for line in conflict_lines(text)
    ]
    if "\0" in text:
        message = "NUL bytes: save the file as UTF-8 (UTF-16 needs a byte order mark)"
        findings.append(_finding(path, 0, "ENCODING", message))
    return findings


def _duplicates(roadmap: Roadmap) -> list[Finding]:
    first: dict[str, int] = {}
    findings = []
    for item in roadmap.items:
        if item.slug in first:
            message = f"{item.slug!r} is already on line {first[item.slug]}; the planner only sees that one"
            findings.append(_finding(ROADMAP, item.line, "DUPLICATE_SLUG", message))
        else:
            first[item.slug] = item.line
    return findings


# a parenthesised `(word: …)` in a description whose word is "after" or close to it
_AFTER_LIKE = re.compile(r"\(\s*([A-Za-z]{3,8})\s*:[^)]*\)")


def _dependencies(roadmap: Roadmap, archived: set[str] | frozenset[str]) -> list[Finding]:
    findings = []
    known = {item.slug for item in roadmap.items}
    for item in roadmap.items:
        for dep in item.after:
            if dep not in known and dep not in archived:
                findings.append(_unknown_dependency(item, dep, sorted(known | set(archived))))
        findings += _unread_dependencies(item)
        if item.marker is Marker.ACTIVE:
            waiting = open_dependencies(roadmap, item, archived.__contains__)
            if waiting:
                waits = ", ".join(waiting)
                message = f"{item.slug!r} is [>] but waits for {waits}; mark it [ ] until they are done"
                findings.append(_finding(ROADMAP, item.line, "ACTIVE_BLOCKED", message))
    return findings


def _unknown_dependency(item: RoadmapItem, dep: str, slugs: list[str]) -> Finding:
    close = difflib.get_close_matches(dep, slugs, n=1, cutoff=0.75)
    if close:
        message = (
            f"after: {dep!r} is not an item; did you mean {close[0]!r}? As written it counts as delivered"
        )
        return _finding(ROADMAP, item.line, "MISSPELLED_DEPENDENCY", message)
    message = f"after: {dep!r} is neither on the roadmap nor in done/; it counts as delivered"
    return _finding(ROADMAP, item.line, "UNKNOWN_DEPENDENCY", message)


def _unread_dependencies(item: RoadmapItem) -> list[Finding]:
    """A dependency list the parser took as description text: misspelled, or after the description."""
    findings = []
    for match in _AFTER_LIKE.finditer(item.description):
        word = match[1].lower()
        if word == "after" or difflib.SequenceMatcher(None, word, "after").ratio() >= 0.75:
            message = (
                f"{match[0]!r} is read as description text, not as dependencies; write "
                f"`{item.slug} (after: a, b) — description`"
            )
            findings.append(_finding(ROADMAP, item.line, "DEPENDENCY_NOT_READ", message))
    return findings


def _cycles(roadmap: Roadmap) -> list[Finding]:
    """One finding per dependency cycle, on the line of its first item in file order."""
    by_slug: dict[str, RoadmapItem] = {}
    for item in roadmap.items:
        by_slug.setdefault(item.slug, item)
    seen: set[frozenset[str]] = set()
    findings = []
    for item in roadmap.items:
        cycle = _cycle_from(item.slug, by_slug)
        if cycle and frozenset(cycle) not in seen:
            seen.add(frozenset(cycle))
            start = min(cycle, key=lambda slug: by_slug[slug].line)
            turn = cycle.index(start)
            ordered = cycle[turn:] + cycle[:turn]
            message = "dependency cycle " + " → ".join([*ordered, start]) + "; none of them can start"
            findings.append(_finding(ROADMAP, by_slug[start].line, "CYCLIC_DEPENDENCY", message))
    return findings


def _cycle_from(start: str, by_slug: Mapping[str, RoadmapItem]) -> list[str] | None:
    """The slugs of a cycle through `start`, following `after:` edges (depth first), or None."""
    path, on_path, done = [start], {start}, set()

    def visit(slug: str) -> list[str] | None:
        for dep in by_slug[slug].after:
            if dep == start:
                return list(path)
            if dep in by_slug and dep not in on_path and dep not in done:
                path.append(dep)
                on_path.add(dep)
                found = visit(dep)
                if found:
                    return found
                on_path.discard(path.pop())
                done.add(dep)
        return None

    return visit(start)


# --- plans, reviews, bugs ---------------------------------------------------------------------------


def lint_plan(path: str, text: str) -> list[Finding]:
    if not text.strip():
        return []  # an empty plan is a missing plan: next_prepare asks for one
    blocks = located_blocks(text)
    findings = _malformed(path, text) + _group_headings(path, blocks)
    if parse_plan(text).has_groups:
        findings += [
            _finding(
                path,
                task.line,
                "TASK_OUTSIDE_GROUP",
                "this checkbox is outside every `Group N` section, so the planner ignores it",
            )
            for group, task in tasks_by_group(blocks)
            if group is None
        ]
    if not parse_plan(text).has_build_tasks:
        findings.append(
            _finding(
                path,
                0,
                "NO_BUILD_TASK",
                "no build task: add `- [ ] task` items under `## Group 1` … `## Group 4` headings",
            )
        )
    return sorted(findings, key=lambda f: f.line)


def _group_headings(path: str, blocks: Iterable[Block]) -> list[Finding]:
    findings: list[Finding] = []
    numbers: dict[int, int] = {}
    for heading in (b for b in blocks if not isinstance(b, TaskItem)):
        line = getattr(heading, "line", 0)
        match = GROUP_HEADING.match(heading.text)
        if match:
            number = int(match[1])
            if number in numbers:
                message = f"Group {number} is also the heading on line {numbers[number]}"
                findings.append(_finding(path, line, "GROUP_HEADING", message))
            numbers.setdefault(number, line)
        elif _GROUP_WORD.match(heading.text):
            message = f"{heading.text[:60]!r} is not read as a group; start the heading with `Group N`"
            findings.append(_finding(path, line, "GROUP_HEADING", message))
    return findings


def lint_review(path: str, text: str) -> list[Finding]:
    findings = _malformed(path, text)
    checked = [task for _, task in verdict_items(text) if task.checked]
    if len(checked) != 1:
        why = parse_review(text).why or f"{len(checked)} verdicts are checked"
        line = checked[1].line if len(checked) > 1 else 0
        message = f"{why}; check exactly one of `- [x] APPROVE` and `- [x] REQUEST CHANGES`"
        findings.append(_finding(path, line, "VERDICT", message))
    return findings


def lint_bugs(text: str) -> list[Finding]:
    findings = _malformed(BUGS, text)
    findings += [
        _finding(BUGS, line, "BUG_NOT_A_TASK", "a list item without a checkbox is not a bug; write `- [ ] …`")
        for line in near_items(text, _BULLET_WITHOUT_BOX)
    ]
    return sorted(findings, key=lambda f: f.line)


# --- done/ ------------------------------------------------------------------------------------------


def lint_done(names: Iterable[str]) -> list[Finding]:
    findings: list[Finding] = []
    numbers: dict[int, str] = {}
    for name in sorted(n for n in names if not n.startswith(".")):
        parts = archive_parts(name)
        problem = slug_problem(parts[1]) if parts else None
        if not parts or problem:
            message = f"{name!r} is not NNN-slug (e.g. 004-my-slug)" + (f": {problem}" if problem else "")
            findings.append(_finding(f"{DONE}/{name}", 0, "ARCHIVE_NAME", message))
            continue
        number = parts[0]
        if number in numbers:
            message = f"number {number:03d} is also used by {numbers[number]}"
            findings.append(_finding(f"{DONE}/{name}", 0, "ARCHIVE_NUMBER_DUPLICATE", message))
        numbers.setdefault(number, name)
    missing = sorted(set(range(1, max(numbers, default=0) + 1)) - numbers.keys())
    if missing:
        shown = ", ".join(f"{n:03d}" for n in missing[:10]) + (" …" if len(missing) > 10 else "")
        findings.append(_finding(DONE, 0, "ARCHIVE_NUMBER_GAP", f"no archive numbered {shown}"))
    return findings
