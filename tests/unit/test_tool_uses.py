"""Tool uses as a digest and a session listing show them: the target, one escaped line, and its age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from teleclaude.planner.core.tool_lines import ToolUse, tool_lines
from teleclaude.runtime.core.sessions import SessionState
from teleclaude.runtime.core.supervision import Digest
from teleclaude.runtime.core.tool_uses import tool_use

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("tool", "tool_input", "target"),
    [
        ("Read", {"file_path": "/p/src/x.py"}, "src/x.py"),
        ("Edit", {"file_path": "/elsewhere/y.py", "old_string": "a"}, "/elsewhere/y.py"),
        (
            "Bash",
            {"command": "git add -A &&\n  git commit -m x", "description": "Commit"},
            "git add -A && git commit -m x",
        ),
        ("Grep", {"pattern": "def main", "path": "/p/src"}, "def main"),
        ("LS", {"path": "/p/src"}, "src"),
        ("Glob", {"pattern": "**/*.py"}, "**/*.py"),
        ("WebFetch", {"url": "https://example.org", "prompt": "summarise"}, "https://example.org"),
        ("shell", {"command": ["bash", "-lc", "ls"]}, "bash -lc ls"),
        # Gemini CLI 0.61's tools (codex 0.169 reports its shell as claude's `Bash`)
        ("run_shell_command", {"command": "git status --short", "description": "Look"}, "git status --short"),
        ("read_file", {"file_path": "/p/src/x.py", "start_line": 3}, "src/x.py"),
        ("list_directory", {"dir_path": "/p/src", "ignore": ["*.pyc"]}, "src"),
        ("grep_search", {"pattern": "def main", "dir_path": "/p"}, "def main"),
        ("mcp__teleclaude__teleclaude__next_work", {}, ""),
        ("WaitForMcpServers", None, ""),
        ("Bash", {"command": "x" * 200}, "x" * 79 + "…"),
    ],
)
def test_the_target_is_what_the_tool_works_on(tool, tool_input, target):
    assert tool_use("s", tool, tool_input, NOW, cwd="/p").target == target


def test_lines_read_like_tool_target_and_age_and_escape_the_agents_text():
    uses = [
        ToolUse("s", "Read", "src/x.py", NOW - timedelta(seconds=70)),
        ToolUse("s", "Bash", "echo \x1b[2Jhi", NOW - timedelta(seconds=5)),
        ToolUse("s", "WaitForMcpServers", "", NOW - timedelta(hours=3)),
    ]
    assert tool_lines(uses, NOW) == [
        "Read: src/x.py (1m ago)",
        "Bash: echo \\x1b[2Jhi (5s ago)",
        "WaitForMcpServers (3h ago)",
    ]


def test_a_digest_lists_the_recent_tools_before_the_screen():
    tools = ("Read: a.py (1m ago)",)
    digest = Digest("s", SessionState.RUNNING, 90, "", None, 0, ("last row",), False, tools)
    assert digest.text().splitlines()[1:] == ["  recent tools:", "    Read: a.py (1m ago)", "  | last row"]
