"""todos/bugs.md: a task list of bugs; every unchecked one is open."""

from __future__ import annotations

from teleclaude.planner.core.markdown import task_items
from teleclaude.planner.core.model import TaskItem


def open_bugs(text: str) -> tuple[TaskItem, ...]:
    return tuple(task for task in task_items(text) if task.mark == " ")
