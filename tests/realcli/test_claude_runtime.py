"""The real Claude Code under teleclaude's runtime when things go wrong: dialogs, refusals, API errors and
limits, and turn ends reported by its hooks."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from teleclaude.errors import Error, ErrorCode
from teleclaude.runtime.core.sessions import SessionState


def with_env(runtime, agent: str, **changes: str | None) -> None:
    """Change what the agent's workers get (None: leave the variable out), on top of teleclaude.toml's."""
    config = runtime.context.config
    profile = config.profiles[agent]
    env = {k: v for k, v in {**profile.env, **changes}.items() if v is not None}
    profiles = {**config.profiles, agent: replace(profile, env=env)}
    runtime.context.config = replace(config, profiles=profiles)


def blocked(runtime, project) -> Error:
    answer = runtime.run_agent_command("local", "next-build", "greeting", str(project), "claude", "med")
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
    monkeypatch.delenv("IS_SANDBOX", raising=False)  # not from the tmux server's environment either
    with_env(runtime, "claude", IS_SANDBOX=None)
    answer = blocked(runtime, project)
    assert "--dangerously-skip-permissions cannot be used with root" in answer.message  # claude's own words
    assert 'env = {IS_SANDBOX = "1"}' in answer.message
