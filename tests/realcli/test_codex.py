"""The real Codex CLI (0.169), started by teleclaude's runtime, against the scripted Responses API."""

from __future__ import annotations

from datetime import timedelta

import pytest

from teleclaude.demo.model_server import Fail, Text
from teleclaude.demo.scenario import commit_all
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner.api import next_work
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started

from .test_claude import events_until, screen


def start(runtime, project, command: str = "next-build", args: str = "greeting", mode: str = "med"):
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


def test_a_command_codex_refuses_errs_the_session_with_its_words(codex, project, model_server):
    """Codex 0.169 has no custom prompts: `/prompts:next-build` is refused and nothing reaches the model. That
    is an error of the session, never a turn end (the step never ran)."""
    settings = project / "teleclaude.toml"
    settings.write_text(
        settings.read_text() + '\n[runtime.agents.codex]\ncommand_sign = "/"\ncommand_prefix = "prompts:"\n'
    )
    runtime = open_runtime(project)
    started = runtime.run_agent_command("local", "next-build", "greeting", str(project), "codex", "med")
    if isinstance(started, Started):  # the refusal came after the Enter was seen to be taken
        events = events_until(runtime, started.session.id, EventKind.ERRORED)
        assert [e.kind for e in events] == [EventKind.ERRORED]
        said, session_id = events[0].detail, started.session.id
    else:  # codex kept the refused text in its input box: the delivery itself failed
        assert started.code is ErrorCode.INVALID_ARGUMENT, started
        said, session_id = started.message, runtime.store.sessions()[0].id
    assert "Unrecognized command '/prompts:next-build'" in said
    assert runtime.store.get(session_id).state is SessionState.ERRORED
    assert not model_server.turns()


def test_the_hooks_review_dialog_is_reported_never_answered(codex, project):
    """Without --dangerously-bypass-hook-trust, codex asks to review the hook `teleclaude install` wrote."""
    settings = project / "teleclaude.toml"
    settings.write_text(
        settings.read_text()
        + '\n[runtime.agents.codex]\nargs = ["--dangerously-bypass-approvals-and-sandbox", "--no-daemon"]\n'
    )
    runtime = open_runtime(project)
    started = runtime.run_agent_command("local", "next-build", "greeting", str(project), "codex", "med")
    assert isinstance(started, Error) and started.code is ErrorCode.WORKER_BLOCKED, started
    assert "hooks review" in started.message


def build_row_first(project, agent: str, then: str) -> None:
    settings = project / "teleclaude.toml"
    settings.write_text(settings.read_text() + f'\n[matrix]\nbuild = ["{agent}:med", "{then}:med"]\n')
    commit_all(project, "Build row for the test")


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (Fail("session_limit", resets_in=3 * 3600), "quota_exhausted"),  # HTTP 429 usage_limit_reached
        (Fail("rate_limit", repeat=10, retry_after=1), "rate_limited"),  # retried, then given up
    ],
    ids=["usage-limit", "429-retried-then-given-up"],
)
def test_a_codex_limit_makes_it_unavailable_until_the_reset_and_the_next_step_falls_back(
    codex_runtime, project, model_server, failure, reason
):
    build_row_first(project, "codex", "gemini")
    assert next_work(cwd=project).agent == "codex"
    model_server.add(failure)
    started = start(codex_runtime, project)
    events = events_until(codex_runtime, started.session.id, EventKind.RATE_LIMITED, seconds=90)
    assert events[-1].detail.startswith(reason), events[-1].detail
    until = codex_runtime.context.availability.unavailable(codex_runtime.clock())["codex"].until
    if reason == "quota_exhausted":  # "try again at Nov 26th, 2026 2:21 AM." (to the minute)
        assert abs(until - (started.session.created_at + timedelta(seconds=failure.resets_in))) < timedelta(
            minutes=2
        )
    fallback = next_work(cwd=project)
    assert isinstance(fallback, Dispatch) and fallback.agent == "gemini", fallback
