"""Watching a real CLI's session: its screen, and its events as the runtime reports them (no sleeps)."""

from __future__ import annotations

import time

import pytest

from teleclaude.runtime.core.sessions import EventKind


def screen(runtime, session) -> str:
    return "\n".join(runtime.tmux.screen(session.pane_id, runtime.tmux.views()[session.pane_id]))


def screen_shows(runtime, session, text: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        view = runtime.tmux.views().get(session.pane_id)
        if view and any(text in row for row in runtime.tmux.screen(session.pane_id, view)):
            return
        time.sleep(0.1)
    pytest.fail(f"{text!r} never showed; the screen:\n{screen(runtime, session)}")


def events_until(runtime, session_id: str, kind: EventKind, seconds: float = 60.0) -> list:
    """Every event of the session up to the first of `kind` (waiting on the runtime, not sleeping)."""
    seen = []
    for _ in range(int(seconds // 10) or 1):
        seen += runtime.wait_for_sessions([session_id], timeout=10).events
        if any(event.kind is kind for event in seen):
            return seen
    session = runtime.store.get(session_id)
    saw = [(e.kind.value, e.detail) for e in seen]
    pytest.fail(f"no {kind.value} event; saw {saw}; the screen:\n{screen(runtime, session)}")


def turn_ended(runtime, session_id: str) -> list:
    """The turn-end events of the session up to its first."""
    seen = events_until(runtime, session_id, EventKind.TURN_ENDED)
    return [event for event in seen if event.kind is EventKind.TURN_ENDED]
