"""Workers on another computer, through the real `sshd` of tests/loopback_sshd.py: a second "remote" folder
holds a clone of the project, with the stand-in CLI on that side's PATH.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from teleclaude.adapters import fs, procs, sandbox, ssh
from teleclaude.adapters import git as gitx
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.adapters.tmux import Tmux
from teleclaude.agents import NAMES
from teleclaude.config.spend import SpendConfig
from teleclaude.demo import stand_in as fake_agent
from teleclaude.demo.workers import PLAN
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.runtime import orchestrator, remote, spend
from teleclaude.runtime.api import Runtime, open_runtime
from teleclaude.runtime.core import given_up as given_up_rules
from teleclaude.runtime.core.given_up import is_given_up, kept_ref
from teleclaude.runtime.core.marks import MOVED_CHANNEL, exit_channel
from teleclaude.runtime.core.sessions import (
    Activity,
    Ended,
    EventKind,
    Session,
    SessionState,
    Started,
    StartRequest,
)
from teleclaude.runtime.orchestrator import Outcome
from teleclaude.runtime.run_report import RunReport

from ..loopback_sshd import MAX_SESSIONS, NAME, clone, computer, settle_settings, toml
from ..loopback_sshd import sshd as sshd  # noqa: F401 (the fixture)
from ..scripted import approve
from ..servers import free_port
from .conftest import assert_gone


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


def test_a_computers_panes_are_listed_look_after_look_through_one_ssh_client(
    sshd, tmp_path, tmux_socket, monkeypatch
):
    started = _count_ssh_clients(tmp_path, monkeypatch)
    remote = ssh.RemoteTmux(computer(sshd, "/unused", tmp_path), tmux_socket)
    try:
        remote.cmd("new-session", "-d", "-s", "probe", "sh", "-c", "sleep 60")
        first = remote.views()
        assert len(first) == 1
        before = started()
        for _ in range(5):
            assert remote.views().keys() == first.keys()
        assert started() == before  # no ssh client started a look
        remote.cmd("kill-server")
        assert remote.views() == {}  # no server there, as a single `list-panes` says
    finally:
        remote.stop_listing()


def test_the_panes_a_wake_up_reads_are_captured_in_one_ssh_client_whatever_they_show(
    sshd, tmp_path, tmux_socket, monkeypatch
):
    started = _count_ssh_clients(tmp_path, monkeypatch)
    remote = ssh.RemoteTmux(computer(sshd, "/unused", tmp_path), tmux_socket)
    # what a pane can show: lines that read like tmux's own headers, blank rows, history that scrolled
    shows = ["printf '%s\\n' '3 24' '0 24' '' '%1' x", "seq 1 60", "printf 'a\\n\\n\\nb'"]
    panes = [
        remote.cmd(
            "new-session",
            "-d",
            "-s",
            f"p{n}",
            "-x",
            "80",
            "-y",
            "24",
            "-P",
            "-F",
            "#{pane_id}",
            "sh",
            "-c",
            f"{show}; sleep 60",
        )[0]
        for n, show in enumerate(shows)
    ]
    deadline = time.monotonic() + 30
    while not all(remote.capture(p, 0, 0)[0] for p in panes) and time.monotonic() < deadline:
        time.sleep(0.05)
    views = remote.views()
    asked = [(p, -views[p].history_size, views[p].height - 1, views[p].history_size) for p in panes]
    alone = {a: remote.capture(*a) for a in asked}
    before = started()
    with remote.captured_ahead(asked):
        together = {a: remote.capture(*a) for a in asked}
    assert started() == before + 1  # one ssh client for the three
    assert together == alone
    assert any("3 24" in rows for rows in together.values()) and len(together[asked[1]]) > 24
    with remote.captured_ahead([*asked, ("%999", 0, 1, 0)]):  # a pane gone: each captured on its own
        assert remote.capture(*asked[0]) == alone[asked[0]]
    assert started() == before + 3


def test_a_computers_panes_are_glanced_at_through_one_ssh_client_whatever_they_show(
    sshd, tmp_path, tmux_socket, monkeypatch
):
    started = _count_ssh_clients(tmp_path, monkeypatch)
    remote = ssh.RemoteTmux(computer(sshd, "/unused", tmp_path), tmux_socket)
    try:
        pane = remote.cmd("new-session", "-d", "-s", "probe", "-P", "-F", "#{pane_id}", "cat")[0]
        remote.glance(pane)  # its glancer started
        glancer = remote._glancer  # noqa: SLF001 (what a process there could read off its command line)
        assert glancer is not None
        token = glancer.token
        remote.send_text(pane, f"{token} 0")  # the pane shows the glancer's own end of an answer
        remote.send_key(pane, "Enter")
        deadline = time.monotonic() + 30
        while sum(f"{token} 0" in row for row in remote.glance(pane)[1]) < 2:  # typed, and cat's echo
            assert time.monotonic() < deadline, "the pane never showed what was typed"
            time.sleep(0.05)
        before = started()
        for _ in range(5):
            view, rows = remote.glance(pane)
        assert started() == before  # no ssh client started a glance
        assert (view, rows) == Tmux.glance(remote, pane)  # as an ssh client of its own sees it
        assert remote.glance("%999") == (None, [])  # a pane gone: its own ssh client says so
        assert remote.glance(pane) == (view, rows)
        assert started() == before + 2  # (the ssh client above, and the gone pane's)
    finally:
        remote.stop_listing()


def _count_ssh_clients(tmp_path: Path, monkeypatch) -> Callable[[], int]:
    """`ssh` on PATH counts its starts, then runs the real one; how many so far."""
    folder, log = tmp_path / "counting", tmp_path / "ssh-starts"
    folder.mkdir()
    real = shutil.which("ssh")
    assert real
    wrapper = folder / "ssh"
    wrapper.write_text(f'#!/bin/sh\necho >> {shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return lambda: len(log.read_text().splitlines()) if log.exists() else 0


# a worker's hook over there: its turn's end marked on its pane, then it waits at a gate and exits
MARK_THEN_GATE = (
    "import os, sys, time\n"
    "from teleclaude.adapters.tmux import TURN_END_OPTION, mark_own_pane\n"
    "assert mark_own_pane('sealed end', TURN_END_OPTION, sys.argv[1])\n"
    "while not os.path.exists(sys.argv[2]):\n"
    "    time.sleep(0.05)\n"
)


def test_a_computers_workers_wake_one_ssh_client_and_what_it_runs_there_ends_with_it(
    sshd, tmp_path, tmux_socket
):
    remote = ssh.RemoteTmux(computer(sshd, "/unused", tmp_path), tmux_socket)
    gate = tmp_path / "gate"
    try:
        waker = remote.wake_fd()  # before any tmux server there: it waits for one
        assert waker is not None
        argv = [sys.executable, "-c", MARK_THEN_GATE, exit_channel("w1"), str(gate)]
        started = remote.start("w1", str(tmp_path), argv, {}, exit_channel("w1"), 2000, (80, 24))
        assert select.select([waker], [], [], 60)[0], "the turn's end marked over there woke no one"
        remote.rung()
        assert remote.views()[started.pane_id].turn_end == "sealed end"
        assert remote.wake_fd() == waker  # the same client, woken again
        gate.touch()  # the worker exits: its pane's wrapper signals too
        assert select.select([waker], [], [], 60)[0], "the worker's exit woke no one"
        remote.rung()
        assert remote.views()[started.pane_id].dead
        assert remote.wake_fd() == waker
    finally:
        remote.stop_waking()
    deadline = time.monotonic() + 30
    while _waiting_there(tmux_socket):  # its shell and `tmux wait-for` there end with its ssh
        assert time.monotonic() < deadline, "the waker's processes outlived it over there"
        time.sleep(0.1)


def _waiting_there(socket: str) -> list[int]:
    """The processes (sshd's loopback "remote" ones are this machine's) waiting on the socket's
    MOVED_CHANNEL."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            argv = procs.cmdline(int(entry.name))
            if "wait-for" in argv and MOVED_CHANNEL in argv and socket in argv:
                found.append(int(entry.name))
    return found


def test_a_computer_gets_a_second_connection_when_its_long_lived_clients_fill_the_first(sshd, tmp_path):
    """sshd lets one connection carry `MaxSessions` channels: more long-lived ones than that (with the two
    left to short commands) go through a second connection, none refused; it is kept while the computer's
    workers may need it again (no handshake a burst), and once their lanes are over (`release`, as a run's
    looks do for a computer with no live worker) it is closed, the first kept for what follows."""
    box = replace(computer(sshd, "/unused", tmp_path), max_sessions=MAX_SESSIONS)
    held: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(MAX_SESSIONS):
            client = ssh.connections(box).long(
                lambda number: subprocess.Popen(
                    ssh.ssh_argv(box, ["sh", "-c", "echo; cat"], number),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
            )
            held.append(client)
            assert client.stdout is not None and client.stdout.readline() == b"\n"  # it got its channel
        assert ssh.run(box, ["true"], 30).returncode == 0  # a short command still finds room
        assert ssh.connections(box).count() == 2
        assert [_master_answers(box, number) for number in (0, 1)] == [True, True]
        for client in held:
            client.kill()
            client.communicate()  # reaped, its pipes closed
        assert ssh.run(box, ["true"], 30).returncode == 0
        assert [_master_answers(box, number) for number in (0, 1)] == [True, True]  # kept for the next burst
        ssh.connections(box).release()
        assert ssh.connections(box).count() == 1
        assert [_master_answers(box, number) for number in (0, 1)] == [True, False]
    finally:
        for client in held:
            client.kill()
            client.communicate()
        ssh.close(box)
    log = "".join(sshd.server.log)
    assert log.count("Accepted publickey") == 2 and "no more sessions" not in log


def _master_answers(box, number: int) -> bool:
    """Whether the control master of the computer's connection `number` is there (`ssh -O check`)."""
    port = ["-p", str(box.port)] if box.port else []
    argv = [*ssh.ssh_options(box, connection=number), *port, "-O", "check", "--", box.host]
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30).returncode == 0


