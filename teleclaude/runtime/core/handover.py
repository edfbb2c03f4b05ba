"""The continuation note a worker is handed when it takes over a step another agent's worker left.

Written by teleclaude from facts, not by the previous model: the commits on the branch since the step began,
the plan boxes ticked since, the previous worker's last `report_status`, its last tool uses and why it
stopped. One line (it is typed into the new worker's pane after its role command), every piece from outside
escaped as every typed text is, and bounded: the longest pieces are cut first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from teleclaude.planner.core.markdown import task_items
from teleclaude.planner.core.terminal import printable

LIMIT = 420  # characters of the whole note (a start's args are at most 500, the slug before it)
PIECE = 80  # characters of one commit, box, status or tool use before it is cut
SHOWN = 4  # commits, boxes and tool uses named at most (the newest); the rest counted


@dataclass(frozen=True)
class Facts:
    agent: str  # the previous worker's agent
    session: str  # its session id
    why: str  # why it stopped (core/continuation.py `stopped`)
    commits: tuple[str, ...] = ()  # `git log --oneline` since the step began, newest first
    ticked: tuple[str, ...] = ()  # the plan boxes ticked since, in the plan's order
    status: str = ""  # its last report_status
    tools: tuple[str, ...] = ()  # its last tool uses (`Bash: git status`), oldest first


def ticked_since(before: str, now: str) -> tuple[str, ...]:
    """The boxes of the plan `now` that are ticked and were not in the plan `before` (by their text)."""
    done_before = {item.text.strip() for item in task_items(before) if item.checked}
    return tuple(
        item.text.strip() for item in task_items(now) if item.checked and item.text.strip() not in done_before
    )


def note(facts: Facts, limit: int = LIMIT) -> str:
    """The note, one line of at most `limit` characters, with no character that may not be typed."""
    parts = [f"(handed over from {_clean(facts.agent)} tc-{_clean(facts.session)}: {facts.why}"]
    if facts.commits:
        parts.append(f"commits since the step began: {_listed(facts.commits, newest_first=True)}")
    if facts.ticked:
        parts.append(f"boxes ticked: {_listed(facts.ticked, newest_first=False)}")
    if facts.status.strip():
        parts.append(f"its last status: {_cut(_clean(facts.status), PIECE)}")
    if facts.tools:
        parts.append(f"its last tools: {_listed(facts.tools, newest_first=False)}")
    if not (facts.commits or facts.ticked):
        parts.append("nothing committed or ticked since the step began")
    text = "; ".join(parts)
    if len(text) + 1 > limit:
        text = text[: limit - 2] + "…"
    return text + ")"


def _listed(items: Sequence[str], newest_first: bool) -> str:
    shown = items[:SHOWN] if newest_first else items[-SHOWN:]
    more = len(items) - len(shown)
    text = ", ".join(_cut(_clean(item), PIECE) for item in shown)
    return f"{text} (+{more} more)" if more else text


def _clean(text: str) -> str:
    """One line: every control character escaped (`\\n` too), runs of spaces as one."""
    return " ".join(printable(text).split())


def _cut(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"
