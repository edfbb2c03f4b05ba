"""A real agent CLI as a worker on another computer: the loopback sshd of tests/loopback_sshd.py, whose
sessions get a HOME of their own, set up there as a user would (the CLI's login, `teleclaude install`,
`teleclaude init` in the clone). The worker's environment comes from `[runtime.agents.NAME] env` here: ssh
passes on none of this machine's. Test modules import this helper, never each other."""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

import pytest

from teleclaude.agents import PROFILES
from teleclaude.agents.profile import Capability
from teleclaude.demo.agent_homes import prepare_claude_login, prepare_home
from teleclaude.demo.model_server import ModelServer, Text, edit_and_commit
from teleclaude.demo.scenario import commit_all
from teleclaude.demo.workers import git
from teleclaude.errors import Error
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.api import Runtime, open_runtime
from teleclaude.runtime.core.sessions import Ended, SessionState, Started, StartRequest
from teleclaude.setup.install import Scope, install
from teleclaude.setup.scaffold import init

from ..loopback_sshd import NAME, Loopback, clone, toml
from .conftest import give_env, version_of
from .watching import turn_ended

# what each CLI's workers get besides its login's environment: no retries (a failure shows at once)
EXTRA_ENV = {"claude": {"CLAUDE_CODE_MAX_RETRIES": "0"}}


@pytest.fixture
def remote_clone(
    agent_clis, model_server, project, sshd, tmux_socket, tmp_path, isolated_environment, monkeypatch
):
    """`remote_clone(agent)`: `set_up_remote` for this test's project, sshd and model server."""
    return partial(
        set_up_remote,
        agent_clis=agent_clis,
        model_server=model_server,
        project=project,
        sshd=sshd,
        tmux_socket=tmux_socket,
        tmp_path=tmp_path,
        here=isolated_environment,
        monkeypatch=monkeypatch,
    )


def set_up_remote(
    agent: str,
    agent_clis: dict[str, Path],
    model_server: ModelServer,
    project: Path,
    sshd: Loopback,
    tmux_socket: str,
    tmp_path: Path,
    here: Path,
    monkeypatch,
) -> Path:
    """The project names the loopback computer (idle rule off: turns end by the CLI's hook only), its clone
    over there is set up for `agent` as its user would, and this machine has no `agent` on PATH (HOME back
    to `here`). Returns the clone."""
    remote = tmp_path / "remote" / "project"
    path = os.pathsep.join([str(agent_clis[agent]), str(Path(sys.executable).parent), "/usr/bin:/bin"])
    settings = toml(tmux_socket, sshd, remote, path).replace("idle_threshold = 0.4", "idle_threshold = 600")
    settings = settings.replace("startup_timeout = 15", "startup_timeout = 120")  # no idle rule: hooks only
    assert "idle_threshold = 600" in settings and "startup_timeout = 120" in settings
    (project / "teleclaude.toml").write_text(settings)
    commit_all(project, f"{agent} works on the ssh computer")
    monkeypatch.setenv("HOME", str(sshd.home))  # over there, as its user: login, install, init
    env = prepare_home(agent, sshd.home, model_server.url) | EXTRA_ENV.get(agent, {})
    if agent == "claude":
        prepare_claude_login(sshd.home, version_of(agent_clis["claude"]))  # its release notes seen too
    give_env(project, agent, env)  # what the worker gets over there: ssh passes on none of ours
    clone(project, remote)
    report = install([agent], Scope.USER)
    assert not hasattr(report, "code"), report
    assert not hasattr(init(remote), "code")
    monkeypatch.setenv("HOME", str(here))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no agent CLI on this machine: the worker runs over there
    for key in env:
        monkeypatch.delenv(key, raising=False)
    return remote


def start_build(runtime: Runtime, project: Path, agent: str) -> tuple[Dispatch, Started]:
    """The planner's next step (the build of `greeting`) started on the loopback computer."""
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch), action
    started = runtime.run_agent_command(
        StartRequest(NAME, action.command, action.slug, action.project, agent, "med", action.subfolder)
    )
    assert not isinstance(started, Error), started.message
    assert isinstance(started, Started), started
    return action, started


def build_over_ssh(
    agent: str, model_server: ModelServer, project: Path, remote: Path, sshd: Loopback
) -> None:
    """A build step over there: the CLI edits and commits through its shell tool, its own hook ends the turn
    through the pane's mark, and the commit comes back to this machine's trees/<slug>."""
    message = f"Build greeting over ssh with {agent}"
    model_server.add(edit_and_commit("greeting.txt", "hello from over there", message), Text("Done."))
    runtime = open_runtime(project)
    action, started = start_build(runtime, project, agent)
    assert action.subfolder is not None  # a build runs in the item's worktree
    session = started.session
    assert [event.detail for event in turn_ended(runtime, session.id)] == ["stop hook"]
    stored = runtime.store.get(session.id)
    assert stored is not None and stored.state is SessionState.TURN_ENDED
    assert message in git(remote / action.subfolder, "log", "--format=%s", "-1")  # there
    tree = project / action.subfolder
    assert message in git(tree, "log", "--format=%s", "-1")  # brought back here
    assert git(tree, "log", "--format=%an", "-1").strip() == "remote worker"
    assert (tree / "greeting.txt").read_text() == "hello from over there\n"
    assert runtime.tmux.views()[session.pane_id].turn_end == ""  # the hook's mark was taken away
    assert not sshd.db.exists()  # nothing recorded in a database over there
    if Capability.TOKENS not in PROFILES[agent].lacks:  # what it used came here through its pane
        readings = runtime.store.spend_readings([session.id])
        assert readings and readings[-1][2].known and readings[-1][2].input, readings
        assert runtime.tmux.views()[session.pane_id].spend == ""
    ended = runtime.end_session(session.id)
    assert isinstance(ended, Ended) and ended.session.state.is_final
