"""`teleclaude hook tool-use`: a worker's tool use recorded for its session; never a failure for the agent."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from teleclaude.adapters import trust_store
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.runtime.core.sessions import Session, SessionState
from teleclaude.runtime.hooks import tool as tool_hook

# what Claude Code 2.1 sends to a PreToolUse hook (the fields teleclaude reads, plus some it ignores)
READ = {
    "session_id": "c1",
    "transcript_path": "/t.jsonl",
    "cwd": "/home/dev/project",
    "permission_mode": "bypassPermissions",
    "hook_event_name": "PreToolUse",
    "tool_name": "Read",
    "tool_input": {"file_path": "/home/dev/project/src/x.py"},
    "tool_use_id": "toolu_1",
}


# what Codex 0.169 (PreToolUse) and Gemini CLI 0.61 (BeforeTool) sent before a shell command, as captured
CODEX_SHELL = {
    "session_id": "01a21572-ba14-71d1-bfe4-6ac1f72f30b5",
    "turn_id": "01a21572-c052-74b3-93a8-bfc019c6031d",
    "transcript_path": "/home/dev/.codex/sessions/2026/11/26/rollout-2026-11-26T01-22-50-01a2.jsonl",
    "cwd": "/home/dev/project",
    "hook_event_name": "PreToolUse",
    "model": "gpt-5.1-codex",
    "permission_mode": "bypassPermissions",
    "tool_name": "Bash",
    "tool_input": {"command": "git status --short"},
    "tool_use_id": "call_6bdfe94fd922fa22b87256c8",
}
GEMINI_SHELL = {
    "session_id": "19a3a0a9-fcc3-45d5-98a4-6dc1cffc4fd9",
    "transcript_path": "/home/dev/.gemini/tmp/project/chats/session-2026-11-26T01-23-19a3a0a9.jsonl",
    "cwd": "/home/dev/project",
    "hook_event_name": "BeforeTool",
    "timestamp": "2026-11-26T01:23:34.639Z",
    "tool_name": "run_shell_command",
    "tool_input": {"command": "git status --short", "description": "Look"},
}


def hook(
    cli_env: dict[str, str], payload: str, session: str | None = "w1", agent: str = "claude"
) -> subprocess.CompletedProcess:
    env = dict(cli_env)
    env.pop("TELECLAUDE_SESSION_ID", None)
    if session is not None:
        env["TELECLAUDE_SESSION_ID"] = session
    argv = [sys.executable, "-m", "teleclaude", "hook", "tool-use", "--agent", agent]
    return subprocess.run(argv, input=payload, env=env, capture_output=True, text=True, timeout=60)


def test_a_tool_use_is_recorded_for_the_session_with_its_target(cli_env):
    done = hook(cli_env, json.dumps(READ))
    assert (done.returncode, done.stdout) == (0, "")
    bash = {**READ, "tool_name": "Bash", "tool_input": {"command": "pytest -q\n  tests/x"}}
    assert hook(cli_env, json.dumps(bash)).returncode == 0
    uses = SessionStore(cli_env["TELECLAUDE_DB"]).recent_tool_uses(["w1"])["w1"]
    assert [(u.tool, u.target) for u in uses] == [("Read", "src/x.py"), ("Bash", "pytest -q tests/x")]


@pytest.mark.parametrize(
    ("agent", "payload", "tool"),
    [("codex", CODEX_SHELL, "Bash"), ("gemini", GEMINI_SHELL, "run_shell_command")],
    ids=["codex", "gemini"],
)
def test_codex_and_gemini_tool_uses_are_recorded_and_the_call_goes_ahead(cli_env, agent, payload, tool):
    done = hook(cli_env, json.dumps(payload), agent=agent)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    (use,) = SessionStore(cli_env["TELECLAUDE_DB"]).recent_tool_uses(["w1"])["w1"]
    assert (use.tool, use.target) == (tool, "git status --short")


def test_only_the_latest_are_kept(cli_env):
    """The first 24 through the hook's own `record`, in this process (the hook as a process is tested above),
    the last through the process: it finds the 24 and keeps the latest."""
    store = SessionStore(cli_env["TELECLAUDE_DB"])
    for number in range(24):
        tool_hook.record("w1", "", json.dumps({**READ, "tool_input": {"file_path": f"f{number}"}}))
    done = hook(cli_env, json.dumps({**READ, "tool_input": {"file_path": "f24"}}))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert [u.target for u in store.recent_tool_uses(["w1"], limit=100)["w1"]] == [
        f"f{n}" for n in range(5, 25)
    ]
    assert [u.target for u in store.recent_tool_uses(["w1"])["w1"]] == [f"f{n}" for n in range(20, 25)]


def test_outside_a_worker_nothing_is_recorded(cli_env):
    done = hook(cli_env, json.dumps(READ), session=None)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not Path(cli_env["TELECLAUDE_DB"]).exists()


def test_bad_input_or_a_broken_database_never_fails_the_agent(cli_env, tmp_path):
    for payload in ("", "not json", "[]", json.dumps({"tool_input": {}})):
        done = hook(cli_env, payload)
        assert (done.returncode, done.stdout) == (0, ""), payload
        assert done.stderr.startswith("teleclaude hook tool-use: ")
    folder = tmp_path / "db-is-a-folder"
    folder.mkdir()
    done = hook({**cli_env, "TELECLAUDE_DB": str(folder)}, json.dumps(READ))
    assert (done.returncode, done.stdout) == (0, "")
    assert "teleclaude hook tool-use: " in done.stderr


def test_the_stop_failure_hook_never_fails_the_agent(cli_env):
    """`hook stop-failure` (the real handler; what it records is in tests/runtime and tests/realcli)."""
    argv = [sys.executable, "-m", "teleclaude", "hook", "stop-failure", "--agent", "claude"]
    env = {k: v for k, v in cli_env.items() if k != "TELECLAUDE_SESSION_ID"}
    payload = json.dumps({"hook_event_name": "StopFailure", "error": "rate_limit"})
    done = subprocess.run(argv, input=payload, env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")  # outside a worker: nothing to record
    done = subprocess.run(argv, input="not json", env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr.startswith("teleclaude hook stop-failure: ")


def test_the_hooks_of_a_worker_on_another_computer_leave_that_computers_database_alone(cli_env, tmp_path):
    """Over there (the launcher set TELECLAUDE_TURN_END_TO_PANE) the runtime's database is out of reach:
    its StopFailure hook marks the pane instead (tests/runtime/test_remote.py), its prompt and tool-use hooks
    keep nothing."""
    db = tmp_path / "over-there.db"
    env = {
        **cli_env,
        "TELECLAUDE_SESSION_ID": "w1",
        "TELECLAUDE_TURN_END_TO_PANE": "1",
        "TELECLAUDE_DB": str(db),
    }
    env.pop("TMUX", None)
    env.pop("TMUX_PANE", None)
    rollout = {
        "hook_event_name": "UserPromptSubmit",
        "transcript_path": "/r.jsonl",
        "prompt": "$next-build x",
    }
    failure = {"hook_event_name": "StopFailure", "error": "rate_limit", "last_assistant_message": "limit"}
    tool = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "git status"}}
    for name, payload in (("prompt", rollout), ("tool-use", tool), ("stop-failure", failure)):
        argv = [sys.executable, "-m", "teleclaude", "hook", name]
        done = subprocess.run(
            argv, input=json.dumps(payload), env=env, capture_output=True, text=True, timeout=60
        )
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert done.stderr.startswith("teleclaude hook stop-failure: ")  # not in a tmux pane: it says so
    assert not db.exists()


def test_the_prompt_hook_never_fails_the_agent_on_input_it_cannot_read(cli_env):
    """codex's `UserPromptSubmit`: bytes that are not UTF-8, or no JSON, and the prompt still goes ahead."""
    argv = [sys.executable, "-m", "teleclaude", "hook", "prompt", "--agent", "codex"]
    env = {**cli_env, "TELECLAUDE_SESSION_ID": "w1"}
    for payload in (b"\xff\xfe{not utf-8", b"not json", b""):
        done = subprocess.run(argv, input=payload, env=env, capture_output=True, timeout=60)
        assert (done.returncode, done.stdout, b"Traceback" in done.stderr) == (0, b"", False)


