"""A worker waiting on the model's API for longer than `api_wait_limit` with no output: a limit the screen
does not name.

Gemini CLI 0.61 retries a per-minute 429 (`RESOURCE_EXHAUSTED`) and a 503 ("The model is overloaded") by
itself for many minutes, and its fallback handler starts the attempts again (so `general.maxAttempts` does
not make it give up); all that shows is its spinner row, `⠦ Thinking... (esc to cancel, 8m 11s)`. None of its
hooks carries the error (BeforeModel fires before each attempt without it, AfterModel only for answers,
Notification only for tool permissions). So: the profile's `api_wait` row on screen, no tool running (the
same row shows while a shell command runs, under the tool's `tool_running` box), and no new output since the
last progress for `api_wait_limit` seconds means the agent is limited: `rate_limited`, for the default pause.
Claude Code shows its retries (`Retrying in 16s · attempt 8/10`), but with its default 10 attempts they
last ~3 minutes: its profile's `api_wait` is that countdown, so the same rule bounds them.

A tool prints nothing while it runs, and once it is done (`✓` in its box) the spinner can show on for a
moment before the CLI writes the box into its history: the silence is counted from the last look that saw a
tool running (`Session.tool_seen_at`) when that is later than the last output.
"""

from __future__ import annotations

import re
from datetime import datetime

from teleclaude.planner.core.timeparse import format_duration
from teleclaude.runtime.core.limits import DEFAULT_PAUSE, LimitHit
from teleclaude.runtime.core.sessions import Session, SessionState
from teleclaude.runtime.core.supervision import silent_since

_WATCHED = (SessionState.RUNNING, SessionState.STALLED)
_TAIL = 12  # the rows above the input line where a CLI paints its spinner and running tools


def api_wait_limit(
    session: Session, screen: list[str], now: datetime, limit: float, api_wait: str, tool_running: str = ""
) -> LimitHit | None:
    """The limit, when the pane has shown the CLI waiting on its API (and no tool) with no output for
    `limit` seconds; None otherwise, and always for a profile without an `api_wait` pattern."""
    since = silent_since(session)
    if not api_wait or session.state not in _WATCHED or since is None:
        return None
    if session.tool_seen_at is not None and session.tool_seen_at > since:
        since = session.tool_seen_at
    silent = (now - since).total_seconds()
    if silent < limit:
        return None
    if not any(re.search(api_wait, row) for row in _tail(screen)) or tool_shown(screen, tool_running):
        return None
    line = f"no output for {format_duration(silent)} while {session.agent} waited on its API"
    return LimitHit(line, now + DEFAULT_PAUSE, "rate_limited")


def tool_shown(screen: list[str], tool_running: str) -> bool:
    """Whether the pane shows one of the CLI's tools running (its profile's `tool_running`)."""
    return bool(tool_running) and any(re.search(tool_running, row) for row in _tail(screen))


def _tail(screen: list[str]) -> list[str]:
    return [row for row in screen if row.strip()][-_TAIL:]
