"""A worker's recorded tool uses and the one way they read: `Read: src/x.py (1m ago)`.

Shared by the runtime (digests, `sessions list`) and the planner's status board; how a hook's input becomes
a `ToolUse` is the runtime's (runtime/core/tool_uses.py). Pure: the caller passes `now`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from teleclaude.planner.core.terminal import printable

SHOWN = 5  # tool uses in a digest, a session listing and the status board


@dataclass(frozen=True)
class ToolUse:
    session_id: str
    tool: str  # the CLI's tool name: Read, Bash, mcp__teleclaude__teleclaude__next_work, …
    target: str  # the file, command, pattern or URL; "" when the input names none
    at: datetime


def tool_lines(uses: Iterable[ToolUse], now: datetime) -> list[str]:
    """`Read: src/x.py (1m ago)`, newest last, every piece from the agent escaped for a terminal."""
    return [
        printable(f"{use.tool}: {use.target}" if use.target else use.tool) + f" ({ago(now, use.at)})"
        for use in uses
    ]


def ago(now: datetime, then: datetime) -> str:
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m ago"
    if seconds < 86400:
        return f"{seconds // 3600}h ago"
    return f"{seconds // 86400}d ago"
