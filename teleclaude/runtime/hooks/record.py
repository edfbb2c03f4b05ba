"""What the agent hooks share: a hook's news recorded on its worker's session, or marked on its pane.

Imported by every hook run: it imports the runtime only when the hook runs in a worker's session.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from teleclaude.runtime.api import Runtime


def record(
    write: Callable[[Runtime, str], bool],
    what: str,
    attempts: int = 50,
    pause: float = 0.05,
    hook: str = "stop",
) -> None:
    """Record a hook's news on the session of this worker (TELECLAUDE_SESSION_ID), if it is one, and only
    with that session's key (TELECLAUDE_SESSION_KEY): a hook cannot speak for another worker's session.

    The record is a compare-and-set on the session's row, which an observer saving at the same moment wins;
    so `write` is tried again (up to `attempts` times, `pause` seconds apart) until it says the row shows it.
    A failure is a warning on stderr, as from `teleclaude hook {hook}`.
    """
    session_id = os.environ.get("TELECLAUDE_SESSION_ID", "")
    if not session_id:
        return
    try:  # imported only for a worker's session: every other stop stays off sqlite and the runtime
        from teleclaude.runtime.api import open_runtime
        from teleclaude.runtime.core.marks import SESSION_KEY

        runtime = open_runtime(os.getcwd())  # the project's own profiles: its command prefix and sign
        if not runtime.owns(session_id, os.environ.get(SESSION_KEY, "")):
            warn(f"not recording {what}: ${SESSION_KEY} is not session {session_id}'s key", hook)
            return
        for attempt in range(attempts):
            if write(runtime, session_id):
                return
            if attempt + 1 < attempts:
                time.sleep(pause)
        warn(f"could not record {what}: session {session_id} kept changing", hook)
    except Exception as error:  # never break the agent over bookkeeping
        warn(f"could not record {what}: {error}", hook)


def mark_pane(option: str, payload: str) -> bool:
    """A worker on another computer: mark its own tmux pane with `payload`, sealed with its session's key
    (runtime/core/marks.py), for the observer to read over ssh. False when tmux refused."""
    from teleclaude.adapters.tmux import mark_own_pane
    from teleclaude.runtime.core.marks import SESSION_KEY, seal

    session_id, key = os.environ.get("TELECLAUDE_SESSION_ID", ""), os.environ.get(SESSION_KEY, "")
    return mark_own_pane(seal(key, session_id, option, payload), option)


def warn(message: str, hook: str = "stop") -> None:
    sys.stderr.write(f"teleclaude hook {hook}: {message}\n")
