"""A test run killed before its finalizers run leaves no private tmux server, nor its panes' processes."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .. import tmux_reaper

# argv: the path of tmux_reaper.py, the socket name, the folder of the server's socket or "" (`-L` then),
# then a process of its own to end (like the loopback sshd). Starts a server with one long pane (deaf to the
# hang-up) and its reaper, prints the pids of the pane and the other process, then waits to be killed.
RUN = """
import importlib.util, os, subprocess, sys, time
spec = importlib.util.spec_from_file_location("tmux_reaper", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
name, folder = sys.argv[2], sys.argv[3]
if folder:
    os.makedirs(os.path.join(folder, "tmux-0"))
server = ["-S", os.path.join(folder, "tmux-0", name)] if folder else ["-L", name]
deaf = ["sh", "-c", "trap '' HUP; exec sleep 600"]  # like a CLI that outlives its pane's hang-up
started = ["tmux", *server, "new-session", "-d", "-P", "-F", "#{pane_pid}", *deaf]
pane = subprocess.run(started, capture_output=True, text=True, check=True).stdout.strip()
other = subprocess.Popen(["sleep", "600"])
if folder:
    module.reaper(tmux_dir=folder, pids=[other.pid])
else:
    module.reaper(name)
print(pane, other.pid if folder else pane, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split()[2] != "Z"  # a zombie has ended


@pytest.mark.parametrize("by", ["socket name", "socket folder"])
def test_a_run_killed_with_sigkill_leaves_no_tmux_server_or_pane_process(tmp_path, by):
    name = f"tc-test-{secrets.token_hex(4)}"
    folder = str(tmp_path / "tmux") if by == "socket folder" else ""
    default = Path(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}")
    socket_file = Path(folder, "tmux-0", name) if folder else default / name
    server = ["-S", str(socket_file)]

    def server_alive() -> bool:
        return subprocess.run(["tmux", *server, "list-sessions"], capture_output=True).returncode == 0

    run = subprocess.Popen(
        [sys.executable, "-c", RUN, tmux_reaper.__file__, name, folder], stdout=subprocess.PIPE, text=True
    )
    assert run.stdout is not None
    try:
        pane, other = map(int, run.stdout.readline().split())
        assert server_alive() and alive(pane) and alive(other)
        run.send_signal(signal.SIGKILL)  # no finalizer, no atexit: only the watcher is left to clean up
        run.wait()
        deadline = time.monotonic() + 30
        while (server_alive() or alive(pane) or alive(other)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not server_alive(), "the tmux server outlived the run"
        assert not alive(pane), "the pane's process outlived the run"
        assert not alive(other), "the process to end with the run outlived it"
        assert not socket_file.exists()
    finally:
        run.kill()
        run.wait()
        run.stdout.close()
        subprocess.run(["tmux", *server, "kill-server"], capture_output=True)
        socket_file.unlink(missing_ok=True)
