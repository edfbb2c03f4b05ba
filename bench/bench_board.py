"""What `teleclaude board` costs when left open: its CPU (ms per second) with live workers, against an idle
Python process measured in the same run.

    PYTHONPATH=. python bench/bench_board.py [--workers 5] [--seconds 30] [--interval 2]

A throwaway demo repository, a private HOME, database and tmux server, and the stand-in agent CLI (`hang`:
each worker keeps working and never answers). The board runs in a pseudo-terminal of 160x50, as in a tmux
window; after a warm-up, its CPU time (its own and that of the git and tmux processes it waited for, from
/proc) is read over `--seconds`. The idle floor is `python -c "import time; time.sleep(N)"` over the same
time. Aim: at most 2 % of a core (20 ms/s) with 5 workers. Never asserts; exits 0.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import secrets
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

from tests.servers import stop  # PYTHONPATH=. as above

STEPS = [
    ("claude", "next-build", "greeting"),
    ("gemini", "next-build", "shouting"),
    ("codex", "next-build", "farewell"),
    ("claude", "next-review", "greeting"),
    ("gemini", "next-review", "shouting"),
    ("codex", "next-review", "farewell"),
]


def cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime of `pid`: its own CPU and its waited-for children's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def drain(fd: int, seconds: float) -> None:
    """Read what the board draws (a terminal would), for `seconds`."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                return


def measure(argv: list[str], env: dict[str, str], cwd: Path, warm: float, seconds: float) -> float:
    """ms of CPU per second of `argv` in a 160x50 pseudo-terminal, after `warm` seconds."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    process = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
    )
    os.close(slave)
    try:
        drain(master, warm)
        before, start = cpu_seconds(process.pid), time.monotonic()
        drain(master, seconds)
        used, elapsed = cpu_seconds(process.pid) - before, time.monotonic() - start
    finally:
        stop(process)
        os.close(master)
    return 1000 * used / elapsed


def screenshot(project: Path, target: Path) -> None:
    """The board as Textual draws it at 160x50, after its first reads (a worker selected, its screen)."""
    import asyncio

    from teleclaude.adapters.store import AvailabilityStore
    from teleclaude.board.app import BoardApp
    from teleclaude.board.gather import Source
    from teleclaude.planner import api as app

    AvailabilityStore()  # the database exists before the board reads it
    app.mark_agent_unavailable("codex", "1h30m", "rate_limited", cwd=project)

    async def shoot() -> None:
        board = BoardApp(Source(project), interval=0.5)
        async with board.run_test(size=(160, 50)) as pilot:
            while board.loads < 3:
                await pilot.pause(0.1)
            board.save_screenshot(target.name, str(target.parent))

    asyncio.run(shoot())
    print(f"screenshot:            {target}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument(
        "--screenshot", metavar="SVG", help="also save the board's screen (Textual's SVG) there"
    )
    args = parser.parse_args()

    from teleclaude.adapters.tmux import Tmux
    from teleclaude.demo import stand_in
    from teleclaude.demo.workers import commit_all, make_repository

    base = Path(tempfile.mkdtemp(prefix="teleclaude-bench-board-"))
    socket = f"tc-bench-{secrets.token_hex(4)}"
    env = {
        **os.environ,
        "HOME": str(base / "home"),
        "TELECLAUDE_DB": str(base / "home" / "teleclaude.db"),
        "PATH": f"{stand_in.install(base / 'bin')}{os.pathsep}{os.environ['PATH']}",
        "FAKE_AGENT": "hang",
        "TERM": "xterm-256color",
    }
    os.environ.update(env)  # the workers below are started from this process
    try:
        project = make_repository(base / "project")
        (project / "teleclaude.toml").write_text(f'[runtime]\nsocket = "{socket}"\n')
        commit_all(project, "bench settings")
        from teleclaude.runtime.api import open_runtime
        from teleclaude.runtime.core.sessions import StartRequest

        runtime = open_runtime(project)
        for agent, command, slug in STEPS[: args.workers]:
            started = runtime.run_agent_command(
                StartRequest("local", command, slug, str(project), agent, "med")
            )
            if not hasattr(started, "session"):
                print(f"could not start {command} {slug}: {started}")
        live = [s for s in runtime.store.sessions() if not s.state.is_final]
        if args.screenshot:
            screenshot(project, Path(args.screenshot).resolve())
        board = [sys.executable, "-m", "teleclaude", "board", "--interval", str(args.interval)]
        idle = [sys.executable, "-c", "import time; time.sleep(3600)"]
        warm = 5.0
        floor = measure(idle, env, project, warm, args.seconds)
        cost = measure(board, env, project, warm, args.seconds)
        print(f"live workers:          {len(live)}")
        print(f"measured over:         {args.seconds:g} s each, after {warm:g} s of warm-up")
        print(f"idle python:           {floor:6.1f} ms/s")
        print(
            f"teleclaude board:      {cost:6.1f} ms/s  ({cost / 10:.1f} % of a core; "
            f"interval {args.interval:g} s)"
        )
        print(f"board above idle:      {cost - floor:6.1f} ms/s  (aim: at most 20 ms/s)")
    finally:
        Tmux(socket).kill_server()
        Path(os.environ.get("TMUX_TMPDIR", "/tmp"), f"tmux-{os.getuid()}", socket).unlink(missing_ok=True)
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
