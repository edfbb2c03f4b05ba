"""The real Gemini CLI (0.61), started by teleclaude's runtime, against the scripted Gemini API."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from teleclaude.demo.model_server import Fail, Text, shell
from teleclaude.errors import Error
from teleclaude.planner.api import next_work
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started

from .test_claude import events_until, screen
from .test_claude_runtime import git


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


@pytest.mark.parametrize("failure", ["rate_limit", "overloaded"], ids=["429-per-minute", "503-overloaded"])
def test_gemini_retrying_silently_past_api_wait_limit_is_rate_limited_and_the_next_step_falls_back(
    gemini_runtime, project, model_server, failure
):
    """gemini 0.61 retries these for minutes showing only its spinner: the api_wait_limit rule sees it."""
    gemini_runtime.context.config = replace(gemini_runtime.config, api_wait_limit=6)
    model_server.add(Fail(failure, repeat=1000, retry_after=2))
    started = start(gemini_runtime, project)
    events = events_until(gemini_runtime, started.session.id, EventKind.RATE_LIMITED, seconds=40)
    assert events[-1].detail.startswith("rate_limited until"), events[-1].detail
    assert gemini_runtime.store.get(started.session.id).state is SessionState.RATE_LIMITED
    assert model_server.turns()[-1].answer.startswith(f"fail {failure}")  # still retrying, silently
    assert "gemini" in gemini_runtime.context.availability.unavailable(gemini_runtime.clock())
    fallback = next_work(cwd=project)
    assert isinstance(fallback, Dispatch) and fallback.agent == "claude", fallback


def test_a_long_shell_command_under_gemini_is_not_an_api_wait(gemini_runtime, project, model_server):
    gemini_runtime.context.config = replace(gemini_runtime.config, api_wait_limit=6)
    model_server.add(shell("sleep 15", "Wait for the build"), Text("DONE: next-build greeting"))
    started = start(gemini_runtime, project)
    events = events_until(gemini_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]


# --- turn ends from the AfterAgent hook ---------------------------------------------------------------------


def test_twenty_gemini_turns_end_by_the_after_agent_hook(gemini_runtime, project, model_server):
    """The idle rule is set to 300 s (conftest.SETTINGS): each of these turn ends can only be the hook's."""
    started = start(gemini_runtime, project)
    details = [event.detail for event in turn_ended(gemini_runtime, started.session.id)]
    for turn in range(2, 21):
        sent = gemini_runtime.send_message(started.session.id, f"Turn {turn}: say done.")
        assert not isinstance(sent, Error), sent
        details += [event.detail for event in turn_ended(gemini_runtime, started.session.id)]
    assert details == ["stop hook"] * 20
    assert len(model_server.turns()) == 20


def test_an_after_agent_refusal_makes_the_gemini_worker_commit(gemini_runtime, project, model_server):
    """The AfterAgent hook denies the stop with uncommitted work; gemini goes on with the reason as prompt."""
    model_server.add(
        shell("printf 'notes\\n' > todos/greeting/notes.md", "Write notes"),
        Text("Notes written."),  # the turn would end here: the hook denies it (todos/greeting/ is dirty)
        shell("git add todos && git commit -q -m 'Add greeting notes'", "Commit the notes"),
        Text("Committed."),
    )
    started = start(gemini_runtime, project)
    events = turn_ended(gemini_runtime, started.session.id)
    assert [e.detail for e in events] == ["stop hook"]
    assert "Add greeting notes" in git(project, "log", "--oneline", "-1")
    assert git(project, "status", "--porcelain", "todos") == ""
    refused = model_server.turns()[2]  # the request after "Notes written."
    assert "todos/greeting/notes.md" in refused.text()  # the hook's reason reached the model


def turn_ended(runtime, session_id: str) -> list:
    return [
        e for e in events_until(runtime, session_id, EventKind.TURN_ENDED) if e.kind is EventKind.TURN_ENDED
    ]
