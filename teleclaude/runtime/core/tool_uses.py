"""A worker's tool uses as its agent CLI's tool hook reports them.

The agent CLI's tool hook (`teleclaude hook tool-use`: `PreToolUse`, `BeforeTool`) hands over the
tool's name and input; `tool_use` keeps the name and the one thing an orchestrator wants to see about it (the
file, the command, the pattern, the URL). How they read (`Read: src/x.py (1m ago)`) is
planner/core/tool_lines.py, which the status board shares with digests and `sessions list`.
"""

from __future__ import annotations

from _collections_abc import (
    Mapping,  # collections.abc's, loaded at start (`collections` is not: a tool use's cost)
)

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:  # the record is built only where it is kept: a hook writes `named`'s row (dataclasses)
    from datetime import datetime

    from teleclaude.planner.core.tool_lines import ToolUse

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
    "dir_path",
    "url",
    "query",
    "description",
    "prompt",
)


def tool_use(session_id: str, tool: str, tool_input: object, at: datetime, cwd: str = "") -> ToolUse:
    """A tool use as reported by a hook: its target is one line, a path inside `cwd` made relative."""
    from teleclaude.planner.core.tool_lines import ToolUse

    return ToolUse(session_id, *named(tool, tool_input, cwd), at)


def named(tool: str, tool_input: object, cwd: str = "") -> tuple[str, str]:
    """The tool and its target, as `tool_use` keeps them."""
    return tool.strip()[:TARGET_LENGTH], _target(tool_input, cwd)


def _target(tool_input: object, cwd: str) -> str:
    if not isinstance(tool_input, Mapping):
        return ""
    for key in _TARGET_KEYS:
        value = tool_input.get(key)
        if isinstance(value, list):  # a command as an argv list
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
