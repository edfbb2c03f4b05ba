"""What the sandbox adds to a worker's start: its paths found and its argv built (`worker_layout`,
`bwrap_argv`), and the command started inside bubblewrap instead of directly, side by side.

    PYTHONPATH=. python bench/bench_sandbox.py [--runs 30]

A throwaway repository with an item's worktree and a private HOME. The command is `python -c pass` (a
stand-in's start up to its first instruction; a real CLI's own start, seconds of node, is the same in both).
Prints the median and 90th percentile of each in milliseconds, and the median CPU (this process's and its
children's: steadier than wall time on a loaded machine). Aim: at most 50 ms more with the sandbox.
Never asserts; exits 0 (1 when bubblewrap does not work here).
"""

from __future__ import annotations

import argparse
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
    for slug in ("greeting", "farewell", "shouting"):  # other items' branches: each is protected
        git(root, "worktree", "add", "-q", f"trees/{slug}", "-b", slug)
    return root, root / "trees" / "greeting"


def timed(action, runs: int, cpu: list[float] | None = None) -> list[float]:
    """Wall milliseconds of each run of `action`; its CPU milliseconds (this process's and its children's,
    which hold better than wall time on a loaded machine) appended to `cpu`."""
    times = []
    for _ in range(runs):
        began, used = time.perf_counter(), _cpu()
        action()
        times.append((time.perf_counter() - began) * 1000)
        if cpu is not None:
            cpu.append((_cpu() - used) * 1000)
    return times


def _cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


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
        for _ in range(runs):  # side by side: a load that changes meanwhile weighs on both alike
            plain += timed(lambda: subprocess.run(command, cwd=tree, check=True), 1, cpu["plain"])
            built += timed(lambda: bwrap_argv(found.bwrap, layout(), command), 1, cpu["built"])
            inside += timed(lambda: subprocess.run(boxed, cwd=tree, check=True), 1, cpu["inside"])
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
