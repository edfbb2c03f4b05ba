"""Pane output as events (tmux control mode), on a real private tmux server."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from teleclaude.adapters.tmux import Tmux
from teleclaude.demo.stand_in import LIMIT_MESSAGES
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch
from teleclaude.runtime.core.sessions import EventKind, SessionState, Started

from .conftest import assert_gone, looks_until_quiet


def _pane(tmux: Tmux, name: str) -> str:
    """A session whose one pane runs `cat`: whatever is typed is echoed, and printed again at Enter."""
    size = ("-x", "80", "-y", "20")
    return tmux.cmd("new-session", "-d", "-s", name, *size, "-P", "-F", "#{pane_id}", "cat")[0]


def _attached_mark(tmux: Tmux, pane_id: str) -> int:
    deadline = time.monotonic() + 10
    while (mark := tmux.output_mark(pane_id)) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert mark is not None, "the control client never attached"
    return mark


def _clients(tmux: Tmux) -> list[int]:
    events = tmux._events  # noqa: SLF001 (the test looks at the processes the adapter started)
    return [client.process.pid for client in events._clients.values()] if events else []  # noqa: SLF001


def test_a_pane_that_prints_changes_its_mark_and_wakes_a_waiter_and_a_quiet_one_does_not(tmux_socket):
    tmux = Tmux(tmux_socket)
    busy, quiet = _pane(tmux, "busy"), _pane(tmux, "quiet")
    tmux.follow()
    try:
        tmux.watch("busy", busy)
        tmux.watch("quiet", quiet)
        before_busy, before_quiet = _attached_mark(tmux, busy), _attached_mark(tmux, quiet)
        tmux.send_text(busy, "hello")
        assert tmux.await_output(busy, before_busy, timeout=10)
        assert tmux.output_mark(busy) != before_busy
        assert not tmux.await_output(quiet, before_quiet, timeout=0.3)
        assert tmux.output_mark(quiet) == before_quiet
    finally:
        clients = _clients(tmux)
        tmux.unfollow()
    assert_gone(clients)
    assert tmux.output_mark(busy) is None  # not following: only a capture can tell


def test_pane_text_that_looks_like_the_control_protocol_or_a_command_is_only_counted(tmux_socket, tmp_path):
    tmux = Tmux(tmux_socket)
    pane = _pane(tmux, "hostile")
    planted = tmp_path / "planted"
    tmux.follow()
    try:
        tmux.watch("hostile", pane)
        mark = _attached_mark(tmux, pane)
        for text in ("%exit", "%end 1 1 0", "%session-changed $9 other", f"$(touch {planted})", "`id`"):
            tmux.send_text(pane, text)
            tmux.send_key(pane, "Enter")
        assert tmux.await_output(pane, mark, timeout=10)
        time.sleep(0.3)
        later = tmux.output_mark(pane)
        assert later is not None, "the pane's text ended the client"
        tmux.send_text(pane, "still reported")
        assert tmux.await_output(pane, later, timeout=10)
        assert not planted.exists()
    finally:
        clients = _clients(tmux)
        tmux.unfollow()
    assert_gone(clients)


def test_the_client_ends_with_its_session_and_its_pane_then_needs_a_capture(tmux_socket):
    tmux = Tmux(tmux_socket)
    pane = _pane(tmux, "ending")
    tmux.follow()
    try:
        tmux.watch("ending", pane)
        mark = _attached_mark(tmux, pane)
        clients = _clients(tmux)
        tmux.kill_session("ending")
        assert tmux.await_output(pane, mark, timeout=10)  # nothing more can be said: look
        assert_gone(clients)
        assert tmux.output_mark(pane) is None
    finally:
        tmux.unfollow()


def test_a_client_killed_from_outside_is_started_again_by_the_next_watch(tmux_socket):
    tmux = Tmux(tmux_socket)
    pane = _pane(tmux, "again")
    tmux.follow()
    try:
        tmux.watch("again", pane)
        mark = _attached_mark(tmux, pane)
        [first] = _clients(tmux)
        tmux.cmd("detach-client", "-s", "=again")
        assert tmux.await_output(pane, mark, timeout=10)
        assert_gone([first])
        tmux.watch("again", pane)
        mark = _attached_mark(tmux, pane)
        tmux.send_text(pane, "seen")
        assert tmux.await_output(pane, mark, timeout=10)
    finally:
        clients = _clients(tmux)
        tmux.unfollow()
    assert_gone(clients)


def test_no_client_is_left_when_the_process_that_started_it_is_killed(tmux_socket, tmp_path):
    script = tmp_path / "follow.py"
    script.write_text(
        "import sys, time\n"
        "from teleclaude.adapters.tmux import Tmux\n"
        "tmux = Tmux(sys.argv[1]); tmux.follow(); tmux.watch('kept', sys.argv[2])\n"
        "while tmux.output_mark(sys.argv[2]) is None: time.sleep(0.02)\n"
        "print(*(c.process.pid for c in tmux._events._clients.values()), flush=True)\n"
        "time.sleep(60)\n"
    )
    tmux = Tmux(tmux_socket)
    pane = _pane(tmux, "kept")
    repo = Path(__file__).resolve().parents[2]
    follower = subprocess.Popen(
        [sys.executable, str(script), tmux_socket, pane], stdout=subprocess.PIPE, text=True, cwd=repo
    )
    try:
        assert follower.stdout is not None
        clients = [int(pid) for pid in follower.stdout.readline().split()]
        assert clients
    finally:
        follower.kill()
        follower.communicate()
    assert_gone(clients)


def test_a_following_observer_reads_only_panes_that_printed_and_still_sees_their_new_output(
    project, runtime, monkeypatch, watch
):
    """`teleclaude run` follows its workers' output: a worker that printed nothing since the last look is
    not captured again, and a limit it prints later still limits it."""
    monkeypatch.setenv("FAKE_AGENT", "hang")  # busy after its command: what is typed shows as queued
    action = app.next_work(cwd=project)
    assert isinstance(action, Dispatch), action
    runtime.tmux.follow()
    try:
        started = runtime.start(action)
        assert isinstance(started, Started), started
        session_id, pane = started.session.id, started.session.pane_id
        captures = looks_until_quiet(runtime, monkeypatch)
        before = len(captures)
        assert runtime.store.get(session_id).state is SessionState.RUNNING
        runtime.tmux.send_text(pane, LIMIT_MESSAGES[action.agent])
        runtime.tmux.send_key(pane, "Enter")
        watch(runtime, session_id).until(EventKind.RATE_LIMITED)
        assert len(captures) > before
        runtime.end_session(session_id)
    finally:
        runtime.tmux.unfollow()
