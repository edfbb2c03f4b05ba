"""A private tmux server that cannot outlive the test run that started it.

tmux daemonizes: its server, and the agent CLIs in its panes, are nobody's children. A fixture's finalizer
kills it when the test ends, but a run that is itself killed (a CI timeout's SIGTERM, SIGKILL, a second
Ctrl-C during teardown) runs no finalizer. `reaper(socket)` starts a small watcher in its own session that
waits for the test process to end, however it ends, and then kills that server (tmux hangs up every pane,
which ends the CLIs in them). The fixture stops the watcher after killing the server itself.
"""

from __future__ import annotations

import os
import subprocess
import sys

# argv: the owner's pid, the socket name. Blocks on a pidfd (Linux 5.3+), else looks twice a second.
_WATCH = """
import os, select, subprocess, sys, time
owner, socket = int(sys.argv[1]), sys.argv[2]
try:
    fd = os.pidfd_open(owner)
except (AttributeError, OSError):
    fd = None
if fd is not None:
    select.select([fd], [], [])
else:
    while True:
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
subprocess.run(["tmux", "-L", socket, "kill-server"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def reaper(socket: str, owner: int | None = None) -> subprocess.Popen[bytes]:
    """A watcher that kills the tmux server `socket` once process `owner` (default: this one) has ended."""
    return subprocess.Popen(
        [sys.executable, "-c", _WATCH, str(owner or os.getpid()), socket],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outside the run's process group: a Ctrl-C to it does not end the watcher
    )


def stop(watcher: subprocess.Popen[bytes]) -> None:
    """The test ended normally and killed its server itself: the watcher has nothing left to do."""
    watcher.kill()
    watcher.wait()
