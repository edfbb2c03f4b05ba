"""Does this tmux's server survive control clients attaching while other clients create or kill sessions?

    python bench/probe_tmux_control.py [--tmux PATH] [--rounds 20]

Why output events (a `tmux -C` control client per worker session, `teleclaude/adapters/tmux_control.py`) are
off in `teleclaude run`: a server that crashes ends every worker it runs. Each round starts a private server,
then five threads at once each do one of these, and the round counts as lost when the server is gone:

- `create`: create a session, then attach a control client to it (five concurrent worker starts);
- `kill`: attach a control client to a session while another thread kills another session (workers ending);
- `window`, `list`: the same beside `new-window` or `list-panes -a` (commands that do not crash it);
- `create, locked`: as `create`, but each creation, and each attach until the client printed its first
  line, holds one lock (what all of teleclaude's clients of a server would have to share, were the events
  switched on: a client outside teleclaude, such as a worker's own `tmux`, would not take it).

Never asserts; exits 0; kills every server it started.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial

THREADS = 5
SETTLE = 0.3  # seconds after the threads for a crashed server to be gone


def round_lost(tmux: str, churn: str, locked: bool) -> bool:
    """One round: True when the server did not survive it."""
    base = [tmux, "-L", f"tc-probe-{secrets.token_hex(4)}"]
    lock: AbstractContextManager[object] = threading.Lock() if locked else nullcontext()
    clients: list[subprocess.Popen[bytes]] = []

    def run(*args: str) -> None:
        with lock:
            subprocess.run([*base, *args], capture_output=True, check=False)

    def attach(session: str) -> None:
        with lock:
            client = subprocess.Popen(
                [*base, "-C", "attach", "-t", session], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
            clients.append(client)
            if client.stdout is not None:
                client.stdout.readline()  # attached: its first notification

    def create_then_attach(i: int) -> None:
        run("new-session", "-d", "-s", f"w{i}", "sleep", "120")
        attach(f"w{i}")

    churns: dict[str, Callable[[int], None]] = {
        "kill": lambda i: run("kill-session", "-t", f"k{i}"),
        "window": lambda i: run("new-window", "-d", "-t", f"k{i}", "sleep", "120"),
        "list": lambda i: run("list-panes", "-a"),
    }
    try:
        run("new-session", "-d", "-s", "keep", "sleep", "120")
        jobs: list[Callable[[], None]] = []
        for i in range(THREADS):
            if churn == "create":
                jobs.append(partial(create_then_attach, i))
                continue
            run("new-session", "-d", "-s", f"w{i}", "sleep", "120")
            run("new-session", "-d", "-s", f"k{i}", "sleep", "120")
            jobs += [partial(attach, f"w{i}"), partial(churns[churn], i)]
        threads = [threading.Thread(target=job) for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        time.sleep(SETTLE)
        alive = subprocess.run([*base, "list-sessions"], capture_output=True, check=False)
        return alive.returncode != 0
    finally:
        for client in clients:
            client.kill()
            client.wait()
        subprocess.run([*base, "kill-server"], capture_output=True, check=False)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmux", default=shutil.which("tmux") or "tmux")
    parser.add_argument("--rounds", type=int, default=20)
    options = parser.parse_args()
    version = subprocess.run([options.tmux, "-V"], capture_output=True, text=True, check=False).stdout.strip()
    print(f"{version}: rounds whose server crashed, of {options.rounds}")
    subjects = (("create", False), ("kill", False), ("window", False), ("list", False), ("create", True))
    for churn, locked in subjects:
        lost = sum(round_lost(options.tmux, churn, locked) for _ in range(options.rounds))
        print(f"{churn + (', locked' if locked else ''):<16} {lost:>3}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