def test_a_hook_that_cannot_record_names_itself_in_its_warning(cli_env, tmp_path):
    """The prompt and stop-failure hooks record with the stop hook's code; each warning names its own hook."""
    folder = tmp_path / "db"
    folder.mkdir()  # a database that cannot be opened
    env = {**cli_env, "TELECLAUDE_SESSION_ID": "w1", "TELECLAUDE_DB": str(folder)}
    payloads = {
        "prompt": {"hook_event_name": "UserPromptSubmit", "transcript_path": "/r.jsonl", "prompt": "x"},
        "stop-failure": {"hook_event_name": "StopFailure", "error": "rate_limit"},
    }
    for name, payload in payloads.items():
        argv = [sys.executable, "-m", "teleclaude", "hook", name]
        done = subprocess.run(
            argv, input=json.dumps(payload), env=env, capture_output=True, text=True, timeout=60
        )
        assert (done.returncode, done.stdout) == (0, "")
        assert done.stderr.startswith(f"teleclaude hook {name}: "), done.stderr


def test_a_hook_on_another_computer_without_tmux_on_its_path_says_so_and_exits_0(cli_env, tmp_path):
    """The remote stop hook marks its pane with tmux; a PATH without tmux is no traceback."""
    env = {
        **cli_env,
        "TELECLAUDE_SESSION_ID": "w1",
        "TELECLAUDE_TURN_END_TO_PANE": "1",
        "TELECLAUDE_DB": str(tmp_path / "over-there.db"),
        "TMUX": "/nowhere/tmux-0/default,1,0",
        "TMUX_PANE": "%1",
        "PATH": str(tmp_path),
    }
    argv = [sys.executable, "-m", "teleclaude", "hook", "stop", "--agent", "claude"]
    payload = json.dumps({"hook_event_name": "Stop", "session_id": "s1", "transcript_path": "/t.jsonl"})
    done = subprocess.run(
        argv, input=payload, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_the_stop_hook_reads_the_projects_own_command_sign(cli_env, repo):
    """A project whose gemini commands are typed `!name args`: the AfterAgent prompt that is just that line
    means gemini did not know the command, so the session errs rather than ending a turn."""
    settings = repo / "teleclaude.toml"
    settings.write_text('[runtime.agents.gemini]\ncommand_sign = "!"\n')
    trust_store.record(settings, settings.read_bytes(), cli_env)  # what is typed into an agent needs trust
    now = datetime.now(UTC)
    store = SessionStore(cli_env["TELECLAUDE_DB"])
    session = Session(
        id="w9",
        agent="gemini",
        command="next-build",
        args="feat",
        project=str(repo),
        subfolder=None,
        state=SessionState.RUNNING,
        created_at=now,
        updated_at=now,
        delivered_at=now,
    )
    store.add(session)
    env = {**cli_env, "TELECLAUDE_SESSION_ID": "w9"}
    argv = [sys.executable, "-m", "teleclaude", "hook", "stop", "--agent", "gemini"]
    payload = json.dumps({"hook_event_name": "AfterAgent", "cwd": str(repo), "prompt": "!next-build feat"})
    done = subprocess.run(argv, input=payload, env=env, cwd=repo, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    worker = store.get("w9")
    assert worker is not None and worker.state is SessionState.ERRORED, done.stderr
