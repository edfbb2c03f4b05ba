"""The real opencode (1.18.33), started by teleclaude's runtime, against the scripted Chat Completions API:
what only opencode does (its project-scope files). What every CLI does is test_contract.py."""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

from teleclaude.demo.agent_homes import opencode_choices, plugin_dependency_stub
from teleclaude.demo.model_server import Text, shell
from teleclaude.demo.scenario import commit_all
from teleclaude.demo.workers import git
from teleclaude.errors import Error
from teleclaude.runtime.core.sessions import EventKind
from teleclaude.setup.install import Scope, install

from .conftest import start
from .watching import events_until

BUILDER = "You are the **builder** for the work item `greeting`"


def test_project_scope_alone_gives_opencode_its_commands_mcp_server_and_plugin(
    opencode_runtime, project, model_server, monkeypatch
):
    """`teleclaude install --opencode --scope project` (the user-scope install undone): opencode reads the
    commands from .opencode/commands, the MCP server from .opencode/opencode.json and the plugin from
    .opencode/plugins, which runs `teleclaude` by name. The checkout stays clean: what opencode adds there at
    start (its plugins' packages, its schema's address in opencode.json) was ignored or written up front."""
    opencode_choices(Path.home()).unlink()  # its own defaults (animations on): every other test has them off
    undone = install(["opencode"], Scope.USER, uninstall=True)
    assert not hasattr(undone, "code"), undone
    folder = Path.home() / ".config" / "opencode"
    assert not (folder / "plugins" / "teleclaude.js").exists() and not (folder / "commands").exists()
    report = install(["opencode"], Scope.PROJECT, cwd=project)
    assert not hasattr(report, "code"), report
    # what opencode's first start in the project would add (its plugin types, from npm): kept out of the
    # project by the .gitignore install wrote there
    plugin_dependency_stub(project / ".opencode")
    commit_all(project, "teleclaude for opencode, project scope")
    committed = git(project, "ls-files", ".opencode").split()
    assert ".opencode/.gitignore" in committed and ".opencode/package-lock.json" not in committed
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    model_server.add(shell("git status --short", "Look at the worktree"), Text("DONE: next-build greeting"))
    started = start(opencode_runtime, project, "opencode")
    events = events_until(opencode_runtime, started.session.id, EventKind.TURN_ENDED)
    assert [(e.kind, e.detail) for e in events] == [(EventKind.TURN_ENDED, "stop hook")]
    (line,) = opencode_runtime.recent_tools(opencode_runtime.list_sessions())[started.session.id]
    assert line.startswith("bash: git status --short ("), line
    turn = model_server.turns()[0]
    assert "You are the **builder** for the work item `greeting`" in turn.text()
    assert "teleclaude_teleclaude__next_work" in turn.tools()
    assert git(project, "status", "--porcelain", "--untracked-files=all") == "", git(project, "diff")


def test_its_role_command_is_taken_as_its_command_with_both_cores_busy(
    opencode_runtime, project, model_server, busy_cores
):
    """On a loaded machine opencode took `/next-build greeting` as a message to the model now and then
    (still loading its commands long after its prompt showed): the launcher types the line only once opencode
    lists the command, and interrupts and types again a line sent as typed. Three workers started one after
    another: no plain-text line ever reaches the model, each model's conversation begins with the command
    expanded, and each turn ends by the plugin's stop."""
    model_server.then = lambda body: Text("DONE: next-build greeting - nothing to build")
    for _ in range(3):
        earlier = [id(request) for request in model_server.requests]
        started = start(opencode_runtime, project, "opencode")
        turn = model_server.wait_for(
            partial(lambda seen, r: r.turn and id(r) not in seen and BUILDER in r.text(), earlier),
            timeout=180,
        )
        assert "/next-build greeting" not in turn.last_user_text()
        events = events_until(opencode_runtime, started.session.id, EventKind.TURN_ENDED)
        assert (EventKind.TURN_ENDED, "stop hook") in [(e.kind, e.detail) for e in events]
        ended = opencode_runtime.end_session(started.session.id)
        assert not isinstance(ended, Error), ended
    plain = [
        r for r in model_server.requests if r.turn and r.last_user_text().strip() == "/next-build greeting"
    ]
    assert not plain, "opencode was sent its command as plain text"
