"""The real Gemini CLI (0.61), started by teleclaude's runtime, against the scripted Gemini API."""

from __future__ import annotations

from datetime import timedelta

import pytest

from teleclaude.demo.model_server import Fail, Text
from teleclaude.errors import Error
from teleclaude.planner.api import next_work
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started

from .test_claude import events_until, screen


def start(runtime, project, command: str = "next-build", args: str = "greeting", mode: str = "med"):
    started = runtime.run_agent_command("local", command, args, str(project), "gemini", mode)
    if isinstance(started, Error):
        pytest.fail(started.message)  # the CLI's own last output, whole
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


@pytest.mark.parametrize(
    ("failure", "reason"),
    [(Fail("quota", repeat=20), "quota_exhausted")],
    ids=["daily-quota"],
)
def test_a_gemini_limit_makes_it_unavailable_and_the_next_step_falls_back(
    gemini_runtime, project, model_server, failure, reason
):
    assert next_work(cwd=project).agent == "gemini"  # the build row: gemini, claude, codex
    model_server.add(failure)
    started = start(gemini_runtime, project)
    events = events_until(gemini_runtime, started.session.id, EventKind.RATE_LIMITED, seconds=90)
    assert events[-1].detail.startswith(reason), events[-1].detail
    # "Usage limit reached for gemini-3.8-flash." in a Keep trying / Stop dialog; no reset time is printed
    # for a daily quota (RetryInfo or not), so the default pause applies
    until = gemini_runtime.context.availability.unavailable(gemini_runtime.clock())["gemini"].until
    assert until > started.session.created_at + timedelta(minutes=50)
    assert "Keep trying" in screen(gemini_runtime, started.session)  # the dialog was not answered
    fallback = next_work(cwd=project)
    assert isinstance(fallback, Dispatch) and fallback.agent == "claude", fallback
