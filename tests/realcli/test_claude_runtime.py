"""The real Claude Code under teleclaude's runtime when things go wrong: dialogs, refusals, API errors and
limits as only claude shows them (its subscription limits and their dialog, either signal alone, its retry
countdown). A 429 by its hook alone, twenty turns ended by its Stop hook and its refusal: test_contract.py."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from teleclaude.adapters.store import AvailabilityStore
from teleclaude.config.profiles import SandboxMode
from teleclaude.demo.model_server import Fail
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.render import to_text
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started, StartRequest

from .conftest import build_row_first, start
from .watching import events_until, screen_shows, with_env, with_profile


def blocked(runtime, project) -> Error:
    answer = runtime.run_agent_command(
        StartRequest("local", "next-build", "greeting", str(project), "claude", "med")
    )
    assert isinstance(answer, Error), answer
    assert answer.code is ErrorCode.WORKER_BLOCKED, answer.message
    (session,) = runtime.store.sessions()
    assert session.state is SessionState.ERRORED
    assert runtime.tmux.session_names() == set()  # nothing left behind
    return answer


def test_a_first_run_dialog_is_reported_as_worker_blocked_with_its_fix(
    runtime, project, isolated_environment
):
    state_file = isolated_environment / ".claude.json"
    state = json.loads(state_file.read_text())
    state["projects"] = {}  # the workspace trust question was never answered
    state_file.write_text(json.dumps(state))
    runtime.context.config = replace(runtime.config, startup_timeout=300)  # only recognition ends it quickly
    answer = blocked(runtime, project)
    assert "hasTrustDialogAccepted" in answer.message  # the key that pre-answers it


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="claude refuses only root")
def test_as_root_without_is_sandbox_claudes_refusal_and_the_fix_reach_the_user(runtime, project, monkeypatch):
    """Unsandboxed (in bubblewrap claude is told it is sandboxed, CLAUDE_CODE_BUBBLEWRAP, and starts)."""
    monkeypatch.delenv("IS_SANDBOX", raising=False)  # not from the tmux server's environment either
    with_env(runtime, "claude", IS_SANDBOX=None)
    runtime.context.config = replace(runtime.config, sandbox=SandboxMode.OFF)
    answer = blocked(runtime, project)
    assert "--dangerously-skip-permissions cannot be used with root" in answer.message  # claude's own words
    assert 'env = {IS_SANDBOX = "1"}' in answer.message


# --- API errors and limits ----------------------------------------------------------------------------------

OAUTH_TOKEN = (
    "sk-ant-oat01-teleclaude-scripted-model-server"  # a subscriber's login: subscription limits show
)


@pytest.mark.parametrize(
    ("failure", "subscriber", "signal"),
    [
        ("rate_limit", False, "screen"),
        ("overloaded", False, "hook"),
        ("session_limit", True, "hook"),
        ("session_limit", True, "screen"),
    ],
)
def test_a_limit_makes_claude_unavailable_until_its_reset_and_next_work_falls_back(
    runtime, project, model_server, isolated_environment, failure, subscriber, signal
):
    """Either signal alone is enough: the StopFailure hook (no screen patterns), or the screen (no hook). (A
    429 told by the hook alone: test_contract.py.)"""
    build_row_first(project, "claude", "codex")
    assert called_agent(project) == "claude"
    if subscriber:
        with_env(runtime, "claude", ANTHROPIC_API_KEY=None, CLAUDE_CODE_OAUTH_TOKEN=OAUTH_TOKEN)
    if signal == "hook":
        with_profile(runtime, "claude", limit_patterns=())
    else:
        settings_file = isolated_environment / ".claude" / "settings.json"
        settings = json.loads(settings_file.read_text())
        del settings["hooks"]["StopFailure"]
        settings_file.write_text(json.dumps(settings))
    resets = int(time.time()) + 3 * 3600 + 30 * 60
    model_server.add(Fail(failure, resets_at=resets))
    started = runtime.start(app.next_work(cwd=project))
    assert isinstance(started, Started), started
    events_until(runtime, started.session.id, EventKind.RATE_LIMITED)
    assert runtime.store.get(started.session.id).state is SessionState.RATE_LIMITED
    until = AvailabilityStore().unavailable(datetime.now(UTC))["claude"].until
    if subscriber:  # "resets 3:48pm (UTC)": the printed reset, to the minute
        assert abs(until - datetime.fromtimestamp(resets, UTC)) <= timedelta(minutes=1)
    assert called_agent(project) == "codex"  # the next step goes to the next agent of the row
    if subscriber:  # nothing may type into what claude shows then: 2.1.197 opens its /rate-limit-options
        # dialog by itself, 2.1.332 waits to continue by itself at the reset
        waits = ("Stop and wait for limit to reset", "Continuing automatically")
        screen_shows(runtime, started.session, waits)
        typed = runtime.send_message(started.session.id, "continue")
        assert isinstance(typed, Error) and typed.code is ErrorCode.WORKER_BLOCKED, typed


def test_claude_retrying_with_its_defaults_is_still_seen_as_limited(runtime, project, model_server):
    """Without CLAUDE_CODE_MAX_RETRIES claude retries a refused request 10 times with growing waits (minutes;
    NOTES.md), showing its retry countdown: after api_wait_limit of that (shortened from 300 s) the session
    is rate_limited and claude unavailable, while claude is still retrying."""
    with_env(runtime, "claude", CLAUDE_CODE_MAX_RETRIES=None)
    runtime.context.config = replace(runtime.config, api_wait_limit=5)
    model_server.add(Fail("rate_limit", repeat=1000, retry_after=2))
    started = start(runtime, project, "claude")
    screen_shows(runtime, started.session, "attempt 1/10")  # its own default: 10 attempts
    events = events_until(runtime, started.session.id, EventKind.RATE_LIMITED, seconds=90)
    assert events[-1].detail.startswith("rate_limited"), events[-1].detail
    assert runtime.store.get(started.session.id).state is SessionState.RATE_LIMITED
    assert "claude" in AvailabilityStore().unavailable(datetime.now(UTC))
    assert model_server.turns()[-1].answer.startswith("fail rate_limit")  # no answer got through


# --- helpers ------------------------------------------------------------------------------------------------


def called_agent(project) -> str:
    """The agent field of next_work's TOOL_CALL."""
    text = to_text(app.next_work(cwd=project))
    assert text.startswith("TOOL_CALL:"), text
    agent = re.search(r'agent="([^"]+)"', text)
    assert agent, text
    return agent[1]
