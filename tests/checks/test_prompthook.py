"""`teleclaude hook prompt`: the CLI's own id of its conversation, and its record of it, kept on the worker's
session as the CLI is given its first message, before any tool call: a worker killed before its first tool
use is resumed all the same (issue 35)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.agents import PROFILES

from ..unit.factories import running_session

KEY = "k" * 32
# what each CLI gives the hook install names for its `prompt` verb, as captured (the fields teleclaude reads,
# and some it does not): Claude Code's and Codex's UserPromptSubmit, Gemini CLI's BeforeAgent, and what
# teleclaude's opencode plugin passes on from its `chat.message` hook (opencode keeps no file a conversation)
INPUTS = {
    "claude": {
        "session_id": "3f0c2a4e-8b1d-4c55-9e7a-1d2b3c4d5e6f",
        "transcript_path": "/home/dev/.claude/projects/-home-dev-project/3f0c2a4e-8b1d-4c55.jsonl",
        "cwd": "/home/dev/project",
        "permission_mode": "bypassPermissions",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "/next-build greeting",
    },
    "codex": {
        "session_id": "01a21572-ba14-71d1-bfe4-6ac1f72f30b5",
        "turn_id": "01a21572-c052-74b3-93a8-bfc019c6031d",
        "transcript_path": "/home/dev/.codex/sessions/2026/11/26/rollout-2026-11-26T01-22-50-01a2.jsonl",
        "cwd": "/home/dev/project",
        "hook_event_name": "UserPromptSubmit",
        "model": "gpt-5.1-codex",
        "prompt": "$next-build greeting",
    },
    "gemini": {
        "session_id": "19a3a0a9-fcc3-45d5-98a4-6dc1cffc4fd9",
        "transcript_path": "/home/dev/.gemini/tmp/project/chats/session-2026-11-26T01-23-19a3a0a9.jsonl",
        "cwd": "/home/dev/project",
        "hook_event_name": "BeforeAgent",
        "timestamp": "2026-11-26T01:23:34.639Z",
        "prompt": "You are the **builder** for the work item `greeting`",
    },
    "opencode": {
        "session_id": "ses_2b7e1f0c9ffeQ3xk7Zr1mWcY4p",
        "cwd": "/home/dev/project",
        "hook_event_name": "chat.message",
    },
}


@pytest.fixture
def worker(cli_env, tmp_path) -> tuple[SessionStore, dict[str, str]]:
    """A worker's session in the store, just started (no conversation known yet), and the environment its
    hooks run with (its id and key)."""
    store = SessionStore(cli_env["TELECLAUDE_DB"])
    store.add(running_session(datetime.now(UTC), id="w1", project=str(tmp_path), key=KEY))
    return store, cli_env | {"TELECLAUDE_SESSION_ID": "w1", "TELECLAUDE_SESSION_KEY": KEY}


def prompt_hook(env: dict[str, str], agent: str, payload: object, cwd: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "teleclaude", "hook", "prompt", "--agent", agent]
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(argv, input=text, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_every_driver_that_resumes_runs_the_prompt_hook():
    """Its conversation is known from its first message on, whether or not it ever calls a tool."""
    resumes = [name for name, profile in PROFILES.items() if profile.resume]
    assert resumes and all(PROFILES[name].hooks.runs("prompt") for name in resumes), resumes


@pytest.mark.parametrize("agent", sorted(INPUTS))
def test_the_first_message_keeps_the_conversation_and_its_record_on_the_session(agent, worker, tmp_path):
    store, env = worker
    payload = INPUTS[agent]
    done = prompt_hook(env, agent, payload, tmp_path)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    kept = store.get("w1")
    assert kept is not None
    assert (kept.conversation, kept.transcript) == (payload["session_id"], payload.get("transcript_path", ""))
    again = prompt_hook(env, agent, {**payload, "prompt": "go on"}, tmp_path)  # a later message: the same
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert store.get("w1") == kept


def test_another_sessions_key_keeps_nothing(worker, tmp_path):
    store, env = worker
    done = prompt_hook(env | {"TELECLAUDE_SESSION_KEY": "not-its-key"}, "claude", INPUTS["claude"], tmp_path)
    assert (done.returncode, done.stdout) == (0, "")
    kept = store.get("w1")
    assert kept is not None and (kept.conversation, kept.transcript) == ("", "")


@pytest.mark.parametrize(
    "payload",
    ['{"session_id": 7}', '{"session_id": "' + "x" * 300 + '"}', "[]", "not json", '{"prompt": "go"}'],
)
def test_input_without_a_usable_id_keeps_nothing_and_the_prompt_goes_ahead(worker, tmp_path, payload):
    store, env = worker
    done = prompt_hook(env, "opencode", payload, tmp_path)
    assert (done.returncode, done.stdout) == (0, "")
    kept = store.get("w1")
    assert kept is not None and kept.conversation == ""
