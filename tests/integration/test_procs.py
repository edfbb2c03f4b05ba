"""The run's wait sleeps on its workers' wait-for clients and on pipes at once (`procs.sleep_until_ended`,
`procs.Exits`): real child processes and real pipes."""

import os
import subprocess
import sys

from teleclaude.adapters import procs


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)


def test_a_sleep_ends_when_a_pipe_is_poked_and_tells_which():
    quiet, poked = os.pipe(), os.pipe()
    waiter = _child("import sys; sys.stdin.read()")  # ends when its input closes
    try:
        os.write(poked[1], b"\n")
        ended, ready = procs.sleep_until_ended([waiter], 30, [quiet[0], poked[0]])
        assert (ended, ready) == (False, frozenset({poked[0]}))
        assert waiter.stdin is not None
        waiter.stdin.close()
        waiter.wait()
        ended, ready = procs.sleep_until_ended([waiter], 30, [quiet[0]])
        assert (ended, ready) == (True, frozenset())
        assert procs.sleep_until_ended([], 0.01, [quiet[0]]) == (False, frozenset())  # its time is up
    finally:
        waiter.kill()
        waiter.wait()
        for fd in (*quiet, *poked):
            os.close(fd)


def test_a_look_is_told_of_a_poke_as_of_a_waiter_that_ended():
    pipe = os.pipe()
    waiter = _child("import sys; sys.stdin.read()")
    try:
        with procs.Exits([waiter], [pipe[0]]) as news:
            assert not news()
            os.write(pipe[1], b"\n")
            assert news()
        with procs.Exits([waiter]) as news:
            assert not news()
            assert waiter.stdin is not None
            waiter.stdin.close()
            waiter.wait()
            assert news()
    finally:
        waiter.kill()
        waiter.wait()
        for fd in pipe:
            os.close(fd)


def test_kept_pidfds_are_opened_once_and_tell_a_waiter_s_end_as_fresh_ones_do():
    """A run's wait selects on its wait-for clients at every look and sleep: their pidfds are kept
    (`procs.Pidfds`), each opened once, and a waiter that ended before a look is not news to it."""
    pidfds = procs.Pidfds()
    waiters = [_child("import sys; sys.stdin.read()") for _ in range(2)]
    try:
        first = pidfds.of(waiters)
        assert first is not None and pidfds.of(waiters) == first  # the same descriptors again
        assert procs.sleep_until_ended(waiters, 0.01, (), pidfds) == (False, frozenset())
        with procs.Exits(waiters, (), pidfds) as news:
            assert not news()
            assert waiters[0].stdin is not None
            waiters[0].stdin.close()
            waiters[0].wait()
            assert news()
        with procs.Exits(waiters, (), pidfds) as news:
            assert not news()  # it had ended before this look began
        assert procs.sleep_until_ended(waiters, 30, (), pidfds) == (True, frozenset())
        assert pidfds.of(waiters) == first  # not closed by a look or a sleep
        pidfds.drop(waiters[0])
        assert pidfds.of(waiters[1:]) == first[1:]
        assert pidfds.of(waiters[:1]) is None  # reaped before its pidfd was opened: its pid may be another's
    finally:
        pidfds.close()
        for waiter in waiters:
            waiter.kill()
            waiter.wait()
            if waiter.stdin is not None:
                waiter.stdin.close()


def test_an_ended_pane_s_group_whose_leader_is_gone_is_told_by_a_scan_made_for_all_of_them():
    """The straggler watch of ended panes (adapters/tmux.py) tells a group whose leader is gone by a scan of
    every process, made once for all the groups then (`scan`): until that scan the group counts as alive;
    the scan finds its live processes, and a zombie (where init does not reap it) is none."""
    import signal
    import time

    from teleclaude.adapters.tmux import _live_groups

    sleeper = (
        "import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])"
    )
    leader = subprocess.Popen([sys.executable, "-c", sleeper], start_new_session=True)
    leader.wait()  # gone: its child lives on in its group
    group, members = leader.pid, dict[int, set[int]]()
    try:
        assert _live_groups([group], members, scan=False) == {group} and members == {}
        assert _live_groups([group], members) == {group} and len(members[group]) == 1
        assert _live_groups([group], members, scan=False) == {group}  # its member found: no scan needed
    finally:
        os.killpg(group, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while _live_groups([group], members) and time.monotonic() < deadline:
        time.sleep(0.05)  # the kill takes effect
    assert _live_groups([group], {}) == set()
