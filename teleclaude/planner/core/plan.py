"""implementation-plan.md: how many build tasks there are and how many are still open."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache

from teleclaude.planner.core.markdown import Block, blocks
from teleclaude.planner.core.model import Heading, PlanStatus, TaskItem

GROUP_HEADING = re.compile(r"group\s+(\d+)\b", re.IGNORECASE)
BUILD_GROUPS = range(1, 5)


@lru_cache(maxsize=16)
def parse_plan(text: str) -> PlanStatus:
    """Checkboxes under a `Group N` heading belong to group N until a heading of the same or a higher level.

    Groups 1-4 hold build tasks; later groups are post-build checklists. Without any Group heading every
    checkbox is a build task.
    """
    grouped = list(tasks_by_group(blocks(text)))
    has_groups = any(group is not None for group, _ in grouped)
    if has_groups:
        build = [task for group, task in grouped if group in BUILD_GROUPS]
    else:
        build = [task for _, task in grouped]
    open_tasks = sum(1 for task in build if not task.checked)
    return PlanStatus(len(build), open_tasks, has_groups)


def tasks_by_group(items: Iterable[Block]) -> Iterator[tuple[int | None, TaskItem]]:
    """(group number or None, task) for every task item; a group is set by its heading's scope.

    None means no group: before the first Group heading, after a group's scope ended, or in a plan without
    Group headings at all.
    """
    group: int | None = None
    group_level, seen_group = 0, False
    for block in items:
        if isinstance(block, Heading):
            match = GROUP_HEADING.match(block.text)
            if match:
                group, group_level, seen_group = int(match[1]), block.level, True
            elif block.level <= group_level:
                group, group_level = None, 0
        elif isinstance(block, TaskItem):
            yield (group if seen_group else None), block
