"""The real Claude Code, started by teleclaude's runtime, against the scripted Anthropic server."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from teleclaude.demo.model_server import Text, Tool, edit_and_commit, mcp, shell
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started
from teleclaude.setup.install import Scope


def start(runtime, project, command: str = "next-build", args: str = "greeting") -> Started:
    started = runtime.run_agent_command("local", command, args, str(project), "claude", "med")
    assert isinstance(started, Started), started
    return started


def events_until(runtime, session_id: str, kind: EventKind, seconds: float = 60.0) -> list:
    """Every event of the session up to the first of `kind` (waiting on the runtime, not sleeping)."""
    seen = []
    for _ in range(int(seconds // 10) or 1):
        waited = runtime.wait_for_sessions([session_id], timeout=10)
        seen += waited.events
        if any(event.kind is kind for event in seen):
            return seen
    session = runtime.store.get(session_id)
    saw = [(e.kind.value, e.detail) for e in seen]
    pytest.fail(f"no {kind.value} event; saw {saw}; the screen:\n{screen(runtime, session)}")


def tool_result(turn) -> str:
    """The text of the last tool_result block claude sent in `turn` (an Anthropic request)."""
    blocks = [
        block
        for message in turn.body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    content = blocks[-1]["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def screen(runtime, session) -> str:
    return "\n".join(runtime.tmux.screen(session.pane_id, runtime.tmux.views()[session.pane_id]))


def test_claude_starts_unattended_and_its_command_reaches_the_model_expanded(runtime, project, model_server):
    started = start(runtime, project)
    assert started.session.state is SessionState.RUNNING
    turn = model_server.wait_for(lambda r: r.turn, timeout=30)
    sent = turn.last_user_text()
    assert "You are the **builder** for the work item `greeting`" in sent
    assert "$ARGUMENTS" not in sent
    assert turn.headers["x-api-key"].startswith("sk-ant-")
    offered = [tool["name"] for tool in turn.body["tools"]]
    assert "Bash" in offered
    assert "WaitForMcpServers" in offered  # MCP servers connect in the background; their tools come later


def test_the_stop_hook_reports_the_turn_end(runtime, project, model_server):
    model_server.add(Text("DONE: next-build greeting - nothing to build"))
    started = start(runtime, project)
    events = events_until(runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert "DONE: next-build greeting" in screen(runtime, started.session)


def test_a_shell_tool_call_edits_a_file_and_commits(runtime, project, model_server):
    model_server.add(
        edit_and_commit("src/greeting.py", 'print("hello")', "Build greeting"),
        Text("DONE: next-build greeting - 1 task built"),
    )
    started = start(runtime, project)
    events_until(runtime, started.session.id, EventKind.TURN_ENDED)
    log = subprocess.run(["git", "log", "--oneline", "-1"], cwd=project, capture_output=True, text=True)
    assert "Build greeting" in log.stdout
    assert (project / "src" / "greeting.py").read_text() == 'print("hello")\n'
    result = model_server.turns()[1].body["messages"][-1]["content"]
    assert any(block.get("type") == "tool_result" for block in result)


def test_the_tool_hook_shows_the_workers_last_tool_uses(runtime, project, model_server):
    model_server.add(
        shell("git status --short", "Look at the worktree"),
        edit_and_commit("src/greeting.py", 'print("hello")', "Build greeting"),
        Text("DONE: next-build greeting - 1 task built"),
    )
    started = start(runtime, project)
    events_until(runtime, started.session.id, EventKind.TURN_ENDED)
    listing = runtime.list_sessions()
    lines = runtime.recent_tools(listing)[started.session.id]
    assert len(lines) == 2 and lines[0].startswith("Bash: git status --short ("), lines
    assert lines[1].startswith('Bash: mkdir -p "$(dirname src/greeting.py)" && printf'), lines  # cut short
    assert all(re.search(r" \(\d+[smh] ago\)$", line) for line in lines), lines
    shown = subprocess.run(
        [sys.executable, "-m", "teleclaude", "sessions", "list", "--cwd", str(project)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "    Bash: git status --short (" in shown.stdout, shown.stdout


def test_a_claude_orchestrator_runs_next_work_and_gets_a_tool_call(runtime, project, model_server):
    model_server.add(
        Tool("WaitForMcpServers", {}),  # MCP servers connect in the background: the model waits for them
        mcp("teleclaude", "teleclaude__next_work"),
        Text("DONE"),
    )
    started = start(runtime, project, "next-work", "")
    events_until(runtime, started.session.id, EventKind.TURN_ENDED)
    turns = model_server.turns()
    assert [t.answer for t in turns][:3] == [
        "tool WaitForMcpServers",
        "tool mcp__teleclaude__teleclaude__next_work",
        "text",
    ]
    called, answered = turns[1:3]
    assert "mcp__teleclaude__teleclaude__next_work" in [tool["name"] for tool in called.body["tools"]]
    result = tool_result(answered)
    assert result.startswith("TOOL_CALL:"), result
    assert 'command="next-build"' in result and 'args="greeting"' in result, result


# --- set up by `teleclaude install` / `init` only --------------------------------------------------------


def test_a_worker_in_a_worktree_starts_unattended_under_the_roots_trust(runtime, project, model_server):
    worktree = ["git", "worktree", "add", "-q", "-b", "greeting", "trees/greeting"]
    subprocess.run(worktree, cwd=project, check=True)
    model_server.add(Text("DONE: next-build greeting - nothing to build"))
    started = runtime.run_agent_command(
        "local", "next-build", "greeting", str(project), "claude", "med", "trees/greeting"
    )
    assert isinstance(started, Started), started
    events = events_until(runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert str(project / "trees" / "greeting") in model_server.turns()[0].text()  # claude worked there


def test_project_scope_names_no_path_of_this_machine_and_claude_connects(
    claude_cli, project, model_server, set_up
):
    set_up(project, Scope.PROJECT)
    written = [project / ".mcp.json", project / ".claude" / "settings.json"]
    for path in written:
        text = path.read_text()
        for machine_path in ("/usr/", "/tmp/", "/root/", "/home/", str(Path(sys.executable).parent)):
            assert machine_path not in text, f"{path} names {machine_path}"
    listed = subprocess.run(
        [str(claude_cli), "mcp", "list"], cwd=project, capture_output=True, text=True, timeout=60
    )
    (line,) = [row for row in listed.stdout.splitlines() if row.startswith("teleclaude: teleclaude mcp")]
    assert line.endswith("Connected"), listed.stdout + listed.stderr  # by name, approved
    runtime = open_runtime(project)
    model_server.add(Tool("WaitForMcpServers", {}), mcp("teleclaude", "teleclaude__next_work"), Text("DONE"))
    started = start(runtime, project, "next-work", "")
    events = events_until(runtime, started.session.id, EventKind.TURN_ENDED)
    assert (EventKind.TURN_ENDED, "stop hook") in [(e.kind, e.detail) for e in events]  # the hook by name
    assert tool_result(model_server.turns()[2]).startswith("TOOL_CALL:")
