"""A worker's recent tool uses: what its agent CLI's tool hook reported, and how it reads in a digest.

The agent CLI's `PreToolUse` hook (`teleclaude hook tool-use`) hands over the tool's name and input;
`tool_use` keeps the name and the one thing an orchestrator wants to see about it (the file, the command, the
pattern, the URL), `tool_lines` shows the latest as `Read: src/x.py (1m ago)`. Pure: the caller passes `now`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from teleclaude.planner.core.terminal import printable

SHOWN = 5  # tool uses in a digest and a session listing
KEPT = 20  # tool uses kept per session
TARGET_LENGTH = 80

# the input field that names what a tool works on, in order of preference (Claude Code, Codex, Gemini CLI)
_TARGET_KEYS = (
    "file_path",
    "notebook_path",
    "absolute_path",
    "command",
    "cmd",
    "pattern",
    "path",
    "url",
    "query",
    "description",
    "prompt",
)


@dataclass(frozen=True)
class ToolUse:
    session_id: str
    tool: str  # the CLI's tool name: Read, Bash, mcp__teleclaude__teleclaude__next_work, …
    target: str  # the file, command, pattern or URL; "" when the input names none
    at: datetime


def tool_use(session_id: str, tool: str, tool_input: object, at: datetime, cwd: str = "") -> ToolUse:
    """A tool use as reported by a hook: its target is one line, a path inside `cwd` made relative."""
    return ToolUse(session_id, tool.strip()[:TARGET_LENGTH], _target(tool_input, cwd), at)


def _target(tool_input: object, cwd: str) -> str:
    if not isinstance(tool_input, Mapping):
        return ""
    for key in _TARGET_KEYS:
        value = tool_input.get(key)
        if isinstance(value, list):  # codex: the command as an argv list
            value = " ".join(str(part) for part in value)
        if isinstance(value, str) and value.strip():
            return _shorten(_relative(value.strip(), cwd))
    return ""


def _relative(value: str, cwd: str) -> str:
    folder = cwd.rstrip("/") + "/"
    return value[len(folder) :] if cwd and value.startswith(folder) else value


def _shorten(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TARGET_LENGTH else line[: TARGET_LENGTH - 1] + "…"


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
