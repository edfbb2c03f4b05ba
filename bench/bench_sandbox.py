"""What the sandbox adds to a worker's start: its paths found and its argv built (`worker_layout`,
`bwrap_argv`), and the command started inside bubblewrap instead of directly, side by side.

    PYTHONPATH=. python bench/bench_sandbox.py [--runs 30]

A throwaway repository with an item's worktree and a private HOME. The command is `python -c pass` (a
stand-in's start up to its first instruction; a real CLI's own start, seconds of node, is the same in both).
Prints the median and 90th percentile of each in milliseconds, and the median CPU (counted in a cgroup
where one can be made: steadier than wall time on a loaded machine). Aim: at most 50 ms more with the sandbox.
Never asserts; exits 0 (1 when bubblewrap does not work here).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from teleclaude.adapters import sandbox
from teleclaude.agents import PROFILES
from teleclaude.runtime.core.sandbox import bwrap_argv


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def repository(base: Path) -> tuple[Path, Path]:
    root = base / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "one")
    for slug in ("greeting", "farewell", "shouting"):  # other items' worktrees and branches
        git(root, "worktree", "add", "-q", f"trees/{slug}", "-b", slug)
    return root, root / "trees" / "greeting"


def timed(action, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        action()
        times.append((time.perf_counter() - began) * 1000)
    return times


CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1, as bench/cpu_per_test.py counts (root)


class Counted:
    """Commands run in a cgroup of their own, so that the CPU of all they start is counted: bubblewrap's
    processes inside its PID namespace never reach this process's rusage. Where no cgroup can be made, the
    rusage of the children waited for is counted instead (less than a sandboxed start uses)."""

    def __init__(self) -> None:
        self.group: Path | None = CPUACCT / f"bench-sandbox-{os.getpid()}"
        try:
            self.group.mkdir()
        except OSError:
            self.group = None

    def run(self, argv: list[str], cwd: Path, cpu: list[float]) -> None:
        before = self._used()
        group = self.group
        enter = (lambda: (group / "cgroup.procs").write_text(str(os.getpid()))) if group else None
        subprocess.run(argv, cwd=cwd, check=True, preexec_fn=enter)  # noqa: PLW1509 (the child only joins)
        cpu.append((self._used() - before) * 1000)

    def _used(self) -> float:
        if self.group is not None:
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return children.ru_utime + children.ru_stime

    def close(self) -> None:
        group = self.group
        if group is None:
            return
        for _ in range(100):  # its last processes may still be going
            with contextlib.suppress(OSError):
                group.rmdir()
                return
            time.sleep(0.02)


def line(name: str, times: list[float], cpu: list[float] | None = None) -> str:
    p90 = sorted(times)[int(len(times) * 0.9) - 1]
    text = f"{name:<34} median {statistics.median(times):7.1f} ms   p90 {p90:7.1f} ms"
    return text + (f"   cpu median {statistics.median(cpu):6.1f} ms" if cpu else "")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    found = sandbox.probe(os.environ)
    if not found.usable:
        print(f"bubblewrap does not work here: {found.problem}")
        return 1
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        home = base / "home"
        home.mkdir()
        root, tree = repository(base)
        channel = sandbox.open_channel(home / "teleclaude.db", "bench")
        command = [sys.executable, "-c", "pass"]

        def layout():
            return sandbox.worker_layout(
                workdir=tree,
                project=root,
                home=str(home),
                needs=PROFILES["claude"].sandbox,
                binary=sys.executable,
                path=os.environ.get("PATH", ""),
                channel=channel,
                tmux_folder=f"/tmp/tmux-{os.getuid()}",
                merges=False,
                network=True,
            )

        boxed = bwrap_argv(found.bwrap, layout(), command)
        plain: list[float] = []
        built: list[float] = []
        inside: list[float] = []
        cpu: dict[str, list[float]] = {"plain": [], "built": [], "inside": []}
        counted = Counted()
        for _ in range(runs):  # side by side: a load that changes meanwhile weighs on both alike
            plain += timed(lambda: counted.run(command, tree, cpu["plain"]), 1)
            began = time.process_time()
            built += timed(lambda: bwrap_argv(found.bwrap, layout(), command), 1)
            cpu["built"].append((time.process_time() - began) * 1000)
            inside += timed(lambda: counted.run(boxed, tree, cpu["inside"]), 1)
        counted.close()
        total = [b + i for b, i in zip(built, inside, strict=True)]
        total_cpu = [b + i for b, i in zip(cpu["built"], cpu["inside"], strict=True)]
        print(line("started directly", plain, cpu["plain"]))
        print(line("sandbox paths + argv", built, cpu["built"]))
        print(line("started inside bubblewrap", inside, cpu["inside"]))
        print(line("sandboxed start, all told", total, total_cpu))
        added = statistics.median(total) - statistics.median(plain)
        added_cpu = statistics.median(total_cpu) - statistics.median(cpu["plain"])
        print(
            f"added by the sandbox: {added:.1f} ms (median), {added_cpu:.1f} ms of CPU, "
            f"at load {os.getloadavg()[0]:.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
