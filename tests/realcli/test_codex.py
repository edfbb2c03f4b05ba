"""The real Codex CLI (0.169), started by teleclaude's runtime, against the scripted Responses API."""

from __future__ import annotations

from teleclaude.demo.model_server import Text
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started

from .test_claude import events_until, screen


def start(runtime, project, command: str = "next-build", args: str = "greeting", mode: str = "med") -> Started:
    started = runtime.run_agent_command("local", command, args, str(project), "codex", mode)
    assert isinstance(started, Started), started
    return started


def test_codex_starts_unattended_and_its_skill_reaches_the_model_with_its_arguments(
    codex_runtime, project, model_server
):
    model_server.add(Text("DONE: next-build greeting - nothing to build"))
    started = start(codex_runtime, project)
    assert started.session.state is SessionState.RUNNING
    turn = model_server.wait_for(lambda r: r.turn, timeout=30)
    sent = turn.text()
    assert "$next-build greeting" in sent  # the user's message: the arguments follow the skill's name
    assert "You are the **builder** for the work item `$ARGUMENTS`" in sent  # the skill, expanded
    assert "`$ARGUMENTS` stands for the text after `$next-build`" in sent
    assert "exec_command" in turn.tools()
    events = events_until(codex_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert "DONE: next-build greeting" in screen(codex_runtime, started.session)
