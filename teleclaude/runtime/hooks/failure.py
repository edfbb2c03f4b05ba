"""`teleclaude hook stop-failure`: an API error ended the agent's turn; tell the runtime what kind.

Claude Code 2.1 runs its `StopFailure` hook instead of `Stop` when an API error ended the turn, with JSON on
stdin: `{"session_id", "cwd", "hook_event_name": "StopFailure", "error": KIND, "last_assistant_message": …}`.
KIND is `rate_limit` (429, subscription limits), `server_error` (500/503/529), `overloaded`,
`billing_error`, `authentication_failed` or another; the message is the error as the screen shows it,
with the reset time of a subscription limit (`You've hit your session limit · resets 3:48pm (UTC)`).

For a worker of the runtime (TELECLAUDE_SESSION_ID set): a limit makes the session `rate_limited` and the
agent unavailable until that reset (else an hour), so the planner's next step goes to another agent;
billing and authentication errors end the session as `errored` with the reason; other errors end the turn.
The record is retried until it sticks. A worker on another computer (the launcher set
TELECLAUDE_TURN_END_TO_PANE) marks its tmux pane with the failure instead (`@teleclaude_stop_failure`,
sealed with the session's key): the observer reads it with the pane's other facts over ssh and records it
as above, on this machine. Either way only with the session's own key (runtime/core/marks.py). The hook
prints nothing and always exits 0: it never breaks an agent.
"""

from __future__ import annotations

import os
import sys

from teleclaude.runtime.hooks.record import mark_pane, record, warn

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from typing import TextIO

# retries 0.05 s apart: a failure can come while the launcher still waits to see its line taken (a loaded
# machine, an Enter pressed again), and is told once the session works; the CLI waits on this hook meanwhile
PENDING_ATTEMPTS = 400


def main(agent: str | None = None, stdin: TextIO | None = None) -> int:
    raw = (stdin or sys.stdin).read()
    if not os.environ.get("TELECLAUDE_SESSION_ID"):  # not a worker's: nothing to record, limits.py not loaded
        if not _names_an_error(raw):
            warn("ignoring the hook input: no `error` in a JSON object", "stop-failure")
        return 0
    from teleclaude.runtime.core.limits import parse_failure

    failure = parse_failure(raw)
    if failure is None:
        warn("ignoring the hook input: no `error` in a JSON object", "stop-failure")
        return 0
    # TURN_END_TO_PANE of adapters/tmux.py: a worker on another computer cannot reach this machine's
    # database, so it marks its pane, which the observer reads over ssh and records as below
    if os.environ.get("TELECLAUDE_TURN_END_TO_PANE") and os.environ.get("TELECLAUDE_SESSION_ID"):
        from teleclaude.adapters.tmux import STOP_FAILURE_OPTION

        if not mark_pane(STOP_FAILURE_OPTION, failure.encode()):
            warn(f"could not mark the {failure.error} that ended the turn on the tmux pane", "stop-failure")
        return 0
    record(
        lambda runtime, session_id: runtime.record_stop_failure(session_id, failure.error, failure.message),
        f"the {failure.error} that ended the turn",
        attempts=PENDING_ATTEMPTS,
        hook="stop-failure",
    )
    return 0


def _names_an_error(raw: str) -> bool:
    """Whether `parse_failure` would read the input (a JSON object with an `error`), read as it reads it."""
    from teleclaude.agents.jsonin import loads

    try:
        data = loads(raw)
    except ValueError:
        return False
    return isinstance(data, dict) and isinstance(data.get("error"), str)
