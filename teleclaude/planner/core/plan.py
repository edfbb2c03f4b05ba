"""implementation-plan.md: how many build tasks there are and how many are still open."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache

from teleclaude.planner.core.lazy_re import compiled
from teleclaude.planner.core.markdown import Block, chunk_summaries
from teleclaude.planner.core.model import Heading, PlanStatus, TaskItem

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import Any

    from teleclaude.planner.core.markdown import Summary

    # a heading as [level, group or None], a task, or a run of cached tasks
    Entry = list[Any] | TaskItem | str

GROUP_HEADING = compiled(r"group\s+(\d+)\b", re.IGNORECASE)
BUILD_GROUPS = range(1, 5)


_recent: dict[str, Summary] = {}  # the chunks of the last plan parsed in this process


@lru_cache(maxsize=16)
def parse_plan(text: str) -> PlanStatus:
    global _recent
    plan, _recent = parse_plan_chunks(text, _recent)
    return plan


def parse_plan_chunks(text: str, known: Mapping[str, Summary]) -> tuple[PlanStatus, dict[str, Summary]]:
    """Checkboxes under a `Group N` heading belong to group N until a heading of the same or a higher level.

    Groups 1-4 hold build tasks; later groups are post-build checklists. Without any Group heading every
    checkbox is a build task. Chunk summaries in `known` are reused (see `markdown.chunk_summaries`); the
    second value holds the ones used. A `known` of the wrong shape is ignored, never trusted.
    """
    try:
        plan, used = _plan_from(text, known)
        if known:
            _check_counts(text, plan)
        return plan, used
    except (TypeError, ValueError, KeyError, IndexError):
        if not known:
            raise
        return _plan_from(text, {})


def _check_counts(text: str, plan: PlanStatus) -> None:
    """Raise ValueError when a summary from the cache counts more open or more done tasks than `text` has
    checkboxes for (a forged one may carry the right key). Every `[ ]` and `[x]` is counted, in running
    text too: a bound, found at the speed of `str.count` (matching 200,000 task lines took 100 ms)."""
    done = text.count("[x]") + text.count("[X]")
    still_open = text.count("[ ]") + text.count("[>]")
    if plan.build_tasks - plan.open_build_tasks > done or plan.open_build_tasks > still_open:
        raise ValueError("the cached plan counts tasks its text does not have")


def _plan_from(text: str, known: Mapping[str, Summary]) -> tuple[PlanStatus, dict[str, Summary]]:
    chunks, used = chunk_summaries(text, "plan", _summarize, known)
    runs = list(_scoped(entry for _, summary in chunks for entry in summary))
    if not all(isinstance(run, str) for _, run in runs):
        raise TypeError("a chunk summary of the wrong shape")
    has_groups = any(group is not None for group, _ in runs)
    build = [run for group, run in runs if group in BUILD_GROUPS or not has_groups]
    return PlanStatus(sum(map(len, build)), sum(run.count("0") for run in build), has_groups), used


def _summarize(blocks: tuple[Block, ...]) -> Summary:
    """A chunk as a list: [level, group number or None] for a heading, and for the tasks between headings
    one string with a "1" per checked and a "0" per open task (200,000 tasks load and count quickly)."""
    summary: list[Any] = []
    for entry in _entries(blocks):
        if isinstance(entry, TaskItem):
            mark = "1" if entry.checked else "0"
            if summary and isinstance(summary[-1], str):
                summary[-1] += mark
            else:
                summary.append(mark)
        else:
            summary.append(entry)
    return summary


def _entries(blocks: Iterable[Block]) -> Iterator[Entry]:
    for block in blocks:
        if isinstance(block, Heading):
            match = GROUP_HEADING.match(block.text)
            yield [block.level, int(match[1]) if match else None]
        elif isinstance(block, TaskItem):
            yield block


def tasks_by_group(items: Iterable[Block]) -> Iterator[tuple[int | None, TaskItem]]:
    """(group number or None, task) for every task item; a group is set by its heading's scope.

    None means no group: before the first Group heading, after a group's scope ended, or in a plan without
    Group headings at all.
    """
    return _scoped(_entries(items))


def _scoped(entries: Iterable[Entry]) -> Iterator[tuple[int | None, Any]]:
    """(group or None, task) for the tasks among `entries`, headings being [level, group number or None]."""
    group: int | None = None
    group_level, seen_group = 0, False
    for entry in entries:
        if isinstance(entry, list):
            level, number = entry
            if number is not None:
                group, group_level, seen_group = int(number), level, True
            elif level <= group_level:
                group, group_level = None, 0
        else:
            yield (group if seen_group else None), entry
