"""`teleclaude hook tool-use`: record a worker's tool use, so digests and `sessions list` show what it does.

Each agent CLI runs it before every tool call, its JSON on stdin with the same fields: Claude Code and Codex
as `PreToolUse`, `{"session_id", "cwd", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input":
{"command": …}}`; Gemini CLI as `BeforeTool` (`"tool_name": "run_shell_command"`, `"tool_input": {"command",
"description"}`). Only a worker started by teleclaude's runtime has `TELECLAUDE_SESSION_ID`; anywhere else the
hook returns at once, as it does for a worker on another computer (TELECLAUDE_TURN_END_TO_PANE set): the
runtime's database is on this machine, out of its reach, and one over there would only collect rows of no
session. A sandboxed worker's hook appends the use to its session's channel folder instead, which the
observer records (adapters/sandbox.py). It prints nothing (an empty answer with exit 0 lets the call
through, in all three CLIs), waits at most a second for the database, and exits 0 on any failure: it never
blocks or breaks the agent.
"""

from __future__ import annotations

import os
import sys

from teleclaude.agents.jsonin import loads
from teleclaude.runtime.core.marks import SESSION_KEY
from teleclaude.runtime.hooks.record import warn

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import TextIO

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.runtime.core.sessions import Session

BUSY_TIMEOUT_MS = 1000


def main(agent: str | None = None, stdin: TextIO | None = None) -> int:
    session_id = os.environ.get("TELECLAUDE_SESSION_ID", "")
    channel = os.environ.get("TELECLAUDE_CHANNEL")  # a sandboxed worker: its session's own folder
    if session_id and channel:
        try:
            from pathlib import Path

            from teleclaude.adapters.sandbox import append_tool_use

            append_tool_use(Path(channel), (stdin or sys.stdin).read())
        except Exception as error:  # bookkeeping only
            warn(f"{type(error).__name__}: {error}", "tool-use")
        return 0
    if not session_id or os.environ.get("TELECLAUDE_TURN_END_TO_PANE"):  # TURN_END_TO_PANE: remote
        return 0
    try:
        record(session_id, os.environ.get(SESSION_KEY, ""), (stdin or sys.stdin).read())
    except Exception as error:  # bookkeeping only: the tool call goes ahead whatever happens here
        warn(f"{type(error).__name__}: {error}", "tool-use")
    return 0


def record(session_id: str, key: str, raw: str) -> None:
    """The tool use on the session, only with the session's own key (runtime/core/marks.py): a worker's hook
    cannot write another's tool activity. Written plainly (adapters/hook_db.py) where the runtime's
    database is as the runtime left it and the session has nothing new to keep (`_conversation`), else by
    the store."""
    from teleclaude.adapters.hook_db import add_plainly, db_file, stamp_now
    from teleclaude.runtime.core.marks import same_key
    from teleclaude.runtime.core.tool_uses import KEPT, named

    data = loads(raw)
    if not isinstance(data, dict) or not isinstance(data.get("tool_name"), str):
        raise ValueError("the input has no tool_name")
    cwd = data["cwd"] if isinstance(data.get("cwd"), str) else ""
    tool, target = named(data["tool_name"], data.get("tool_input"), cwd)
    conversation, transcript = conversation_of(data)

    def plainly(stored_key: str, stored_conversation: str, stored_transcript: str) -> bool | None:
        if not same_key(stored_key, key):
            return False
        news = (conversation and conversation != stored_conversation) or (
            transcript and not stored_transcript
        )
        return None if news else True

    row = (session_id, stamp_now(), tool, target)
    done = add_plainly(db_file(), BUSY_TIMEOUT_MS, row, plainly, KEPT)
    if done is None:
        done = _record_with_store(session_id, key, data, row)
    if not done:
        warn(f"not recording the tool use: ${SESSION_KEY} is not session {session_id}'s key", "tool-use")


def _record_with_store(session_id: str, key: str, data: dict, row: tuple) -> bool:
    from datetime import datetime

    from teleclaude.adapters.sessions_db import SessionStore
    from teleclaude.planner.core.tool_lines import ToolUse
    from teleclaude.runtime.core.marks import same_key

    store = SessionStore()
    store.busy_timeout_ms = BUSY_TIMEOUT_MS
    session = store.get(session_id)
    if session is not None and not same_key(session.key, key):  # no session: rows no one shows, as before
        return False
    if session is not None:
        _conversation(store, session, data)
    store.add_tool_use(ToolUse(session_id, row[2], row[3], datetime.fromisoformat(row[1])))
    return True


CONVERSATION_TRIES = 5


def conversation_of(data: dict) -> tuple[str, str]:
    """The CLI's own id of its conversation and its record of it, as the hook input says them ("": none)."""
    conversation, transcript = data.get("session_id"), data.get("transcript_path")
    conversation = conversation if isinstance(conversation, str) and len(conversation) <= 200 else ""
    transcript = transcript if isinstance(transcript, str) and len(transcript) <= 4096 else ""
    return conversation, transcript


def _conversation(store: SessionStore, session: Session, data: dict) -> None:
    """The CLI's own id of its conversation (`session_id`) and its record of it (`transcript_path`) kept on
    the worker's session the first time a tool hook says them: what a later worker of its step resumes
    (runtime/core/continuation.py). Written only when they are news."""
    from dataclasses import replace

    conversation, transcript = conversation_of(data)
    for _ in range(CONVERSATION_TRIES):  # an observer saving the row meanwhile wins: read it again
        wanted = replace(
            session,
            conversation=conversation or session.conversation,
            transcript=session.transcript or transcript,
        )
        if wanted == session or store.save(wanted, expect=session.state) is not None:
            return
        again = store.get(session.id)
        if again is None:
            return
        session = again
