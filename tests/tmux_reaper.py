"""A private tmux server that cannot outlive the test run that started it.

tmux daemonizes: its server, and the agent CLIs in its panes, are nobody's children. A fixture's finalizer
kills it when the test ends, but a run that is itself killed (a CI timeout's SIGTERM, SIGKILL, a second
Ctrl-C during teardown) runs no finalizer. `reaper(socket)` starts a small watcher in its own session that
waits for the test process to end, however it ends, and then kills that server (tmux hangs up every pane,
which ends the CLIs in them; one that outlives the hang-up is killed with its pane's process group). The
fixture stops the watcher after killing the server itself. The loopback sshd's fixture has it end that sshd
and the tmux servers its logins started (`tmux_dir`) the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

# argv: the owner's pid, the socket name (or ""), the folder of more servers' sockets (or ""), pids to end.
# Blocks on a pidfd (Linux 5.3+), else looks twice a second.
_WATCH = """
import glob, os, select, signal, subprocess, sys, time
owner, socket, tmux_dir, pids = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
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
folder = os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}")
paths = [os.path.join(folder, socket)] if socket else []
paths += glob.glob(os.path.join(tmux_dir, "tmux-*", "*")) if tmux_dir else []
groups = []
for path in paths:
    listed = subprocess.run(
        ["tmux", "-S", path, "list-panes", "-a", "-F", "#{pane_pid}"], capture_output=True, text=True
    )
    groups += [int(pid) for pid in listed.stdout.split() if pid.isdigit()]  # each pane leads its group
    subprocess.run(["tmux", "-S", path, "kill-server"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        os.unlink(path)  # a killed server can leave its socket file behind
    except OSError:
        pass
if groups:
    time.sleep(1)  # a CLI that ignores the hang-up (gemini, a hung one) is still in its pane's group
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
for pid in pids:
    try:
        os.kill(int(pid), signal.SIGTERM)
    except ProcessLookupError:
        pass
"""


def reaper(
    socket: str = "", owner: int | None = None, tmux_dir: Path | None = None, pids: Iterable[int] = ()
) -> subprocess.Popen[bytes]:
    """A watcher that, once process `owner` (default: this one) has ended, kills the tmux server `socket`,
    every tmux server with a socket under `tmux_dir` (a TMUX_TMPDIR), and the processes `pids`."""
    argv = [str(owner or os.getpid()), socket, str(tmux_dir or ""), *map(str, pids)]
    return subprocess.Popen(
        [sys.executable, "-c", _WATCH, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outside the run's process group: a Ctrl-C to it does not end the watcher
    )


def stop(watcher: subprocess.Popen[bytes]) -> None:
    """The test ended normally and killed its server itself: the watcher has nothing left to do."""
    watcher.kill()
    watcher.wait()
