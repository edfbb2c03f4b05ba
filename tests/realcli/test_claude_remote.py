"""The real Claude Code as a worker on another computer: the loopback sshd of tests/loopback_sshd.py,
whose sessions get a HOME of their own, set up there as a user would (claude's login, `teleclaude install`,
`teleclaude init` in the clone). The worker's environment comes from `[runtime.agents.claude] env` here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from teleclaude.demo.agent_homes import claude_environment, prepare_claude_login
from teleclaude.demo.model_server import Text, edit_and_commit
from teleclaude.demo.scenario import commit_all
from teleclaude.demo.workers import git
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import SessionState, Started
from teleclaude.setup.install import Scope, install
from teleclaude.setup.scaffold import init

from ..loopback_sshd import NAME, toml
from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)
from .conftest import give_env, pinned
from .watching import turn_ended


def test_a_real_claude_over_ssh_commits_and_its_stop_hook_ends_the_turn(
    agent_clis, model_server, project, sshd, tmp_path, tmux_socket, isolated_environment, monkeypatch
):
    remote = tmp_path / "remote" / "project"
    path = os.pathsep.join([str(agent_clis["claude"]), str(Path(sys.executable).parent), "/usr/bin:/bin"])
    settings = toml(tmux_socket, sshd, remote, path).replace("idle_threshold = 0.4", "idle_threshold = 600")
    settings = settings.replace("startup_timeout = 15", "startup_timeout = 120")  # no idle rule: hooks only
    assert "idle_threshold = 600" in settings and "startup_timeout = 120" in settings
    (project / "teleclaude.toml").write_text(settings)
    commit_all(project, "Claude works on the ssh computer")
    env = claude_environment(model_server.url) | {"CLAUDE_CODE_MAX_RETRIES": "0"}
    give_env(project, "claude", env)  # what the worker gets over there: ssh passes on none of ours
    subprocess.run(["git", "clone", "-q", str(project), str(remote)], check=True)
    for key, value in (("user.name", "remote worker"), ("user.email", "remote@teleclaude.invalid")):
        subprocess.run(["git", "config", key, value], cwd=remote, check=True)
    monkeypatch.setenv("HOME", str(sshd.home))  # over there, as its user: login, install, init
    prepare_claude_login(sshd.home, pinned()["claude"][1])
    assert not hasattr(install(["claude"], Scope.USER), "code")
    assert not hasattr(init(remote), "code")
    monkeypatch.setenv("HOME", str(isolated_environment))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no claude on this machine: the worker runs over there
    for key in env:
        monkeypatch.delenv(key, raising=False)

    model_server.add(
        edit_and_commit("greeting.txt", "hello from over there", "Build greeting over ssh"), Text("Done.")
    )
    runtime = open_runtime(project)
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch), action
    started = runtime.run_agent_command(
        NAME, action.command, action.slug, action.project, "claude", "med", action.subfolder
    )
    assert isinstance(started, Started), started.message
    session = started.session
    assert [event.detail for event in turn_ended(runtime, session.id)] == ["stop hook"]
    assert runtime.store.get(session.id).state is SessionState.TURN_ENDED
    assert "Build greeting over ssh" in git(remote / action.subfolder, "log", "--format=%s", "-1")  # there
    tree = project / action.subfolder
    assert "Build greeting over ssh" in git(tree, "log", "--format=%s", "-1")  # brought back here
    assert git(tree, "log", "--format=%an", "-1").strip() == "remote worker"
    assert (tree / "greeting.txt").read_text() == "hello from over there\n"
    assert runtime.tmux.views()[session.pane_id].turn_end == ""  # the hook's mark was taken away
    assert not sshd.db.exists()  # nothing recorded in a database over there
    assert runtime.end_session(session.id).session.state.is_final
