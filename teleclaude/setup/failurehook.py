"""`teleclaude hook stop-failure`: an API error ended the agent's turn; tell the runtime what kind.

Claude Code 2.1 runs its `StopFailure` hook instead of `Stop` when an API error ended the turn, with JSON on
stdin: `{"session_id", "cwd", "hook_event_name": "StopFailure", "error": KIND, "last_assistant_message": …}`.
KIND is `rate_limit` (429, subscription limits), `server_error` (500/503/529), `overloaded`,
`billing_error`, `authentication_failed` or another; the message is the error as the screen shows it,
with the reset time of a subscription limit (`You've hit your session limit · resets 3:48pm (UTC)`).

For a worker of the runtime (TELECLAUDE_SESSION_ID set): a limit makes the session `rate_limited` and the
agent unavailable until that reset (else an hour), so the planner's next step goes to another agent;
billing and authentication errors end the session as `errored` with the reason; other errors end the turn.
The record is retried until it sticks. The hook prints nothing and always exits 0: it never breaks an agent.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TextIO

from teleclaude.setup.stophook import record


@dataclass(frozen=True)
class StopFailure:
    error: str  # rate_limit, server_error, overloaded, billing_error, authentication_failed, …
    message: str  # last_assistant_message: the error as the screen shows it


def parse_failure(raw: str) -> StopFailure | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("error"), str):
        return None
    message = data.get("last_assistant_message")
    return StopFailure(data["error"].strip() or "unknown", message if isinstance(message, str) else "")


def main(agent: str | None = None, stdin: TextIO | None = None) -> int:
    failure = parse_failure((stdin or sys.stdin).read())
    if failure is None:
        sys.stderr.write(
            "teleclaude hook stop-failure: ignoring the hook input: no `error` in a JSON object\n"
        )
        return 0
    record(
        lambda runtime, session_id: runtime.record_stop_failure(session_id, failure.error, failure.message),
        f"the {failure.error} that ended the turn",
    )
    return 0
