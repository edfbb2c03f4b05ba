"""The api_wait_limit rule: silent retries (gemini's spinner row, claude's retry countdown) become a limit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

import pytest

from teleclaude.agents import PROFILES
from teleclaude.config.profiles import RuntimeConfig
from teleclaude.runtime.core.apiwait import api_wait_limit
from teleclaude.runtime.core.limits import DEFAULT_PAUSE
from teleclaude.runtime.core.sessions import Session, SessionState

from .factories import running_session

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
GEMINI = PROFILES["gemini"]
LIMIT = RuntimeConfig().api_wait_limit
INPUT = ["─" * 40, " YOLO Ctrl+Y", " *   Type your message or @path/to/file", " workspace (/directory)"]
RETRYING = [" > /next-build greeting", " ⠦ Thinking... (esc to cancel, 8m 11s)", *INPUT]
SHELL = [" > /next-build greeting", "╭────", "│ ⊷  Shell sleep 600", "╰────", RETRYING[1], *INPUT]
SCHEDULED = [" > /next-build greeting", "╭────", "│ o  Shell sleep 10", "╰────", RETRYING[1], *INPUT]
HOOK = [
    " > /next-build greeting",
    "✦ done",
    " ⠦ Executing Hook: teleclaude-stop (esc to cancel, 12s)",
    *INPUT,
]


gemini = partial(running_session, T0, agent="gemini", last_progress_at=T0)


def hit(session: Session, screen: list[str], seconds: float):
    return api_wait_limit(
        session, screen, T0 + timedelta(seconds=seconds), LIMIT, GEMINI.api_wait, GEMINI.tool_running
    )


def test_the_spinner_alone_for_the_limit_is_a_rate_limit_for_the_default_pause():
    found = hit(gemini(), RETRYING, LIMIT)
    assert found is not None and found.reason == "rate_limited"
    assert found.until == T0 + timedelta(seconds=LIMIT) + DEFAULT_PAUSE


@pytest.mark.parametrize(
    ("session", "screen", "seconds"),
    [
        (gemini(), RETRYING, LIMIT - 1),  # not yet
        (gemini(last_progress_at=T0 + timedelta(seconds=60)), RETRYING, LIMIT),  # output since
        (gemini(), SHELL, LIMIT * 10),  # a long shell command, not the API
        (gemini(), SCHEDULED, LIMIT * 10),  # a shell command about to run (a loaded machine's slow hook)
        (gemini(), HOOK, LIMIT * 10),  # a slow hook
        (gemini(), INPUT, LIMIT * 10),  # idle at its prompt
        (gemini(state=SessionState.TURN_ENDED), RETRYING, LIMIT * 10),
        (gemini(agent="claude"), RETRYING, LIMIT * 10),  # claude's profile: its retries show (`retry`)
    ],
    ids=[
        "before-the-limit",
        "output-since",
        "shell-running",
        "shell-scheduled",
        "hook-running",
        "idle",
        "turn-ended",
        "no-pattern",
    ],
)
def test_no_limit(session, screen, seconds):
    profile = PROFILES[session.agent]
    now = T0 + timedelta(seconds=seconds)
    assert api_wait_limit(session, screen, now, LIMIT, profile.api_wait, profile.tool_running) is None


FINISHED = [" > /next-build greeting", "╭────", "│ ✓  Shell sleep 600", "╰────", RETRYING[1], *INPUT]


def test_the_wait_after_a_long_tool_counts_from_the_last_look_that_saw_it_running():
    """The `✓` box and the spinner, 10 limits after the last output: the tool ran until a moment ago (its
    box not yet written into the history), so this is not yet a wait on the API; a limit after it is."""
    ran_until = T0 + timedelta(seconds=LIMIT * 10)
    session = gemini(tool_seen_at=ran_until)
    assert hit(session, FINISHED, LIMIT * 10 + 1) is None
    assert hit(session, FINISHED, LIMIT * 11) is not None  # retrying silently after the tool
    assert hit(gemini(), FINISHED, LIMIT * 10 + 1) is not None  # never seen running: from the last output


def test_claudes_retry_countdown_for_the_limit_is_a_rate_limit():
    """Claude Code retries a refused request 10 times by default (~3 min): its countdown is the API wait."""
    claude = PROFILES["claude"]
    screen = ["❯ /next-build greeting", "✻ API error · Retrying in 16s · attempt 8/10", "  ⎿  Tip: …", "❯ "]
    session = running_session(T0, agent="claude", last_progress_at=T0)
    at = partial(api_wait_limit, session, screen, limit=LIMIT, api_wait=claude.api_wait)
    assert at(now=T0 + timedelta(seconds=LIMIT - 1)) is None
    found = at(now=T0 + timedelta(seconds=LIMIT))
    assert found is not None and found.reason == "rate_limited"
    assert (
        api_wait_limit(
            session, ["✻ Thinking… (12s · esc to interrupt)"], T0 + timedelta(hours=1), LIMIT, claude.api_wait
        )
        is None
    )
