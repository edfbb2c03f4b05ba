"""`teleclaude hook prompt`: a `UserPromptSubmit` hook; tells the runtime where the CLI records the turn.

The CLI (a driver whose `Hooks` run `prompt`) runs it for each message it is given, before the model is asked,
with JSON on stdin: `{"session_id", "turn_id", "cwd", "hook_event_name": "UserPromptSubmit",
"transcript_path", "prompt", …}`. `transcript_path` is the session's own record, where the CLI writes, typed,
an API error that ends the turn (no hook runs for such a turn: the driver's `turn_error` reads it), and the
usage of its rate-limit windows the provider reported on each response (the driver's `usage`, source
`transcript`). For a worker of the runtime (TELECLAUDE_SESSION_ID set) the path is kept on its session. The
usage the file holds so far is recorded for every session, worker or not (record.py; a worker on another
computer marks its pane with it). A worker on another computer (TELECLAUDE_TURN_END_TO_PANE set) keeps no
path: its file is over there, out of the observer's reach, and this machine's database is too; its limits are
read from its screen. A sandboxed worker writes the path into its session's channel folder, for the observer
to keep (a path in its CLI's own state folders only). The hook prints nothing (the prompt goes ahead) and
always exits 0.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

from teleclaude.runtime.hooks.record import record, record_transcript_usage


def transcript_path(raw: str) -> str:
    try:
        data = json.loads(raw)
    except ValueError:
        return ""
    path = data.get("transcript_path") if isinstance(data, dict) else None
    return path if isinstance(path, str) else ""


def main(agent: str | None = None, stdin: TextIO | None = None) -> int:
    try:
        path = transcript_path((stdin or sys.stdin).read())
    except (OSError, ValueError):  # unreadable or not UTF-8: nothing to keep, and the prompt goes ahead
        return 0
    if path and agent:
        record_transcript_usage(agent, path, "prompt")
    channel = os.environ.get("TELECLAUDE_CHANNEL")  # a sandboxed worker: its session's own folder
    if path and channel:
        from pathlib import Path

        from teleclaude.adapters.sandbox import TRANSCRIPT, write_mark

        write_mark(Path(channel), TRANSCRIPT, path)
        return 0
    if path and not os.environ.get("TELECLAUDE_TURN_END_TO_PANE"):  # TURN_END_TO_PANE: remote
        record(
            lambda runtime, session_id: runtime.record_transcript(session_id, path),
            "the rollout file",
            hook="prompt",
        )
    return 0
