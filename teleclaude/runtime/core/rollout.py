"""Codex's rollout file (`CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-THREAD.jsonl`, one JSON event a line):
where codex 0.169 records, typed, the API error that ended a turn. The interactive CLI shows only the error's
words (a `■` row), and runs no hook for such a turn; the file ends the turn with
`{"type": "event_msg", "payload": {"type": "task_complete", "completed_at": SECONDS,
"error": {"message": …, "codex_error_info": "usage_limit_exceeded"}}}` (tests/realcli/NOTES.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class TurnError:
    info: object  # codex_error_info: a name ("server_overloaded") or {"name": {"http_status_code": 429}}
    message: str  # the words the screen shows in its `■` row
    completed_at: datetime  # aware UTC, to the second


def last_turn_error(lines: list[str]) -> TurnError | None:
    """The error that ended the last turn of these rollout lines (the file's tail), if its last turn event is
    a `task_complete` with an error; None when that turn completed, or a newer one started."""
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut by the tail, or one being written
        payload = event.get("payload") if isinstance(event, dict) else None
        kind = payload.get("type") if isinstance(payload, dict) else None
        if kind in ("task_started", "turn_aborted"):  # a newer turn, or one interrupted (Escape)
            return None
        if kind != "task_complete" or not isinstance(payload, dict):
            continue
        error, when = payload.get("error"), payload.get("completed_at")
        if not isinstance(error, dict) or not isinstance(when, int | float):
            return None
        message = error.get("message")
        return TurnError(
            error.get("codex_error_info"),
            message if isinstance(message, str) else "",
            datetime.fromtimestamp(int(when), UTC),
        )
    return None
