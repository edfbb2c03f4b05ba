"""Workers on another computer, through a real `sshd` on 127.0.0.1 (Debian's openssh-server).

The test starts its own sshd on a free port with a throwaway host key and user key, and a second "remote"
folder holding a clone of the project, with the stand-in CLI on that side's PATH. sshd gives its sessions a
tmux directory of their own (`SetEnv TMUX_TMPDIR=…`), so the remote tmux server is not this machine's.
They get a HOME of their own too (`SetEnv HOME=…`): the login is this machine's user, whose HOME stays as is.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from teleclaude.adapters import ssh
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.config.profiles import Computer
from teleclaude.demo import stand_in as fake_agent
from teleclaude.demo.scenario import commit_all
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime import orchestrator, remote
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started
from teleclaude.runtime.orchestrator import Outcome

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
NAME = "loopback-ssh"


@dataclass(frozen=True)
class Loopback:
    port: int
    user_key: Path
    known_hosts: Path
    tmux_dir: Path  # the "remote" tmux servers' folder
    db: Path  # the "remote" teleclaude database: nothing of this machine's sessions may land there
    home: Path  # the "remote" HOME (the login is this machine's user's: its own HOME is not touched)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


@pytest.fixture
def sshd(tmp_path) -> Loopback:
    if not os.access(SSHD, os.X_OK) or not shutil.which("ssh"):
        pytest.skip("sshd or ssh is not installed (.ci/run installs openssh-server and openssh-client)")
    keys = tmp_path / "ssh"
    keys.mkdir()
    _keygen(keys / "host_key")
    _keygen(keys / "user_key")
    (keys / "authorized_keys").write_text((keys / "user_key.pub").read_text())
    tmux_dir = tmp_path / "remote-tmux"
    tmux_dir.mkdir()
    home = tmp_path / "remote-home"
    home.mkdir()
    port = _free_port()
    (keys / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host_key'}\nPidFile {keys / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {keys / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
        "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"PermitRootLogin prohibit-password\n"
        f"SetEnv TMUX_TMPDIR={tmux_dir} TELECLAUDE_DB={tmp_path / 'remote-teleclaude.db'} HOME={home}\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    server = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(keys / "sshd_config")], stderr=subprocess.PIPE, text=True
    )
    assert server.stderr is not None
    for line in server.stderr:  # the event: sshd says it listens (or why it cannot)
        if "Server listening on 127.0.0.1" in line:
            break
    else:
        server.wait()
        pytest.skip(f"sshd could not be started (exit status {server.returncode})")
    drain = threading.Thread(target=server.stderr.read, daemon=True)  # sshd -e logs here: never let it block
    drain.start()
    host_key = (keys / "host_key.pub").read_text().split()
    (keys / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    loopback = Loopback(
        port, keys / "user_key", keys / "known_hosts", tmux_dir, tmp_path / "remote-teleclaude.db", home
    )
    yield loopback
    ssh.close(computer(loopback, "/unused", tmp_path))
    for server_socket in tmux_dir.glob("tmux-*/*"):  # the remote tmux servers, with what they ran
        subprocess.run(["tmux", "-S", str(server_socket), "kill-server"], capture_output=True, check=False)
    server.send_signal(signal.SIGTERM)
    server.wait()
    drain.join(timeout=10)
    server.stderr.close()


def computer(loopback: Loopback, project: str, bin_dir: Path) -> Computer:
    return Computer(
        name=NAME,
        host="127.0.0.1",
        project=project,
        agents={"claude": "claude", "gemini": "gemini", "codex": "codex"},
        user=getpass.getuser(),
        port=loopback.port,
        identity_file=str(loopback.user_key),
        path=f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        ssh_options=(f"UserKnownHostsFile={loopback.known_hosts}", "StrictHostKeyChecking=yes"),
    )


def test_arguments_reach_the_remote_tmux_exactly_as_given(sshd, tmp_path, tmux_socket):
    assert ssh.run(
        computer(sshd, "/unused", tmp_path), ["sh", "-c", 'echo "$HOME"'], 30
    ).stdout.strip() == str(sshd.home)  # the remote side's own HOME
    remote = ssh.RemoteTmux(computer(sshd, "/unused", tmp_path), tmux_socket)
    remote.cmd("new-session", "-d", "-s", "probe", "sh", "-c", "sleep 60")
    for hostile in ("$(touch /tmp/pwned)", "a b;c 'd' \"e\" `f` \\g", "-t", "#{pane_id}##", "*", "~"):
        remote.cmd("set-buffer", "-b", "probe", "--", hostile)
        assert remote.cmd("show-buffer", "-b", "probe") == [hostile]
    assert not Path("/tmp/pwned").exists()


def toml(socket_name: str, loopback: Loopback, remote: Path, bin_dir: Path | str) -> str:
    return f"""[runtime]
