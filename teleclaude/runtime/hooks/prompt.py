"""`teleclaude hook prompt`: the CLI is given a message; tells the runtime which conversation it is in and
where the CLI records it.

The CLI (a driver whose `Hooks` run `prompt`, on its event for a message given: `UserPromptSubmit`, say)
runs it for each message it is given, before the model is asked, with JSON on stdin: `{"session_id", "cwd",
"hook_event_name", "transcript_path", "prompt", …}` (no `transcript_path` from a CLI that keeps its
conversations in a database). `session_id` is the CLI's own id of the conversation and `transcript_path` its
record of it: for a worker of the runtime (TELECLAUDE_SESSION_ID set) both are kept on its session from its
first message on, so that a worker killed before its first tool call is resumed all the same
(runtime/continuing.py). The transcript is also where a CLI may write, typed, an API error that ends the turn
(no hook runs for such a turn: the driver's `turn_error` reads it), and the usage of its rate-limit windows
the provider reported on each response (the driver's `usage`, source `transcript`). The usage the file holds
so far is recorded for every session, worker or not (record.py; a worker on another computer marks its pane
with it). A worker on another computer (TELECLAUDE_TURN_END_TO_PANE set) keeps nothing: its file is over
there, out of the observer's reach, and this machine's database is too; its limits are read from its screen.
A sandboxed worker writes both into its session's channel folder, for the observer to keep (a path in
its CLI's own state folders only): it too is resumed when killed before its first tool call. The hook
prints nothing (the prompt goes ahead) and always exits 0.
"""

from __future__ import annotations

import os
import sys

from teleclaude.agents.jsonin import loads
from teleclaude.runtime.hooks.record import keep, record_transcript_usage
from teleclaude.runtime.hooks.tool import conversation_of

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import TextIO

    from teleclaude.adapters.sessions_db import SessionStore

BUSY_TIMEOUT_MS = 1000  # the read of what is on record (the runtime's write waits as it always did)


def said(raw: str) -> tuple[str, str]:
    """(the CLI's id of its conversation, the path of its record) as the hook's input says them ("": none)."""
    try:
        data = loads(raw)
    except ValueError:
        return "", ""
    return conversation_of(data) if isinstance(data, dict) else ("", "")


def main(agent: str | None = None, stdin: TextIO | None = None) -> int:
    try:
        conversation, path = said((stdin or sys.stdin).read())
    except (OSError, ValueError):  # unreadable or not UTF-8: nothing to keep, and the prompt goes ahead
        return 0
    if path and agent:
        record_transcript_usage(agent, path, "prompt")
    channel = os.environ.get("TELECLAUDE_CHANNEL")  # a sandboxed worker: its session's own folder
    if channel:
        if path or conversation:
            from pathlib import Path

            from teleclaude.adapters.sandbox import name_record

            name_record(Path(channel), path, conversation)
        return 0
    remote = os.environ.get("TELECLAUDE_TURN_END_TO_PANE")  # TURN_END_TO_PANE: remote
    if (path or conversation) and not remote and not _kept_already(conversation, path):
        keep(
            lambda store, session_id: _name(store, session_id, conversation, path),
            "the conversation",
            "prompt",
        )
    return 0


def _name(store: SessionStore, session_id: str, conversation: str, path: str) -> bool:
    """The conversation and its record named on the session; a CLI that names no file (its record is a
    database, which its stop hook names) leaves the one on record as it is."""
    if not path:
        session = store.get(session_id)
        path = session.transcript if session else ""
    return store.name_transcript(session_id, path, conversation)


def _kept_already(conversation: str, path: str) -> bool:
    """The worker's session (by its key) has this conversation and transcript on record already, as after its
    first message: nothing to record, and the runtime is not loaded to find that out (adapters/hook_db.py)."""
    session_id = os.environ.get("TELECLAUDE_SESSION_ID", "")
    if not session_id:
        return False
    from teleclaude.adapters.hook_db import db_file, kept_conversation
    from teleclaude.runtime.core.marks import SESSION_KEY, same_key

    key = os.environ.get(SESSION_KEY, "")
    kept = kept_conversation(db_file(), BUSY_TIMEOUT_MS, session_id, lambda stored: same_key(stored, key))
    return kept is not None and kept == (conversation or kept[0], path or kept[1])
