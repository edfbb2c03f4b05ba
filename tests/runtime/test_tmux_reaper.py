"""A test run killed before its finalizers run leaves no private tmux server, nor its panes' processes."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from .. import tmux_reaper

# argv: the socket name, the path of tmux_reaper.py. Starts a server with one long pane, its reaper, and
# prints the pane's pid; then waits to be killed.
RUN = """
import importlib.util, subprocess, sys, time
spec = importlib.util.spec_from_file_location("tmux_reaper", sys.argv[2])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
started = ["tmux", "-L", sys.argv[1], "new-session", "-d", "-P", "-F", "#{pane_pid}", "sleep", "600"]
pane = subprocess.run(started, capture_output=True, text=True, check=True).stdout.strip()
module.reaper(sys.argv[1])
print(pane, flush=True)
time.sleep(600)
"""


def server_alive(socket: str) -> bool:
    return subprocess.run(["tmux", "-L", socket, "list-sessions"], capture_output=True).returncode == 0


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split()[2] != "Z"  # a zombie has ended


def test_a_run_killed_with_sigkill_leaves_no_tmux_server_or_pane_process(tmp_path):
    socket = f"tc-test-{secrets.token_hex(4)}"
    run = subprocess.Popen(
        [sys.executable, "-c", RUN, socket, tmux_reaper.__file__], stdout=subprocess.PIPE, text=True
    )
    try:
        pane = int(run.stdout.readline())
        assert server_alive(socket) and process_alive(pane)
        run.send_signal(signal.SIGKILL)  # no finalizer, no atexit: only the watcher is left to clean up
        run.wait()
        deadline = time.monotonic() + 30
        while (server_alive(socket) or process_alive(pane)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not server_alive(socket), "the tmux server outlived the run"
        assert not process_alive(pane), "the pane's process outlived the run"
    finally:
        run.kill()
        run.wait()
        run.stdout.close()
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