socket = "{socket_name}"
idle_threshold = 0.4
poll_interval = 0.05
startup_timeout = 15
settle = 0.1

[computers.{NAME}]
host = "127.0.0.1"
user = "{getpass.getuser()}"
port = {loopback.port}
identity_file = "{loopback.user_key}"
project = "{remote}"
path = "{bin_dir}:/usr/local/bin:/usr/bin:/bin"
agents = {{ claude = "claude", gemini = "gemini", codex = "codex" }}
ssh_options = ["UserKnownHostsFile={loopback.known_hosts}", "StrictHostKeyChecking=yes"]
"""


@pytest.fixture
def remote_project(project, sshd, tmp_path, tmux_socket):
    """The main checkout names the loopback computer; the remote folder holds a clone and the stand-ins."""
    remote = tmp_path / "remote" / "project"
    remote_bin = fake_agent.install(tmp_path / "remote" / "bin", python=sys.executable)
    (project / "teleclaude.toml").write_text(toml(tmux_socket, sshd, remote, remote_bin))
    commit_all(project, "A remote computer")
    subprocess.run(["git", "clone", "-q", str(project), str(remote)], check=True)
    for key, value in (("user.name", "remote worker"), ("user.email", "remote@teleclaude.invalid")):
        subprocess.run(["git", "config", key, value], cwd=remote, check=True)
    return remote


def git(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def test_a_worker_on_another_computer_completes_a_step_through_sshd(
    project, remote_project, watch, monkeypatch
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no stand-in on this machine: the worker runs over there
    runtime = open_runtime(project)
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action
    started = runtime.run_agent_command(
        NAME,
        action.command,
        action.slug,
        action.project,
        action.agent,
        action.thinking_mode,
        action.subfolder,
    )
    assert isinstance(started, Started), started.message
    session = started.session
    assert (session.computer, session.pane_id.split(":")[0]) == (NAME, NAME)
    watch(runtime, session.id).until(EventKind.TURN_ENDED)
    assert runtime.store.get(session.id).state is SessionState.TURN_ENDED
    remote_tree = remote_project / action.subfolder
    assert "Build greeting" in git(remote_tree, "log", "--oneline", "-1")  # the work was done over there
    tree = project / action.subfolder
    assert "Build greeting" in git(tree, "log", "--oneline", "-1")  # and its commit arrived here
    assert git(tree, "status", "--porcelain") == ""
    assert app.next_work(cwd=project).step is Step.REVIEW  # the planner moves on from the main checkout
    output = runtime.get_session_output(session.id)
    assert not isinstance(output, Error) and any("next-build" in row for row in output.chunk.rows)
    assert runtime.end_session(session.id).session.state.is_final
    assert f"tc-{session.id}" not in runtime.tmux.on(NAME).session_names()  # ended over there too


def test_an_unknown_computer_and_a_step_outside_an_item_worktree_are_refused(project, remote_project):
    runtime = open_runtime(project)
    answer = runtime.run_agent_command("elsewhere", "emit", "1", str(project), "claude", "med")
    assert isinstance(answer, Error) and answer.code is ErrorCode.UNKNOWN_COMPUTER
    answer = runtime.run_agent_command(NAME, "emit", "1", str(project), "claude", "med")
    assert isinstance(answer, Error) and answer.code is ErrorCode.INVALID_SUBFOLDER
    bare = replace(runtime.config.remotes[NAME], agents={"codex": "codex"})
    runtime.context.config = replace(runtime.config, remotes={NAME: bare})
    answer = runtime.run_agent_command(NAME, "emit", "1", str(project), "claude", "med", "trees/x")
    assert isinstance(answer, Error)


def test_the_remote_stop_hook_ends_the_turn_through_the_pane_not_the_idle_rule(
    project, remote_project, watch, monkeypatch
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    settings = project / "teleclaude.toml"
    text = settings.read_text().replace("idle_threshold = 0.4", "idle_threshold = 600")  # never idle here
    # the stand-in runs `teleclaude hook stop` over there after its step, as Claude Code runs its Stop hook
    settings.write_text(text + '\n[runtime.agents.gemini]\nenv = { FAKE_AGENT = "work,hook" }\n')
    commit_all(project, "Workers with a stop hook, and no idle rule")
    runtime = open_runtime(project)
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch) and action.agent == "gemini", action
    started = runtime.run_agent_command(
        NAME, action.command, action.slug, action.project, action.agent, "med", action.subfolder
    )
    assert isinstance(started, Started), started.message
    session = started.session
    watch(runtime, session.id).until(EventKind.TURN_ENDED, seconds=60)  # the idle rule would take 600 s
    assert runtime.store.get(session.id).state is SessionState.TURN_ENDED
    assert "Build greeting" in git(project / action.subfolder, "log", "--oneline", "-1")  # brought back
    assert runtime.tmux.views()[session.pane_id].turn_end == ""  # the hook's mark was taken away
    assert app.next_work(cwd=project).step is Step.REVIEW
    assert runtime.end_session(session.id).session.state.is_final


def test_a_parallel_run_puts_a_lane_on_the_ssh_computer_and_delivers_its_item(
    project, remote_project, fake_agents
):
    settings = project / "teleclaude.toml"
    settings.write_text(
        settings.read_text().replace("[computers.loopback-ssh]", f"[computers.{NAME}]\nlanes = 1")
    )
    commit_all(project, "One lane of the run on the ssh computer")
    lines: list[str] = []
    report = orchestrator.run(
        project, None, False, 60, open_runtime(project), lines.append, lambda p: None, parallel=2
    )
    assert report.outcome is Outcome.COMPLETE, report.text + "\n" + "\n".join(lines)
    assert sorted(re.sub(r"^\d{3}-", "", p.name) for p in (project / "done").iterdir()) == [
        "farewell",
        "greeting",
        "shouting",
    ]
    sessions = SessionStore().sessions()
    remote_steps = {(s.command, s.slug) for s in sessions if s.computer == NAME}
    assert ("next-build", "greeting") in remote_steps  # the first item's lane went to the ssh computer
    assert all(s.command != "next-finalize" for s in sessions if s.computer == NAME)  # merged here
    local_builds = [s.slug for s in sessions if s.computer == "local" and s.command == "next-build"]
    assert local_builds  # the other lane worked on this machine meanwhile
    authors = git(project, "log", "--format=%an", "main").splitlines()
    assert "remote worker" in authors  # commits made over there reached main through the item branch
    # delivered: no worktree, branch or staging ref of the items over there, no tracking ref here
    assert not (remote_project / "trees" / "greeting").exists()
    assert git(remote_project, "worktree", "list", "--porcelain").count("worktree ") == 1
    refs = git(remote_project, "for-each-ref", "--format=%(refname)", "refs/heads/", "refs/teleclaude/")
    assert refs == "refs/heads/main\n"
    assert git(project, "for-each-ref", "--format=%(refname)", "refs/teleclaude/") == ""
    assert any("removed trees/greeting and its branch on loopback-ssh" in line for line in lines)


def test_a_limit_the_remote_stop_failure_hook_reports_reaches_this_machine(
    project, remote_project, sshd, watch, monkeypatch
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    settings = project / "teleclaude.toml"
    text = settings.read_text().replace("idle_threshold = 0.4", "idle_threshold = 600")  # never idle here
    # the stand-in runs `teleclaude hook stop-failure` over there, as Claude Code runs its StopFailure hook
    settings.write_text(text + '\n[runtime.agents.claude]\nenv = { FAKE_AGENT = "failure" }\n')
    commit_all(project, "Claude over there meets a session limit")
    runtime = open_runtime(project)
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action
    started = runtime.run_agent_command(
        NAME, action.command, action.slug, action.project, "claude", "med", action.subfolder
    )
    assert isinstance(started, Started), started.message
    session = started.session
    watch(runtime, session.id).until(EventKind.RATE_LIMITED, seconds=60)
    limited = runtime.store.get(session.id)
    assert limited.state is SessionState.RATE_LIMITED
    assert "StopFailure hook: rate_limit" in limited.last_error
    unavailable = runtime.context.availability.unavailable(datetime.now(UTC))
    assert "claude" in unavailable  # on this machine: the planner gives the next step to another agent
    assert unavailable["claude"].until.astimezone(UTC).strftime("%H:%M") == "15:48"  # the hook's own reset
    assert runtime.tmux.views()[session.pane_id].stop_failure == ""  # the mark was taken away
    assert not sshd.db.exists()  # nothing was written into the database over there
    assert runtime.end_session(session.id).session.state.is_final


def test_a_remote_branch_with_work_that_never_came_back_is_not_cleaned_up(project, remote_project, sshd):
    box = open_runtime(project).config.remotes[NAME]
    git(remote_project, "worktree", "add", "-q", "-b", "greeting", "trees/greeting")
    (remote_project / "trees" / "greeting" / "only-there.txt").write_text("not brought back\n")
    git(remote_project / "trees" / "greeting", "add", "-A")
    git(remote_project / "trees" / "greeting", "commit", "-q", "-m", "Work only over there")
    with pytest.raises(remote.TravelError, match="not on main here"):
        remote.clean_up(box, project, "greeting", timeout=30)
    assert (remote_project / "trees" / "greeting" / "only-there.txt").is_file()
    assert git(remote_project, "branch", "--list", "greeting").strip()
    git(remote_project / "trees" / "greeting", "reset", "-q", "--hard", "main")  # nothing of its own now
    remote.clean_up(box, project, "greeting", timeout=30)
    assert not (remote_project / "trees" / "greeting").exists()
    assert git(remote_project, "branch", "--list", "greeting") == ""
