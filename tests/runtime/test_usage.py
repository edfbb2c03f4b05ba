"""Stand-in runs exercise the recording of usage: a stand-in claude reports its rate-limit window through
`teleclaude hook statusline`, as Claude Code runs its status line, and a turn on a used-up window is lost to
the limit (its StopFailure hook), which the window's reset ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from teleclaude.adapters.store import AvailabilityStore
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started, StartRequest

from .conftest import Watch


def turn(runtime, project) -> str:
    started = runtime.run_agent_command(StartRequest("local", "hello", "x", str(project), "claude", "med"))
    assert isinstance(started, Started), started
    return started.session.id


def test_a_stand_in_claudes_window_is_recorded_turn_by_turn_until_a_turn_is_lost(
    project, runtime, monkeypatch, isolated_environment
):
    monkeypatch.setenv("FAKE_AGENT_CLAUDE", "usage")
    monkeypatch.setenv("FAKE_AGENT_WINDOW_CLAUDE", "40:600")
    # the stand-ins' shared window, in claude's own folder: each sandboxed worker has its own /tmp
    window = isolated_environment / ".claude" / "window.json"
    window.parent.mkdir(exist_ok=True)
    monkeypatch.setenv("FAKE_AGENT_WINDOW_FILE", str(window))
    store = AvailabilityStore()
    seen = []
    for _ in range(3):
        session_id = turn(runtime, project)
        Watch(runtime, session_id).until(EventKind.TURN_ENDED)
        (window,) = store.usage(datetime.now(UTC))["claude"]
        seen.append((window.window, window.used_percent))
    assert seen == [("5h", 40.0), ("5h", 80.0), ("5h", 100.0)]
    resets_at = window.resets_at
    assert resets_at is not None and timedelta(0) < resets_at - datetime.now(UTC) <= timedelta(seconds=600)
    began = datetime.now(UTC)
    lost = turn(runtime, project)  # the window is used up: the limit ends the turn
    Watch(runtime, lost).until(EventKind.RATE_LIMITED)
    took = datetime.now(UTC) - began
    assert runtime.store.get(lost).state is SessionState.RATE_LIMITED
    until = store.unavailable(datetime.now(UTC))["claude"].until
    # "resets in Ns": the window's own reset, counted from when the stand-in printed it; the StopFailure
    # hook that reads it starts later, by seconds on a loaded machine (3 s seen), and within the turn
    assert resets_at - timedelta(seconds=1) <= until <= resets_at + took + timedelta(seconds=2)
