"""Watching a real CLI's session: its screen, and its events as the runtime reports them (no sleeps); and
changing what the runtime gives the agent's next workers."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace

import pytest

from teleclaude.runtime.core.sessions import EventKind


def screen(runtime, session) -> str:
    return "\n".join(runtime.tmux.screen(session.pane_id, runtime.tmux.views()[session.pane_id]))


def screen_shows(runtime, session, text: str | tuple[str, ...], seconds: float = 60.0) -> None:
    """Waits for `text` (or one of several) in a row of the session's screen: a CLI draws a dialog or a
    message a moment after what the runtime reacted to, later still on a loaded machine."""
    texts = (text,) if isinstance(text, str) else text
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        view = runtime.tmux.views().get(session.pane_id)
        rows = runtime.tmux.screen(session.pane_id, view) if view else []
        if any(one in row for row in rows for one in texts):
            return
        time.sleep(0.1)
    pytest.fail(f"{text!r} never showed; the screen:\n{screen(runtime, session)}")


def events_until(runtime, session_id: str, kind: EventKind, seconds: float = 120.0) -> list:
    """Every event of the session up to the first of `kind` (waiting on the runtime, not sleeping), for up to
    `seconds` whatever other events come first: a deadline, generous for a CLI on a loaded machine; it only
    delays a failure. Ends early once the session is over with nothing more to report."""
    seen = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        waited = runtime.wait_for_sessions([session_id], timeout=min(10.0, left))
        seen += waited.events
        if any(event.kind is kind for event in seen):
            return seen
        if not waited.events and not waited.timed_out:
            break  # the session ended: no event comes any more
    session = runtime.store.get(session_id)
    saw = [(e.kind.value, e.detail) for e in seen]
    pytest.fail(f"no {kind.value} event; saw {saw}; the screen:\n{screen(runtime, session)}")


def turn_ended(runtime, session_id: str) -> list:
    """The turn-end events of the session up to its first."""
    seen = events_until(runtime, session_id, EventKind.TURN_ENDED)
    return [event for event in seen if event.kind is EventKind.TURN_ENDED]


def with_env(runtime, agent: str, **changes: str | None) -> None:
    """Change what the agent's workers get (None: leave the variable out), on top of teleclaude.toml's."""
    env = runtime.config.profiles[agent].env
    with_profile(runtime, agent, env={k: v for k, v in {**env, **changes}.items() if v is not None})


def with_profile(runtime, agent: str, **changes: object) -> None:
    config = runtime.context.config
    profiles = {**config.profiles, agent: replace(config.profiles[agent], **changes)}
    runtime.context.config = replace(config, profiles=profiles)


def sessions_list(project) -> str:
    """What `teleclaude sessions list` prints for the project, run as a user runs it."""
    argv = [sys.executable, "-m", "teleclaude", "sessions", "list", "--cwd", str(project)]
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout
