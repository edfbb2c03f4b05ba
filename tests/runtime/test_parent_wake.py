"""Parent wake-ups in real tmux with stand-in agents: the supervisor types each worker's digest into its
parent's pane at the parent's idle moment (seed 003 §B), on a fake clock; and the detached supervisor
process, one per project, which ends with its workers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from teleclaude.adapters import fs, procs
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime import supervisor as supervisors
from teleclaude.runtime.api import Runtime, open_runtime
from teleclaude.runtime.core.parents import Parent
from teleclaude.runtime.core.sessions import SessionState, Started, StartRequest
from teleclaude.runtime.core.supervision import MARK

from .conftest import FakeClock

WAKE = f"{MARK} worker "


@pytest.fixture
def clock(runtime) -> FakeClock:
    clock = FakeClock()
    runtime.context.clock = clock
    # no reminder reaches the stalled worker (it would wake it): only the parent's digests are looked at
    runtime.context.config = replace(runtime.context.config, soft_remind=5000, hard_remind=6000)
    runtime.start_supervisor = lambda project: None  # the test drives the supervisor's rounds itself
    return clock


@pytest.fixture
def parent(runtime, project) -> Parent:
    """An orchestrator's pane: a stand-in claude at its prompt, in a tmux session of its own."""
    tmux = runtime.tmux
    tmux.cmd(
        "new-session",
        "-d",
        "-s",
        "orchestrator",
        "-x",
        "200",
        "-y",
        "50",
        "-c",
        str(project.parent),
        "claude",
    )
    pane = tmux.cmd("list-panes", "-t", "=orchestrator", "-F", "#{pane_id}")[0]
    socket = tmux.cmd("display-message", "-p", "-t", pane, "#{socket_path}")[0]
    until_shown(runtime, pane, lambda rows: any(row.rstrip() == ">" for row in rows))
    return Parent(socket=socket, pane=pane)


def parent_rows(runtime, pane: str) -> list[str]:
    view = runtime.tmux.views()[pane]
    return runtime.tmux.capture(pane, -view.history_size, view.height - 1)


def wakes(runtime, pane: str) -> list[str]:
    """The digests typed into the parent, as its screen echoed them (each starts a row)."""
    return [row for row in parent_rows(runtime, pane) if row.startswith(f"> {WAKE}")]


def until_shown(runtime, pane: str, shows, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if shows(parent_rows(runtime, pane)):
            return
        time.sleep(0.05)
    pytest.fail("the parent's pane never showed it:\n" + "\n".join(parent_rows(runtime, pane)))


def rounds(runtime: Runtime, project: Path, count: int = 4) -> bool:
    """A few rounds of the supervisor (a parent takes a digest once its screen held still for one)."""
    busy = True
    for _ in range(count):
        busy = runtime.supervisor.round(str(project.resolve()))
        time.sleep(runtime.config.poll_interval)
    return busy


def worker_mode(runtime, mode: str) -> None:
    """What the stand-in workers started from now on do (the tmux server, started by the parent's pane,
    gives them its environment)."""
    runtime.tmux.cmd("set-environment", "-g", "FAKE_AGENT", mode)


def start(runtime, project, parent: Parent) -> Started:
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch), action
    request = StartRequest(
        "local",
        action.command,
        action.slug,
        action.project,
        action.agent,
        action.thinking_mode,
        action.subfolder,
        parent.encode(),
        "claude",
    )
    started = runtime.run_agent_command(request)
    assert isinstance(started, Started), started
    return started


def test_a_stalled_workers_parent_is_woken_at_600_then_every_300_s_and_once_its_turn_ends(
    project, runtime, clock, parent, monkeypatch
):
    worker_mode(runtime, "stall")
    session_id = start(runtime, project, parent).session.id
    rounds(runtime, project)
    clock.advance(590)
    rounds(runtime, project)
    assert wakes(runtime, parent.pane) == []  # nothing before digest_period
    clock.advance(10)
    rounds(runtime, project)
    until_shown(runtime, parent.pane, lambda rows: len(wakes(runtime, parent.pane)) == 1)
    (first,) = wakes(runtime, parent.pane)
    assert f"worker {session_id} (gemini /next-build greeting)" in first
    assert "NO PROGRESS DETECTED" in first and "status never" in first
    # the parent took it as its next line: its answer follows, and it is at its prompt again
    until_shown(runtime, parent.pane, lambda rows: any("status: still working on it" in r for r in rows))
    # the supervisor crashes and another takes over: the timers are the stored timestamps
    runtime = open_runtime(project)
    runtime.context.clock = clock
    runtime.context.config = replace(runtime.context.config, soft_remind=5000, hard_remind=6000)
    runtime.start_supervisor = lambda project: None
    clock.advance(290)
    rounds(runtime, project)
    assert len(wakes(runtime, parent.pane)) == 1
    clock.advance(10)  # escalated at the first digest: every digest_period_quiet from now on
    rounds(runtime, project)
    until_shown(runtime, parent.pane, lambda rows: len(wakes(runtime, parent.pane)) == 2)
    assert "unchanged since the last digest" in wakes(runtime, parent.pane)[1]
    # the worker is told to go on (here by hand), does its step, and its turn ends: a final digest
    assert not isinstance(runtime.send_message(session_id, "go on"), Exception)
    deadline = time.monotonic() + 30
    while runtime.store.get(session_id).state is not SessionState.TURN_ENDED:
        assert time.monotonic() < deadline, runtime.store.get(session_id)
        rounds(runtime, project, 1)
    busy = rounds(runtime, project)
    until_shown(runtime, parent.pane, lambda rows: len(wakes(runtime, parent.pane)) == 3)
    final = wakes(runtime, parent.pane)[2]
    assert "turn ended after" in final and "next_work" in final
    assert not busy  # nothing left to supervise: the supervisor process would exit now
    clock.advance(900)
    rounds(runtime, project)
    assert len(wakes(runtime, parent.pane)) == 3  # no digest of a worker whose turn ended


def test_a_digest_waits_for_a_half_typed_line_and_is_dropped_when_the_worker_is_ended(
    project, runtime, clock, parent, monkeypatch
):
    worker_mode(runtime, "hang")
    session_id = start(runtime, project, parent).session.id
    runtime.tmux.send_text(parent.pane, "half a thought")  # someone types in the orchestrator's pane
    rounds(runtime, project)
    clock.advance(600)
    rounds(runtime, project, 6)
    assert runtime.store.get(session_id).parent_pending.startswith(WAKE)  # waiting for the parent
    assert wakes(runtime, parent.pane) == []
    assert [row for row in parent_rows(runtime, parent.pane) if "half a thought" in row] == [
        "> half a thought"
    ]
    ended = runtime.end_session(session_id)
    assert not isinstance(ended, Exception) and ended.session.state is SessionState.CANCELLED
    runtime.tmux.send_key(parent.pane, "C-u")  # never typed into it: the line is still theirs to erase
    for _ in range(len("half a thought")):
        runtime.tmux.send_key(parent.pane, "BSpace")
    assert not rounds(runtime, project)
    clock.advance(600)
    rounds(runtime, project)
    assert wakes(runtime, parent.pane) == []  # cancelled: neither the waiting digest nor a final one


def test_a_parent_that_is_a_teleclaude_session_gets_the_final_digest_once_its_own_turn_ended(
    project, runtime, clock, monkeypatch
):
    monkeypatch.setenv("FAKE_AGENT", "work")  # the orchestrator: a session of its own, idle
    orchestrator = runtime.run_agent_command(
        StartRequest("local", "emit", "1", str(project), "gemini", "med")
    )
    assert isinstance(orchestrator, Started), orchestrator
    deadline = time.monotonic() + 30
    while runtime.store.get(orchestrator.session.id).state is not SessionState.TURN_ENDED:
        assert time.monotonic() < deadline
        runtime.refresh(runtime.store.sessions([orchestrator.session.id]))
        time.sleep(0.1)
    worker = start(runtime, project, Parent(session_id=orchestrator.session.id)).session
    deadline = time.monotonic() + 30
    while not any(WAKE in row for row in _screen(runtime, orchestrator.session.pane_id)):
        assert time.monotonic() < deadline, _screen(runtime, orchestrator.session.pane_id)
        rounds(runtime, project, 1)
    shown = [row for row in _screen(runtime, orchestrator.session.pane_id) if WAKE in row]
    assert f"worker {worker.id}" in shown[0] and "turn ended" in shown[0]
    assert runtime.store.get(orchestrator.session.id).state is SessionState.RUNNING  # a new turn


def _screen(runtime, pane: str) -> list[str]:
    return runtime.tmux.screen(pane, runtime.tmux.views()[pane])


# --- the supervisor process ---------------------------------------------------------------------------------


def test_the_first_dispatch_starts_one_supervisor_which_wakes_the_parent_and_ends_with_its_worker(
    project, runtime, parent, monkeypatch
):
    lock = supervisors.lock_path(runtime.store.path, str(project.resolve()))
    started = start(runtime, project, parent)  # a worker that does its step at once: its turn ends
    until_shown(runtime, parent.pane, lambda rows: len(wakes(runtime, parent.pane)) == 1, seconds=60)
    assert f"worker {started.session.id}" in wakes(runtime, parent.pane)[0]
    assert "turn ended" in wakes(runtime, parent.pane)[0]
    deadline = time.monotonic() + 30
    while True:  # nothing left to supervise: it exits, and its lock is free
        with fs.try_lock(lock) as free:
            if free:
                break
        assert time.monotonic() < deadline, "the supervisor did not exit"
        time.sleep(0.1)


