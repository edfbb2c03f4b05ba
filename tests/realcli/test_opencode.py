"""The real opencode (1.18.33), started by teleclaude's runtime, against the scripted Chat Completions API."""

from __future__ import annotations

import os
import re
import sys
from datetime import timedelta
from pathlib import Path

from teleclaude.demo.agent_homes import plugin_dependency_stub
from teleclaude.demo.model_server import Fail, Text, shell
from teleclaude.demo.scenario import commit_all
from teleclaude.planner.api import next_work
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started, StartRequest
from teleclaude.setup.install import Scope, install

from .test_codex import build_row_first
from .watching import events_until, screen, sessions_list, with_profile


def start(runtime, project, command: str = "next-build", args: str = "greeting", mode: str = "med"):
    started = runtime.run_agent_command(StartRequest("local", command, args, str(project), "opencode", mode))
    assert isinstance(started, Started), getattr(started, "message", started)
    return started


def test_opencode_starts_unattended_and_its_command_reaches_the_model_expanded(
    opencode_runtime, project, model_server
):
    """No dialog to answer; `/next-build greeting` is expanded by opencode from the installed command file
    (`$ARGUMENTS` substituted), and the turn ends by the plugin's `session.idle` (the idle rule is 300 s)."""
    model_server.add(Text("DONE: next-build greeting - nothing to build"))
    started = start(opencode_runtime, project)
    assert started.session.state is SessionState.RUNNING
    turn = model_server.wait_for(lambda r: r.turn, timeout=90)
    sent = turn.text()
    assert "You are the **builder** for the work item `greeting`" in sent  # expanded, arguments in place
    assert "$ARGUMENTS" not in sent
    assert "bash" in turn.tools() and "teleclaude_teleclaude__next_work" in turn.tools()
    events = events_until(opencode_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    assert "DONE: next-build greeting" in screen(opencode_runtime, started.session)


def test_an_opencode_limit_makes_it_unavailable_and_the_next_step_falls_back(
    opencode_runtime, project, model_server
):
    """opencode retries a 429 five times (honouring Retry-After), then gives up: its plugin sees the
    `session.error` (statusCode 429) and runs `teleclaude hook stop-failure` with `rate_limit`: that alone
    (no screen pattern) is the signal."""
    with_profile(opencode_runtime, "opencode", limit_patterns=())
    build_row_first(project, "opencode", "gemini")
    first = next_work(cwd=project)
    assert isinstance(first, Dispatch) and first.agent == "opencode"
    model_server.add(Fail("rate_limit", repeat=10, retry_after=1))
    started = start(opencode_runtime, project)
    events = events_until(opencode_runtime, started.session.id, EventKind.RATE_LIMITED, seconds=120)
    assert events[-1].detail.startswith("rate_limited"), events[-1].detail
    assert len([r for r in model_server.turns() if r.answer.startswith("fail")]) == 6  # 1 + its 5 retries
    until = opencode_runtime.context.availability.unavailable(opencode_runtime.clock())["opencode"].until
    # the wait its error names ("Please try again in 20s."), from when it gave up
    assert started.session.created_at < until < started.session.created_at + timedelta(minutes=10)
    fallback = next_work(cwd=project)
    assert isinstance(fallback, Dispatch) and fallback.agent == "gemini", fallback


def test_opencodes_plugin_shows_the_workers_last_tool_uses(opencode_runtime, project, model_server):
    """`tool.execute.before` runs `teleclaude hook tool-use`: its bash tool's command is the row."""
    model_server.add(shell("git status --short", "Look at the worktree"), Text("DONE: next-build greeting"))
    started = start(opencode_runtime, project)
    events = events_until(opencode_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    lines = opencode_runtime.recent_tools(opencode_runtime.list_sessions())[started.session.id]
    assert len(lines) == 1 and re.fullmatch(r"bash: git status --short \(\d+[smh] ago\)", lines[0]), lines
    listed = sessions_list(project)
    assert "    bash: git status --short (" in listed, listed


def test_project_scope_alone_gives_opencode_its_commands_mcp_server_and_plugin(
    opencode_runtime, project, model_server, monkeypatch
):
    """`teleclaude install --opencode --scope project` (the user-scope install undone): opencode reads the
    commands from .opencode/commands, the MCP server from .opencode/opencode.json and the plugin from
    .opencode/plugins, which runs `teleclaude` by name."""
    undone = install(["opencode"], Scope.USER, uninstall=True)
    assert not hasattr(undone, "code"), undone
    folder = Path.home() / ".config" / "opencode"
    assert not (folder / "plugins" / "teleclaude.js").exists() and not (folder / "commands").exists()
    report = install(["opencode"], Scope.PROJECT, cwd=project)
    assert not hasattr(report, "code"), report
    # what the user's first start of opencode in the project would add (its plugin types, from npm)
    plugin_dependency_stub(project / ".opencode")
    (project / ".opencode" / ".gitignore").write_text("node_modules\npackage.json\npackage-lock.json\n")
    commit_all(project, "teleclaude for opencode, project scope")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    model_server.add(shell("git status --short", "Look at the worktree"), Text("DONE: next-build greeting"))
    started = start(opencode_runtime, project)
    events = events_until(opencode_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    (line,) = opencode_runtime.recent_tools(opencode_runtime.list_sessions())[started.session.id]
    assert line.startswith("bash: git status --short ("), line
    turn = model_server.turns()[0]
    assert "You are the **builder** for the work item `greeting`" in turn.text()
    assert "teleclaude_teleclaude__next_work" in turn.tools()
