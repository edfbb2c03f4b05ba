"""`teleclaude hook tool-use`: record a worker's tool use, so digests and `sessions list` show what it does.

Each agent CLI runs it before every tool call, its JSON on stdin with the same fields: Claude Code and Codex
as `PreToolUse`, `{"session_id", "cwd", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input":
{"command": …}}`; Gemini CLI as `BeforeTool` (`"tool_name": "run_shell_command"`, `"tool_input": {"command",
"description"}`). Only a worker started by teleclaude's runtime has `TELECLAUDE_SESSION_ID`; anywhere else the
hook returns at once, as it does for a worker on another computer (TELECLAUDE_TURN_END_TO_PANE set): the
runtime's database is on this machine, out of its reach, and one over there would only collect rows of no
session. It prints nothing (an empty answer with exit 0 lets the call through, in all three CLIs), waits at
most a second for the database, and exits 0 on any failure: it never blocks or breaks the agent.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

BUSY_TIMEOUT_MS = 1000


def main(agent: str | None = None, stdin: TextIO | None = None) -> int:
    session_id = os.environ.get("TELECLAUDE_SESSION_ID", "")
    if not session_id or os.environ.get("TELECLAUDE_TURN_END_TO_PANE"):  # TURN_END_TO_PANE: remote
        return 0
    try:
        record(session_id, (stdin or sys.stdin).read())
    except Exception as error:  # bookkeeping only: the tool call goes ahead whatever happens here
        sys.stderr.write(f"teleclaude hook tool-use: {type(error).__name__}: {error}\n")
    return 0


def record(session_id: str, raw: str) -> None:
    from datetime import UTC, datetime

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.core.tool_uses import tool_use

    data = json.loads(raw)
    if not isinstance(data, dict) or not isinstance(data.get("tool_name"), str):
        raise ValueError("the input has no tool_name")
    cwd = data["cwd"] if isinstance(data.get("cwd"), str) else ""
    use = tool_use(session_id, data["tool_name"], data.get("tool_input"), datetime.now(UTC), cwd)
    store = SessionStore()
    store.busy_timeout_ms = BUSY_TIMEOUT_MS
    store.add_tool_use(use)
