"""A worker on another computer in bubblewrap there (runtime/remote_box.py), through the real `sshd` of
tests/loopback_sshd.py: the stand-in's hostile builder (`FAKE_AGENT_HOSTILE`, as in
tests/hostile/test_sandbox.py) reaches nothing outside its worktree there, its hooks' marks still end its
turns (through the relay onto its pane), and the item is delivered; a computer where bubblewrap does not work
refuses under "bwrap" and warns under "auto"."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from teleclaude.adapters import remote_sandbox, sandbox, ssh
from teleclaude.adapters.tmux import Tmux
from teleclaude.demo import stand_in
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime import orchestrator
from teleclaude.runtime.api import open_runtime
from teleclaude.runtime.core.sessions import EventKind, Started, StartRequest
from teleclaude.runtime.orchestrator import Outcome

from ..attacks import assert_every_attack_refused, report_from_channel
from ..loopback_sshd import NAME, clone, computer, settle_settings, toml
from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)

pytestmark = pytest.mark.skipif(
    not sandbox.probe(os.environ).usable, reason="bubblewrap does not work here (apt-get install bubblewrap)"
)


def user_config(home: Path, text: str) -> None:
    config = home / ".config" / "teleclaude" / "teleclaude.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def there(project, sshd, tmp_path, tmux_socket, fake_agents) -> tuple[Path, Path]:
    """(the remote clone, the remote side's PATH folder): the stand-ins there, one lane of the run there."""
    remote = tmp_path / "remote" / "project"
    remote_bin = stand_in.install(tmp_path / "remote" / "bin", python=sys.executable)
    text = toml(tmux_socket, sshd, remote, remote_bin).replace(
        f"[computers.{NAME}]", f"[computers.{NAME}]\nlanes = 1"
    )
    settle_settings(project, text, "A remote computer with one lane")
    clone(project, remote)
    return remote, remote_bin


def agents_env(project: Path, **env: str) -> None:
    """Every agent's stand-in with `env` (over there too), its turns ended only by its stop hook."""
    settings = project / "teleclaude.toml"
    text = settings.read_text().replace("idle_threshold = 0.4", "idle_threshold = 600")
    table = ", ".join(f"{key} = {json.dumps(value)}" for key, value in env.items())
    for agent in ("claude", "gemini", "codex"):
        text += f"\n[runtime.agents.{agent}]\nenv = {{ {table} }}\n"
    settle_settings(project, text, "The stand-ins' modes; no idle rule")


@pytest.fixture
def bystander():
    """A process that stands for `teleclaude run` (the worker is told its pid)."""
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def test_a_hostile_builder_on_another_computer_reaches_nothing_outside_its_worktree_there(
    project, there, sshd, tmux_socket, bystander, isolated_environment, tmp_path
):
    remote, _ = there
    user_config(isolated_environment, '[runtime]\nsandbox = "auto"\n')
    (sshd.home / ".ssh").mkdir(mode=0o700)
    (sshd.home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    bare = tmp_path / "stolen.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    (remote / "trees" / "sibling").mkdir(parents=True)
    box = ssh.RemoteTmux(computer(sshd, str(remote), tmp_path), tmux_socket)
    victim = box.cmd("new-session", "-d", "-s", "victim", "-P", "-F", "#{pane_id}", "cat")[-1]
    socket = sshd.tmux_dir / f"tmux-{os.getuid()}" / tmux_socket
    agents_env(
        project,
        FAKE_AGENT="work,hook",
        FAKE_AGENT_HOSTILE="greeting",
        FAKE_AGENT_HOSTILE_PID=str(bystander.pid),
        FAKE_AGENT_HOSTILE_REMOTE=str(bare),
        FAKE_AGENT_HOSTILE_TMUX=f"{socket} =victim:",
    )
    # main there one commit on: the item branch's parent (what the worker tries to move main to) is not it
    git(remote, "commit", "-q", "--allow-empty", "-m", "Only over there")
    remote_main = git(remote, "rev-parse", "main").strip()

    lines: list[str] = []
    report = orchestrator.run(
        project, None, False, 60, open_runtime(project), lines.append, lambda p: None
    )  # the roadmap: its items' lane on the ssh computer

    assert report.outcome is Outcome.COMPLETE, report.text + "\n" + "\n".join(lines)
    sessions = open_runtime(project).store.sessions()
    assert ("next-build", NAME) in {(s.command, s.computer) for s in sessions}  # the attack ran over there
    # nothing outside its worktree changed over there
    assert_every_attack_refused(project, sshd.home, remote, bare, bystander, box, victim)
    assert git(remote, "rev-parse", "main").strip() == remote_main


@pytest.fixture
def broken_bwrap_there(there) -> None:
    """A bwrap first on the remote side's PATH that cannot make a namespace (a kernel without user
    namespaces there); this machine's works."""
    fake = there[1] / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)


def build_request(project: Path) -> StartRequest:
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action
    return StartRequest(
        NAME, action.command, action.slug, action.project, action.agent, "med", action.subfolder
    )


def test_under_bwrap_a_computer_where_bubblewrap_does_not_work_refuses_the_worker_naming_it(
    project, there, broken_bwrap_there, isolated_environment, sshd, tmux_socket, tmp_path
):
    user_config(isolated_environment, '[runtime]\nsandbox = "bwrap"\n')
    runtime = open_runtime(project)
    started = runtime.run_agent_command(build_request(project))
    assert isinstance(started, Error) and started.code is ErrorCode.SANDBOX_UNAVAILABLE, started
    assert (
        NAME in started.message.splitlines()[0]
        and "No permissions to create new namespace" in started.message
    )
    box = ssh.RemoteTmux(computer(sshd, str(there[0]), tmp_path), tmux_socket)
    assert not [name for name in box.session_names() if name.startswith("tc-")]  # nothing started there


def test_under_auto_a_computer_where_bubblewrap_does_not_work_is_a_warning_naming_it(
    project, there, broken_bwrap_there, isolated_environment, caplog
):
    user_config(isolated_environment, '[runtime]\nsandbox = "auto"\n')
    runtime = open_runtime(project)
    with caplog.at_level(logging.WARNING, logger="teleclaude.runtime"):
        started = runtime.run_agent_command(build_request(project))
    assert isinstance(started, Started), started
    warned = [r.getMessage() for r in caplog.records if "not sandboxed" in r.getMessage()]
    assert len(warned) == 1 and NAME in warned[0], warned
    runtime.end_session(started.session.id)


def test_the_folder_teleclaudes_package_is_in_is_shown_to_a_worker_there(sshd, tmp_path):
    """An editable install keeps the package in its checkout, outside its venv (a fresh clone in /tmp, whose
    /tmp a sandbox replaces): the probe asks the interpreter of `teleclaude` there where it imports it."""
    import teleclaude

    found = remote_sandbox.probe(computer(sshd, str(tmp_path), tmp_path / "bin"), (), 60)
    package = Path(teleclaude.__file__).resolve().parents[1]
    assert any(package == Path(folder) or package.is_relative_to(folder) for folder in found.host.installs)


def test_a_fifo_where_a_clis_program_should_be_there_is_not_read_and_shows_nothing(sshd, tmp_path):
    """The probe there looks at a CLI's first line for the interpreter to show its workers, as
    sandbox_reach does here: a FIFO named as the CLI (`agents` may name a path) is never opened, so the
    probe neither waits on it until its timeout nor takes what it holds for a first line. A writer holds
    this one open and has written a line naming a venv's Python, so a reader would not wait."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    program = tmp_path / "cli" / "claude"
    program.parent.mkdir()
    os.mkfifo(program, 0o755)
    line = f"#!{venv}/bin/python\n".encode()
    writer = os.open(program, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(writer, line)
        box = replace(computer(sshd, str(tmp_path), tmp_path / "bin"), agents={"claude": str(program)})
        found = remote_sandbox.probe(box, (), 60)
        assert str(venv) not in found.host.installs, found.host.installs
        assert os.read(writer, 4096) == line  # still in the pipe: nobody read it
    finally:
        os.close(writer)


def test_the_relay_moves_only_its_marks_onto_the_pane_follows_no_link_and_removes_the_channel(
    tmux_socket, tmp_path
):
    """What a sandboxed worker's hooks may leave in its channel there, moved by `RELAY` (run here: it is the
    same shell script wherever it runs)."""
    secret = tmp_path / "id_ed25519"
    secret.write_text("PRIVATE KEY\n")
    channel, gate = tmp_path / "channels" / "1a2b3c4d", tmp_path / "gate"
    worker = (  # what a worker could leave: a mark, a file named as an option it may not set, a link to a
        # secret, a poke; then, at the gate, a last mark without one, and its exit
        'cd "$1"; printf "sealed 1" > teleclaude_usage; printf on > remain-on-exit; '
        f'ln -s {secret} teleclaude_turn_end; printf "\\n" > wake; '
        f'while [ ! -e {gate} ]; do sleep 0.05; done; printf "sealed 2" > teleclaude_spend'
    )
    tmux = Tmux(tmux_socket)
    argv = remote_sandbox.relayed(str(channel), ["sh", "-c", worker, "worker", str(channel)])
    pane = tmux.cmd("new-session", "-d", "-s", "relay", "-P", "-F", "#{pane_id}", *argv)[-1]
    tmux.cmd("set-option", "-w", "-t", pane, "remain-on-exit", "on")  # it waits at the gate meanwhile

    def options() -> str:
        return "\n".join(tmux.cmd("show-options", "-p", "-t", pane))

    deadline = time.monotonic() + 60
    while "@teleclaude_usage" not in options():
        assert time.monotonic() < deadline, "the relay moved no mark"
        time.sleep(0.05)
    gate.touch()
    while tmux.cmd("display-message", "-p", "-t", pane, "#{pane_dead}") != ["1"]:
        assert time.monotonic() < deadline, "the worker never ended"
        time.sleep(0.05)
    moved = options()
    assert "sealed 1" in moved and "sealed 2" in moved  # the last one moved as the worker ended
    assert "PRIVATE KEY" not in moved and "@teleclaude_turn_end" not in moved  # the link was not followed
    assert "remain-on-exit" not in moved  # only its marks' options
    assert not channel.exists()


def test_a_sandboxed_remote_workers_report_status_says_it_does_not_reach_teleclaude(tmp_path):
    """Its channel is over there (a relay's, with its `wake` pipe): a report left in it would reach no one."""
    channel = tmp_path / "channels" / "mine"
    channel.mkdir(parents=True)
    os.mkfifo(channel / remote_sandbox.WAKE)
    done = report_from_channel(channel, "mine", "half done")
    assert done.returncode == 1 and done.stdout.startswith("ERROR: INVALID_ARGUMENT"), done.stdout
    assert sandbox.take_report(channel) is None


def test_a_remote_worker_whose_python_is_reached_through_links_into_hidden_folders_runs_in_its_sandbox(
    project, sshd, tmux_socket, fake_agents, isolated_environment, tmp_path
):
    """The stand-ins there run on a venv reached through a link in the sandbox's own /tmp to one in the
    HOME there (both hidden in its sandbox), to this venv, whose Python links on (pyenv's, under the user's
    home); no teleclaude on the computer's PATH (as bench/bench_fleet.py's): the probe follows the shims'
    first line and every link on the way, hop by hop, and the worker's turn ends through its hooks."""
    user_config(isolated_environment, '[runtime]\nsandbox = "bwrap"\n')
    venvs = sshd.home / "venvs"
    venvs.mkdir()
    (venvs / "current").symlink_to(Path(sys.prefix))
    linked = tmp_path / "remote" / "venv"
    linked.parent.mkdir(parents=True)
    linked.symlink_to(venvs / "current")
    remote = tmp_path / "remote" / "project"
    remote_bin = stand_in.install(tmp_path / "remote" / "bin", python=str(linked / "bin" / "python"))
    text = toml(tmux_socket, sshd, remote, remote_bin).replace(f":{Path(sys.executable).parent}:", ":")
    settle_settings(project, text.replace(f"[computers.{NAME}]", f"[computers.{NAME}]\nlanes = 1"), "Remote")
    clone(project, remote)
    agents_env(project, FAKE_AGENT="work,hook")
    runtime = open_runtime(project)

    started = runtime.run_agent_command(build_request(project))

    assert isinstance(started, Started), started
    seen: list = []
    deadline = time.monotonic() + 120
    while not any(event.kind is EventKind.TURN_ENDED for event in seen):
        assert time.monotonic() < deadline, f"no turn end; saw {[event.kind.value for event in seen]}"
        waited = runtime.wait_for_sessions([started.session.id], timeout=10)
        assert not isinstance(waited, Error), waited
        seen += waited.events
    runtime.end_session(started.session.id)