def test_a_second_supervisor_of_a_project_is_a_no_op(project, runtime):
    lock = supervisors.lock_path(runtime.store.path, str(project.resolve()))
    env = {**os.environ, "TELECLAUDE_DB": str(runtime.store.path)}
    command = [sys.executable, "-m", "teleclaude", "supervise", "--project", str(project)]
    with fs.try_lock(lock) as held:  # one runs
        assert held
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0 and second.stdout.startswith("OK: the project's supervisor already runs")
    alone = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert alone.returncode == 0 and alone.stdout.startswith("OK: nothing left to supervise")


# --- through the MCP tool -----------------------------------------------------------------------------------


def dispatch_over_mcp(project: Path, **more: str) -> list[str]:
    """Two answers of `run_agent_command` for a stand-in claude's `emit 1` in `project` (and `more`
    arguments), through an in-memory MCP client."""
    arguments = dict(
        computer="local",
        command="emit",
        args="1",
        project=str(project),
        agent="claude",
        thinking_mode="fast",
        **more,
    )
    from fastmcp import Client

    from teleclaude import mcp as mcp_server

    async def go() -> list[str]:
        answers = []
        async with Client(mcp_server.build_server()) as client:
            for _ in range(2):
                result = await client.call_tool("teleclaude__run_agent_command", arguments)
                answers.append(result.content[0].text)
        return answers

    return asyncio.run(go())


@pytest.fixture
def mcp_in_project(project, fake_agents, monkeypatch):
    from teleclaude import mcp as mcp_server

    monkeypatch.chdir(project)  # an MCP client starts the server in the project
    monkeypatch.setattr(mcp_server, "_RUNTIME", None)
    monkeypatch.setattr(mcp_server, "_TOLD_NO_TMUX", False)
    for name in ("TMUX", "TMUX_PANE", "TELECLAUDE_SESSION_ID"):
        monkeypatch.delenv(name, raising=False)
    # a server whose CLI runs outside tmux: none of its ancestors' environments names a pane either
    monkeypatch.setattr(procs, "ancestors", lambda pid, limit=8: [])
    return project


def test_an_orchestrator_not_in_tmux_is_told_so_once_and_gets_no_parent(mcp_in_project, monkeypatch):
    project = mcp_in_project
    monkeypatch.setenv("FAKE_AGENT", "hang")
    first, second = dispatch_over_mcp(project)
    assert first.startswith("SESSION:") and "NOTE: this orchestrator does not run in tmux" in first
    assert second.startswith("SESSION:") and "NOTE:" not in second
    assert all(not s.parent for s in SessionStore().sessions())


def test_a_parent_named_explicitly_gets_the_final_digest_in_its_pane(
    mcp_in_project, runtime, parent, monkeypatch
):
    project = mcp_in_project
    monkeypatch.setenv("TMUX", f"{parent.socket},1,0")  # the orchestrator's tmux server; the pane is named
    first, _ = dispatch_over_mcp(project, parent=parent.pane)
    assert first.startswith("SESSION:") and "You are its parent" in first and "NOTE:" not in first
    until_shown(runtime, parent.pane, lambda rows: len(wakes(runtime, parent.pane)) >= 1, seconds=60)
    assert "turn ended" in wakes(runtime, parent.pane)[0]
    refused = dispatch_over_mcp(project, parent="somebody")
    assert refused[0].startswith("ERROR: INVALID_ARGUMENT")


def test_with_notify_the_no_progress_escalation_and_each_digest_typed_are_also_sent(
    project, runtime, clock, parent
):
    from teleclaude.adapters.notify import Notifier
    from teleclaude.config.notify import NotifyConfig, Target

    from ..servers import Receiver

    worker_mode(runtime, "stall")
    with Receiver() as receiver:
        target = Target("notify.toml", "notify.urls[0]", receiver.url())
        notifier = Notifier(NotifyConfig(targets=(target,), digests=True))
        runtime.supervisor.notify = notifier.post
        session_id = start(runtime, project, parent).session.id
        rounds(runtime, project)
        clock.advance(600)
        rounds(runtime, project)
        until_shown(runtime, parent.pane, lambda rows: len(wakes(runtime, parent.pane)) == 1)
        messages = receiver.wait_for(2)
        notifier.close()
    by_title = {message["title"]: message["message"] for message in messages}
    assert set(by_title) == {
        "teleclaude: no progress on next-build greeting",
        "teleclaude: next-build greeting",
    }
    assert (
        f"session {session_id}) shows no progress"
        in by_title["teleclaude: no progress on next-build greeting"]
    )
    assert by_title["teleclaude: next-build greeting"].startswith(f"{WAKE}{session_id}")
