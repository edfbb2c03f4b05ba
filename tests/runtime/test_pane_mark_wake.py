"""A hook's pane mark (a worker on another computer) wakes the run's wait on its session, on a real private
tmux server: the run's looks come seconds apart while they find nothing new (runtime/core/looks.py)."""

from __future__ import annotations

import sys

from teleclaude.adapters.tmux import Tmux
from teleclaude.runtime.core.marks import exit_channel

# what the stop hook's `mark_pane` does inside the worker's pane; a value ending in `;` is kept whole
MARK = (
    "import sys\n"
    "from teleclaude.adapters.tmux import TURN_END_OPTION, mark_own_pane\n"
    "sys.exit(0 if mark_own_pane('sealed end;', TURN_END_OPTION, sys.argv[1]) else 1)\n"
)


def test_a_turn_end_marked_on_its_pane_wakes_whoever_waits_on_its_session(tmux_socket):
    tmux = Tmux(tmux_socket)
    channel = exit_channel("0123abcd")
    tmux.cmd("set-option", "-g", "remain-on-exit", "on", ";", "new-session", "-d", "-s", "w")
    waiter = tmux.wait_for(channel)  # on the running server
    try:
        pane = tmux.cmd(
            "new-window", "-t", "=w", "-P", "-F", "#{pane_id}", sys.executable, "-c", MARK, channel
        )
        assert waiter.wait(timeout=60) == 0  # signalled (the client ends on its channel's signal)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    view = tmux.views()[pane[0]]
    assert view.turn_end == "sealed end;"
