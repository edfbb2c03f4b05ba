"""The real Gemini CLI (0.61), started by teleclaude's runtime, against the scripted Gemini API."""

from __future__ import annotations

from teleclaude.demo.model_server import Text
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started

from .test_claude import events_until, screen


def start(runtime, project, command: str = "next-build", args: str = "greeting", mode: str = "med") -> Started:
    started = runtime.run_agent_command("local", command, args, str(project), "gemini", mode)
    assert isinstance(started, Started), started
    return started


def test_gemini_starts_unattended_and_its_command_reaches_the_model_expanded(
    gemini_runtime, project, model_server
):
    model_server.add(Text("DONE: next-build greeting - nothing to build"))
    started = start(gemini_runtime, project)
    assert started.session.state is SessionState.RUNNING
    turn = model_server.wait_for(lambda r: r.turn, timeout=30)
    sent = turn.text()
    assert "You are the **builder** for the work item `greeting`" in sent
    assert "{{args}}" not in sent and "$ARGUMENTS" not in sent
    assert "run_shell_command" in turn.tools()
    events = events_until(gemini_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert "DONE: next-build greeting" in screen(gemini_runtime, started.session)