def test_a_remote_panes_output_arrives_as_events_through_ssh_and_its_client_ends_there_too(
    sshd, tmp_path, tmux_socket
):
    remote = ssh.RemoteTmux(computer(sshd, "/unused", tmp_path), tmux_socket)
    pane = remote.cmd("new-session", "-d", "-s", "probe", "-P", "-F", "#{pane_id}", "cat")[0]
    planted = tmp_path / "planted"
    remote.follow()
    try:
        remote.watch("probe", pane)
        deadline = time.monotonic() + 30
        while (mark := remote.output_mark(pane)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark is not None, "the control client never attached over ssh"
        remote.send_text(pane, f"$(touch {planted}) %exit")
        remote.send_key(pane, "Enter")
        assert remote.await_output(pane, mark, timeout=30)
        assert remote.output_mark(pane) not in (None, mark)
        assert not planted.exists()
        assert remote.cmd("list-clients", "-F", "#{client_control_mode}") == ["1"]
    finally:
        local = [c.process.pid for c in remote._events._clients.values()] if remote._events else []  # noqa: SLF001
        remote.unfollow()
    assert_gone(local)
    deadline = time.monotonic() + 10
    while remote.cmd("list-clients") and time.monotonic() < deadline:  # its tmux -C there ends with ssh
        time.sleep(0.1)
    assert remote.cmd("list-clients") == []


@pytest.fixture
def remote_project(project, sshd, tmp_path, tmux_socket):
    """The main checkout names the loopback computer; the remote folder holds a clone and the stand-ins."""
    remote = tmp_path / "remote" / "project"
    remote_bin = fake_agent.install(tmp_path / "remote" / "bin", python=sys.executable)
    settle_settings(project, toml(tmux_socket, sshd, remote, remote_bin), "A remote computer")
    clone(project, remote)
    return remote


def git(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def ended(runtime: Runtime, session_id: str) -> Session:
    """The session `end_session` ended; the test fails on an error."""
    answer = runtime.end_session(session_id)
    assert isinstance(answer, Ended), answer
    return answer.session


def assert_cleaned_up(project: Path, remote_project: Path) -> None:
    """The delivered item left nothing over there (worktree, branch, staging ref) nor a tracking ref here."""
    assert not (remote_project / "trees" / "greeting").exists()
    assert git(remote_project, "worktree", "list", "--porcelain").count("worktree ") == 1
    refs = git(remote_project, "for-each-ref", "--format=%(refname)", "refs/heads/", "refs/teleclaude/")
    assert refs == "refs/heads/main\n"
    assert git(project, "for-each-ref", "--format=%(refname)", "refs/teleclaude/") == ""


def test_a_worker_on_another_computer_completes_a_step_through_sshd(
    project, remote_project, watch, monkeypatch
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no stand-in on this machine: the worker runs over there
    runtime = open_runtime(project)
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action
    started = runtime.start(action, computer=NAME)
    assert isinstance(started, Started), started.message
    session = started.session
    assert (session.computer, session.pane_id.split(":")[0]) == (NAME, NAME)
    watch(runtime, session.id).until(EventKind.TURN_ENDED)
    stored = runtime.store.get(session.id)
    assert stored is not None and stored.state is SessionState.TURN_ENDED
    remote_tree = remote_project / action.subfolder
    assert "Build greeting" in git(remote_tree, "log", "--oneline", "-1")  # the work was done over there
    tree = project / action.subfolder
    assert "Build greeting" in git(tree, "log", "--oneline", "-1")  # and its commit arrived here
    assert git(tree, "status", "--porcelain") == ""
    following = app.next_work(cwd=project)  # the planner moves on from the main checkout
    assert isinstance(following, Dispatch) and following.step is Step.REVIEW
    output = runtime.get_session_output(session.id)
    assert not isinstance(output, Error) and any("next-build" in row for row in output.chunk.rows)
    assert ended(runtime, session.id).state.is_final
    assert f"tc-{session.id}" not in runtime.tmux.on(NAME).session_names()  # ended over there too


def test_an_unknown_computer_a_step_outside_an_item_worktree_and_an_agent_not_there_are_refused(
    project, remote_project
):
    runtime = open_runtime(project)
    answer = runtime.run_agent_command(StartRequest("elsewhere", "emit", "1", str(project), "claude", "med"))
    assert isinstance(answer, Error) and answer.code is ErrorCode.UNKNOWN_COMPUTER
    answer = runtime.run_agent_command(StartRequest(NAME, "emit", "1", str(project), "claude", "med"))
    assert isinstance(answer, Error) and answer.code is ErrorCode.INVALID_SUBFOLDER
    bare = replace(runtime.config.remotes[NAME], agents={"codex": "codex"})
    runtime.context.config = replace(runtime.config, remotes={NAME: bare})
    (project / "trees" / "x").mkdir(parents=True)  # a worktree folder, so the agent is what is refused
    answer = runtime.run_agent_command(
        StartRequest(NAME, "emit", "1", str(project), "claude", "med", "trees/x")
    )
    assert isinstance(answer, Error) and answer.code is ErrorCode.AGENT_NOT_INSTALLED, answer


def hooks_only(project: Path, agent: str, stand_in_mode: str, **env: str) -> None:
    """No idle rule (a turn end must come from a hook); `agent`'s stand-in in `stand_in_mode`, with `env`."""
    settings = project / "teleclaude.toml"
    text = settings.read_text().replace("idle_threshold = 0.4", "idle_threshold = 600")
    assert "idle_threshold = 600" in text  # else the idle rule, not a hook, would end the turns
    table = ", ".join(
        f"{key} = {json.dumps(value)}" for key, value in {"FAKE_AGENT": stand_in_mode, **env}.items()
    )
    settle_settings(
        project,
        text + f"\n[runtime.agents.{agent}]\nenv = {{ {table} }}\n",
        f"{agent}: {stand_in_mode} over there, and no idle rule",
    )


def test_the_remote_stop_hook_ends_the_turn_through_the_pane_not_the_idle_rule(
    project, remote_project, watch, monkeypatch
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    # the stand-in runs `teleclaude hook stop` over there after its step, as Claude Code runs its Stop hook
    hooks_only(project, "gemini", "work,hook")
    runtime, action, session = build_started_there(project)
    assert action.agent == "gemini", action
    events = watch(runtime, session.id).until(EventKind.TURN_ENDED, seconds=60)  # idle would take 600 s
    assert [e.detail for e in events if e.kind is EventKind.TURN_ENDED] == ["stop hook"]
    stored = runtime.store.get(session.id)
    assert stored is not None and stored.state is SessionState.TURN_ENDED
    assert "Build greeting" in git(project / action.subfolder, "log", "--oneline", "-1")  # brought back
    assert runtime.tmux.views()[session.pane_id].turn_end == ""  # the hook's mark was taken away
    following = app.next_work(cwd=project)
    assert isinstance(following, Dispatch) and following.step is Step.REVIEW
    assert ended(runtime, session.id).state.is_final


def test_a_parallel_run_puts_a_lane_on_the_ssh_computer_and_delivers_its_item(
    project, remote_project, fake_agents
):
    text = (
        (project / "teleclaude.toml")
        .read_text()
        .replace(f"[computers.{NAME}]", f"[computers.{NAME}]\nlanes = 1")
    )
    settle_settings(project, text, "One lane of the run on the ssh computer")
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
    assert_cleaned_up(project, remote_project)


def test_a_limit_the_remote_stop_failure_hook_reports_reaches_this_machine(
    project, remote_project, sshd, watch, monkeypatch
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    # the stand-in runs `teleclaude hook stop-failure` over there, as Claude Code runs its StopFailure hook
    hooks_only(project, "claude", "failure")
    runtime, _, session = build_started_there(project, "claude")
    watch(runtime, session.id).until(EventKind.RATE_LIMITED, seconds=60)
    limited = runtime.store.get(session.id)
    assert limited is not None and limited.state is SessionState.RATE_LIMITED
    assert "StopFailure hook: rate_limit" in limited.last_error
    unavailable = runtime.context.availability.unavailable(datetime.now(UTC))
    assert "claude" in unavailable  # on this machine: the planner gives the next step to another agent
    assert (
        unavailable["claude"].until.astimezone(UTC).strftime("%H:%M") == "15:49"
    )  # the end of the minute the hook printed (15:48)
    assert runtime.tmux.views()[session.pane_id].stop_failure == ""  # the mark was taken away
    assert not sshd.db.exists()  # nothing was written into the database over there
    assert ended(runtime, session.id).state.is_final


def test_the_usage_a_remote_worker_reports_reaches_this_machine_through_its_pane(
    project, remote_project, sshd, watch, monkeypatch, tmp_path
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    # the stand-in runs `teleclaude hook statusline` over there after its step, as Claude Code runs its
    # status line, then its Stop hook
    window = {"FAKE_AGENT_WINDOW_CLAUDE": "40:600", "FAKE_AGENT_WINDOW_FILE": str(tmp_path / "window.json")}
    hooks_only(project, "claude", "work,hook,usage", **window)
    runtime, _, session = build_started_there(project, "claude")
    watch(runtime, session.id).until(EventKind.TURN_ENDED, seconds=60)
    (kept,) = runtime.context.availability.usage(datetime.now(UTC))["claude"]  # on this machine
    assert (kept.window, kept.used_percent) == ("5h", 40.0)
    assert runtime.tmux.views()[session.pane_id].usage == ""  # the mark was taken away
    assert not sshd.db.exists()  # nothing was written into the database over there
    assert ended(runtime, session.id).state.is_final


def test_what_a_remote_worker_used_reaches_this_machine_through_its_pane(
    project, remote_project, sshd, watch, monkeypatch
):
    """The stand-in's Stop hook reads its transcript over there (1000 in, 100 out) and marks its pane; the
    observer keeps it here before the turn's end (both marks come in the same look, the spend first)."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    hooks_only(project, "claude", "work,hook,tokens,cost", FAKE_AGENT_COST="0.5")
    runtime, _, session = build_started_there(project, "claude")
    watching = watch(runtime, session.id)
    watching.until(EventKind.TURN_ENDED, seconds=60)
    (reading,) = runtime.store.spend_readings([session.id])
    assert reading[2].total == 1100 and reading[2].model == "stand-in"
    # its status line's cost, marked after its Stop hook: on the reading once a look took it
    deadline = time.monotonic() + 60
    while runtime.store.spend_readings([session.id])[-1][2].cost_usd is None and time.monotonic() < deadline:
        watching.wait(timeout=0.5)  # a look
    stored = runtime.store.get(session.id)
    assert stored is not None
    used = spend.per_session(runtime.store, [stored], SpendConfig())[session.id]
    assert (used.tokens, used.usd, used.estimate) == (1100, 0.5, False)  # reported, not estimated
    view = runtime.tmux.views()[session.pane_id]
    assert (view.spend, view.cost) == ("", "")  # the marks were taken away
    assert not sshd.db.exists()  # nothing was written into the database over there
    assert ended(runtime, session.id).state.is_final


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


def test_the_items_of_several_turns_over_there_come_back_in_one_call_a_diverged_one_left_out(
    project, remote_project
):
    box = open_runtime(project).config.remotes[NAME]
    for slug in ("greeting", "shouting"):
        git(remote_project, "worktree", "add", "-q", "-b", slug, f"trees/{slug}")
        (remote_project / "trees" / slug / f"{slug}.txt").write_text("made over there\n")
        git(remote_project / "trees" / slug, "add", "-A")
        git(remote_project / "trees" / slug, "commit", "-q", "-m", f"Build {slug} over there")
        git(project, "worktree", "add", "-q", "-b", slug, f"trees/{slug}")
    (project / "trees" / "shouting" / "here.txt").write_text("made here meanwhile\n")  # diverged
    git(project / "trees" / "shouting", "add", "-A")
    git(project / "trees" / "shouting", "commit", "-q", "-m", "Work here")
    assert remote.bring_back_all(box, project, ["greeting", "shouting"]) == ["greeting"]
    assert (project / "trees" / "greeting" / "greeting.txt").read_text() == "made over there\n"
    assert not (project / "trees" / "shouting" / "shouting.txt").exists()  # never merged, only ff


def test_a_slow_push_to_the_remote_clone_does_not_hold_the_planner_but_holds_its_step(
    project, remote_project, monkeypatch
):
    """The project lock covers the check and the PENDING row only: the push over ssh runs after it."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    entered, release = remote_project.parent / "push-entered", remote_project.parent / "push-release"
    hook = remote_project / ".git" / "hooks" / "pre-receive"
    hook.write_text(
        f'#!/bin/sh\ncat >/dev/null\ntouch "{entered}"\n'
        f'for _ in $(seq 600); do [ -e "{release}" ] && exit 0; sleep 0.1; done\nexit 1\n'
    )
    hook.chmod(0o755)
    runtime = open_runtime(project)
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action
    request = (NAME, action.command, action.slug, action.project, action.agent, "med", action.subfolder)
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(runtime.run_agent_command, StartRequest(*request))
        while not entered.exists():
            assert not starting.done(), starting.result()
            time.sleep(0.05)
        meanwhile = app.next_work(cwd=project)  # takes the project lock while the push waits
        second = open_runtime(project).run_agent_command(StartRequest(*request))
        release.touch()
        started = starting.result()
    assert isinstance(meanwhile, Dispatch), meanwhile
    assert isinstance(second, Error) and second.code is ErrorCode.ALREADY_RUNNING, second
    assert isinstance(started, Started), started.message
    assert ended(runtime, started.session.id).state.is_final


def built_over_there(project: Path, watch) -> None:
    """greeting's build done by a worker on the ssh computer, as an orchestrator agent starts it over MCP
    (`run_agent_command` with the computer's name); its turn brought back, its session ended."""
    runtime, _, session = build_started_there(project, slug="greeting")
    watch(runtime, session.id).until(EventKind.TURN_ENDED)
    assert ended(runtime, session.id).state.is_final


def build_started_there(
    project: Path, agent: str | None = None, slug: str | None = None
) -> tuple[Runtime, Dispatch, Session]:
    """A build's worker (the next, or `slug`'s) started on the ssh computer, as an orchestrator agent starts
    it over MCP (`run_agent_command` with the computer's name), by the planner's agent or `agent`."""
    runtime = open_runtime(project)
    action = app.next_work(slug, cwd=project)
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action
    request = StartRequest(NAME, action.command, action.slug, action.project, agent or action.agent, "med")
    started = runtime.run_agent_command(replace(request, subfolder=action.subfolder))
    assert isinstance(started, Started), started.message
    return runtime, action, started.session


def test_a_finalize_run_as_the_cli_removes_the_items_worktree_and_branch_from_the_remote_clone(
    project, remote_project, watch, monkeypatch, teleclaude_cli
):
    """No `teleclaude run`: whoever orchestrates, the finalizer's `teleclaude finalize SLUG` cleans up."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    built_over_there(project, watch)
    assert (remote_project / "trees" / "greeting").is_dir()
    approve(project, "greeting")  # its review, here
    finalizing = teleclaude_cli(project, "finalize", "greeting")
    out, err = finalizing.communicate(timeout=120)
    assert finalizing.returncode == 0, out + err
    assert out.startswith("FINALIZED:") and err == "", out + err
    assert (project / "done" / "001-greeting").is_dir()
    assert_cleaned_up(project, remote_project)


@pytest.mark.skipif(not sandbox.probe(os.environ).usable, reason="bubblewrap does not work here")
def test_after_a_sandboxed_finalize_the_run_removes_the_items_worktree_and_branch_from_the_remote_clone(
    project, remote_project, watch, monkeypatch, fake_agents, isolated_environment
):
    """A finalizer in a sandbox reaches neither the ssh computer nor the session store: the run that saw it
    deliver the item cleans up over there, outside the sandbox."""
    with monkeypatch.context() as here:
        here.setenv("PATH", "/usr/bin:/bin")
        built_over_there(project, watch)
    approve(project, "greeting")  # its review, here
    user = isolated_environment / ".config" / "teleclaude" / "teleclaude.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text('[runtime]\nsandbox = "bwrap"\n')  # no worker starts unsandboxed
    lines: list[str] = []
    runtime = open_runtime(project)
    report = orchestrator.run(project, "greeting", False, 60, runtime, lines.append, lambda p: None)
    assert report.outcome is Outcome.COMPLETE, report.text + "\n" + "\n".join(lines)
    finalizers = [s for s in SessionStore().sessions() if s.command == "next-finalize"]
    assert [s.computer for s in finalizers] == ["local"]
    assert (project / "done" / "001-greeting").is_dir()
    assert_cleaned_up(project, remote_project)
    assert any(f"on {NAME}" in line and "removed" in line for line in lines), lines


def test_a_remote_branch_with_work_not_on_main_here_is_left_and_the_finalize_still_succeeds(
    project, remote_project, watch, monkeypatch, teleclaude_cli
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    built_over_there(project, watch)
    tree = remote_project / "trees" / "greeting"
    (tree / "only-there.txt").write_text("never brought back\n")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "Work only over there")
    approve(project, "greeting")  # its review, here
    finalizing = teleclaude_cli(project, "finalize", "greeting")
    out, err = finalizing.communicate(timeout=120)
    assert finalizing.returncode == 0, out + err  # the merge here is done: the finalize succeeded
    assert out.startswith("FINALIZED:")
    assert (project / "done" / "001-greeting").is_dir()
    assert git(project, "branch", "--list", "greeting") == ""
    warning = err.splitlines()
    assert len(warning) == 1 and NAME in warning[0] and "greeting" in warning[0], err
    assert (tree / "only-there.txt").is_file()  # left as it is over there
    assert git(remote_project, "branch", "--list", "greeting").strip()
    git(tree, "reset", "-q", "--hard", "main")  # dealt with over there: nothing of its own now
    again = teleclaude_cli(project, "finalize", "greeting")  # the item is delivered: only the clean-up
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0 and out.startswith("FINALIZED:") and err == "", out + err
    assert not tree.exists()
    assert git(remote_project, "branch", "--list", "greeting") == ""


def test_the_remote_clean_up_runs_after_the_finalize_released_the_project_lock(
    project, remote_project, watch, monkeypatch, teleclaude_cli
):
    """The clean-up over ssh may be slow: the planner does not wait for it."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    built_over_there(project, watch)
    approve(project, "greeting")  # its review, here
    entered, release = remote_project.parent / "clean-up-entered", remote_project.parent / "clean-up-release"
    hook = remote_project / ".git" / "hooks" / "reference-transaction"  # runs as the branch there is deleted
    hook.write_text(
        f'#!/bin/sh\ncat >/dev/null\ntouch "{entered}"\n'
        f'for _ in $(seq 600); do [ -e "{release}" ] && exit 0; sleep 0.1; done\nexit 1\n'
    )
    hook.chmod(0o755)
    finalizing = teleclaude_cli(project, "finalize", "greeting")
    while not entered.exists():
        assert finalizing.poll() is None, finalizing.communicate()
        time.sleep(0.05)
    with fs.project_lock(gitx.find_repo(project).common_dir, timeout=30):  # LockTimeout if still held
        pass
    meanwhile = app.next_work(cwd=project)
    release.touch()
    out, err = finalizing.communicate(timeout=120)
    assert finalizing.returncode == 0 and out.startswith("FINALIZED:"), out + err
    assert not isinstance(meanwhile, Error), meanwhile
    assert not (remote_project / "trees" / "greeting").exists()


def test_a_computer_that_cannot_be_reached_leaves_its_clone_as_it_is_and_the_finalize_succeeds(
    project, remote_project, sshd, watch, monkeypatch, teleclaude_cli
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    built_over_there(project, watch)
    approve(project, "greeting")  # its review, here
    closed = free_port()  # nothing listens there: the computer is gone
    text = (project / "teleclaude.toml").read_text().replace(f"port = {sshd.port}\n", f"port = {closed}\n")
    assert f"port = {closed}\n" in text
    settle_settings(project, text, "The ssh computer moved away")
    finalizing = teleclaude_cli(project, "finalize", "greeting")
    out, err = finalizing.communicate(timeout=120)
    assert finalizing.returncode == 0 and out.startswith("FINALIZED:"), out + err
    assert (project / "done" / "001-greeting").is_dir()
    warning = err.splitlines()
    assert len(warning) == 1 and NAME in warning[0] and "greeting" in warning[0], err
    assert (remote_project / "trees" / "greeting").is_dir()


def gated_items(project: Path, slugs: list[str], gate: list[Path], lanes: int) -> None:
    """`slugs` on the roadmap beside the project's; every agent's steps wait for one of the files `gate`; the
    ssh computer takes `lanes` of the run's lanes."""
    roadmap = project / "todos" / "roadmap.md"
    for slug in slugs:
        roadmap.write_text(roadmap.read_text() + f"- [ ] {slug} — {slug} variants.\n")
        folder = project / "todos" / slug
        folder.mkdir()
        (folder / "requirements.md").write_text(f"# Requirements: {slug}\n\nDeliver {slug}.\n")
        (folder / "implementation-plan.md").write_text(PLAN.format(slug=slug, module=slug.replace("-", "_")))
    text = (
        (project / "teleclaude.toml")
        .read_text()
        .replace(f"[computers.{NAME}]", f"[computers.{NAME}]\nlanes = {lanes}")
    )
    for agent in NAMES:
        text += (
            f'\n[runtime.agents.{agent}]\nenv = {{ FAKE_AGENT_GATE = "{os.pathsep.join(map(str, gate))}" }}\n'
        )
    settle_settings(project, text, f"{len(slugs)} more items; steps wait for a gate")


def running_there(count: int, seconds: float = 120) -> list[Session]:
    """Wait until `count` workers on the ssh computer work (their steps held by the gate)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        there = [
            s for s in SessionStore().sessions() if s.computer == NAME and s.state is SessionState.RUNNING
        ]
        if len(there) >= count:
            return there
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} workers got to work over there")


def delivered(project: Path) -> list[str]:
    return sorted(re.sub(r"^\d{3}-", "", p.name) for p in (project / "done").iterdir())


def steps_twice(sessions: list[Session]) -> list[tuple[str, str]]:
    """Steps typed into more than one worker (a duplicate dispatch). A start whose sandbox was not made
    (`SANDBOX_RACED`: another item's branch removed there as it started) is started again, and only that
    second worker is given the step. A worker given up on a computer that stayed away (its session ended:
    core/given_up.py) is not counted: its step is taken up elsewhere by design."""
    counted = Counter(
        (s.command, s.slug) for s in sessions if s.delivered_at is not None and not is_given_up(s)
    )
    return [step for step, count in counted.items() if count > 1]


def run_in_background(project: Path, parallel: int, lines: list[str]):
    pool = ThreadPoolExecutor(1)
    future = pool.submit(
        orchestrator.run,
        project,
        None,
        False,
        200,
        open_runtime(project),
        lines.append,
        lambda p: None,
        parallel=parallel,
    )
    pool.shutdown(wait=False)
    return future


def ssh_waiting() -> list[str]:
    """The remote commands of this process's ssh clients that wait on a tmux channel over there."""
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:  # the thread ended
            continue
        for child in children:
            argv = procs.cmdline(int(child))[:-1]  # (it ends with a NUL)
            if argv and Path(argv[0]).name == "ssh" and "wait-for" in argv[-1]:
                found.append(argv[-1])
    return found


def test_twelve_lanes_on_one_computer_with_max_sessions_ten_all_start_and_deliver(
    project, remote_project, sshd, fake_agents, tmp_path
):
    slugs = [f"item-{n:02d}" for n in range(10)]
    # where the sandboxed workers here and there see them too (their /tmp is their own)
    gate = [project / ".git" / "gate", remote_project / ".git" / "gate"]
    gated_items(project, slugs, gate, lanes=12)
    lines: list[str] = []
    future = run_in_background(project, 12, lines)
    try:
        # twelve workers there at once, heard through one waiter on that computer (a `tmux wait-for` ssh
        # client each would take more channels than one connection carries)
        assert len(running_there(12)) == 12
        waiting = ssh_waiting()
        assert any(f"wait-for {MOVED_CHANNEL}" in w for w in waiting), waiting
        assert not any(f"wait-for {exit_channel('')}" in w for w in waiting), waiting  # none a worker
    finally:
        for each in gate:
            each.touch()
        report = future.result(timeout=600)
    assert report.outcome is Outcome.COMPLETE, report.text + "\n" + "\n".join(lines)
    assert delivered(project) == sorted([*slugs, "farewell", "greeting", "shouting"])
    sessions = SessionStore().sessions()
    assert steps_twice(sessions) == []
    assert len({s.slug for s in sessions if s.computer == NAME}) == 13  # every item built there
    log = "".join(sshd.server.log)
    assert "no more sessions" not in log  # no channel was refused (ssh would fall back to a handshake each)


def opened(gate: list[Path], future: Future[RunReport]) -> RunReport:
    """The gates opened, the run's report once it has ended."""
    for each in gate:
        each.touch()
    return future.result(timeout=600)


def all_three_delivered(project: Path, report: RunReport, lines: list[str]) -> list[Session]:
    """The run ended COMPLETE with greeting, shouting and farewell delivered: every session on record."""
    assert report.outcome is Outcome.COMPLETE, report.text + "\n" + "\n".join(lines)
    assert delivered(project) == ["farewell", "greeting", "shouting"]
    return SessionStore().sessions()


def test_a_computer_that_drops_mid_run_and_returns_delivers_every_item_once_and_loses_no_commit(
    project, remote_project, sshd, fake_agents, tmp_path
):
    # where the sandboxed workers here and there see them too (their /tmp is their own)
    gate = [project / ".git" / "gate", remote_project / ".git" / "gate"]
    gated_items(project, [], gate, lanes=3)
    lines: list[str] = []
    future = run_in_background(project, 3, lines)
    try:
        held = running_there(2)  # greeting and shouting (farewell waits for greeting)
        sshd.server.kill()  # sshd and every connection it served: the computer drops
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the run marks its workers there unreachable
            marked = [SessionStore().get(s.id) for s in held]
            if all(s is not None and s.activity is Activity.UNREACHABLE for s in marked):
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the workers of the computer that dropped were never marked unreachable")
        assert all(s is not None and s.state is SessionState.RUNNING for s in marked)  # not given up
        assert sshd.server.start()  # the computer is back: its workers worked on meanwhile
    finally:
        report = opened(gate, future)
    sessions = all_three_delivered(project, report, lines)
    assert steps_twice(sessions) == []  # none twice
    assert {s.slug for s in sessions if s.computer == NAME and s.command == "next-build"} >= {
        "greeting",
        "shouting",
    }
    commits = each_step_on_main_once(project)
    # the builds made there while it was away reached main
    assert {"remote worker|Build greeting", "remote worker|Build shouting"} <= set(commits), commits


def each_step_on_main_once(project: Path) -> list[str]:
    """Main's commits ("AUTHOR|SUBJECT"), each item's build, review and merge among them exactly once: none
    lost, none twice."""
    commits = git(project, "log", "--format=%an|%s", "main").splitlines()
    for slug in ("greeting", "shouting", "farewell"):
        for subject in (f"Build {slug}", f"Review {slug}", f"Merge {slug}"):
            assert [c.split("|", 1)[1] for c in commits].count(subject) == 1, (subject, commits)
    return commits


def away_for_good(project: Path, seconds: float) -> None:
    """`[runtime] unreachable_wait`: a computer away that long has its workers given up."""
    text = (
        (project / "teleclaude.toml")
        .read_text()
        .replace("[runtime]\n", f"[runtime]\nunreachable_wait = {seconds}\n", 1)
    )
    settle_settings(project, text, "Workers of a computer away are given up soon")


def running_soon_given_up(
    project: Path, remote_project: Path
) -> tuple[list[Path], list[str], Future[RunReport]]:
    """Three gated items on three lanes, a computer away 2 s given up: the gates, the run's lines, the run."""
    gate = [project / ".git" / "gate", remote_project / ".git" / "gate"]
    gated_items(project, [], gate, lanes=3)
    away_for_good(project, 2)
    lines: list[str] = []
    return gate, lines, run_in_background(project, 3, lines)


def given_up_there(held: list[Session], seconds: float = 120) -> list[Session]:
    """Wait until the run has given up each of the `held` workers (their sessions ended, saying so)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = [SessionStore().get(s.id) for s in held]
        if all(s is not None and is_given_up(s) for s in now):
            return [s for s in now if s is not None]
        time.sleep(0.1)
    raise AssertionError("the workers of the computer that stayed away were never given up")


def test_a_computer_that_drops_mid_step_and_stays_away_has_its_items_taken_up_here_and_delivered_once(
    project, remote_project, sshd, fake_agents, tmp_path
):
    """The run ends COMPLETE while the computer is away; when it is back, the next run ends the old workers
    there and keeps what they committed meanwhile, never merged."""
    gate, lines, future = running_soon_given_up(project, remote_project)
    try:
        held = running_there(2)  # greeting and shouting (farewell waits for greeting)
        sshd.server.kill()  # the computer drops, and is not started again during the run
        dropped = {slug: git(remote_project, "rev-parse", slug).strip() for slug in ("greeting", "shouting")}
        given_up = given_up_there(held)
    finally:
        report = opened(gate, future)
    sessions = all_three_delivered(project, report, lines)
    assert steps_twice(sessions) == []  # none twice, the given-up workers aside
    assert {s.slug for s in given_up} == {"greeting", "shouting"}
    taken_up = {s.slug for s in sessions if s.command == "next-build" and not is_given_up(s)}
    assert taken_up >= {"greeting", "shouting"}  # each build started again, here
    assert all(s.computer == "local" for s in sessions if s.created_at > max(g.updated_at for g in given_up))
    each_step_on_main_once(project)
    assert "given up: 2" in report.text, report.text
    # the old workers there went on (the gate opened) and committed; the computer comes back after the run
    deadline = time.monotonic() + 120
    while any(git(remote_project, "rev-parse", slug).strip() == tip for slug, tip in dropped.items()):
        assert time.monotonic() < deadline, "the old workers over there never committed"
        time.sleep(0.1)
    assert sshd.server.start()
    again = run_in_background(project, 3, lines).result(timeout=600)  # nothing to do: it ends them there
    assert again.outcome is Outcome.COMPLETE, again.text
    for session in given_up:
        ref = kept_ref(session.slug, session.id)
        assert f"kept at {ref}" in again.text, again.text
        assert gitx.commit_of(project, ref) and not gitx.in_history(project, gitx.commit_of(project, ref))
    assert not (remote_project / "trees" / "greeting").exists()  # a later step can go there again


def test_a_given_up_computer_that_returns_has_its_old_workers_ended_and_their_commits_kept_never_merged(
    project, remote_project, sshd, fake_agents, tmp_path, tmux_socket, teleclaude_cli, monkeypatch
):
    monkeypatch.setattr(given_up_rules, "SWEEP_EVERY", 2.0)  # the run tries the computer again soon
    gate, lines, future = running_soon_given_up(project, remote_project)
    try:
        held = running_there(2)
        sshd.server.kill()
        given_up = given_up_there(held)
        old = next(s for s in given_up if s.slug == "greeting")
        tree = remote_project / "trees" / "greeting"  # what its worker did while away
        (tree / "while-away.txt").write_text("made while the computer was away\n")
        git(tree, "add", "while-away.txt")
        git(tree, "commit", "-q", "-m", "Made while away")
        extra = git(tree, "rev-parse", "HEAD").strip()
        assert sshd.server.start()  # the computer is back, after the step was taken up here
        ref = kept_ref("greeting", old.id)
        deadline = time.monotonic() + 120
        while gitx.commit_of(project, ref) != extra:
            assert time.monotonic() < deadline, "the old worker's commit was never kept here"
            time.sleep(0.1)
        box = computer(sshd, str(remote_project), tmp_path)
        try:
            names = ssh.RemoteTmux(box, tmux_socket).cmd(
                "list-sessions", "-F", "#{session_name}", check=False
            )
        finally:
            ssh.close(box)
        assert old.tmux_session.rpartition(":")[2] not in names  # the old worker there is ended
    finally:
        for each in gate:
            each.touch()
        report = future.result(timeout=600)
    assert report.outcome is Outcome.COMPLETE, report.text + "\n" + "\n".join(lines)
    assert delivered(project) == ["farewell", "greeting", "shouting"]
    assert steps_twice(SessionStore().sessions()) == []
    assert gitx.commit_of(project, ref) == extra  # kept
    assert not gitx.in_history(project, extra)  # never merged
    assert not (project / "while-away.txt").exists()
    assert f"kept at {ref}: git log HEAD..{ref}" in report.text, report.text
    status = teleclaude_cli(project, "status")
    out, err = status.communicate(timeout=120)
    assert status.returncode == 0, out + err
    assert f"kept at {ref}: git log HEAD..{ref}" in out, out
