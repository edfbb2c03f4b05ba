"""The CPU each test used, whatever else the machine runs: a pytest plugin (Linux, root, cgroup v1 cpuacct).

    PYTHONPATH=bench .venv/bin/python -m pytest -p cpu_per_test -n 4 --dist worksteal
    .venv/bin/python bench/cpu_per_test.py [FILE]        # the sums by tier, folder, file and test
    .venv/bin/python bench/cpu_per_test.py FILE --longest >tests/longest.txt   # the whole suite's order

Each test runs with its worker process in a cgroup of its own; what it starts inherits the cgroup, tmux
servers and the agent CLIs in their panes included (tmux daemonizes, so no rusage of the test reaches
them). One JSON line per test goes to CPU_PER_TEST (default /tmp/cpu-per-test.jsonl): its id, CPU seconds,
wall seconds, worker and when it began (`began`, epoch seconds); of the CPU, `own`: the test's process
itself (its fixtures, the runtime's looks in it, the scripted model server's threads) and `waited`: the
children it waited for (tmux clients, git, `teleclaude` calls); the rest ran detached (tmux servers, the
CLIs, their hooks and MCP servers). A module-scoped server is counted in the test that started it. Wall
times say how loaded the machine was; the CPU is what the suite itself costs, the sum of it over two cores
is the least wall time a run can take.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
OUT = Path(os.environ.get("CPU_PER_TEST", "/tmp/cpu-per-test.jsonl"))
_counted = [0]


def _enter(group: Path) -> None:
    (group / "cgroup.procs").write_text(str(os.getpid()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _counted[0] += 1
    group = CPUACCT / f"cpu-per-test-{os.getpid()}-{_counted[0]}"
    group.mkdir()
    _enter(group)
    began, started, own, waited = time.time(), time.monotonic(), time.process_time(), _children()
    try:
        return (yield)
    finally:
        wall = time.monotonic() - started
        own, waited = time.process_time() - own, _children() - waited
        _enter(CPUACCT)
        cpu = int((group / "cpuacct.usage").read_text()) / 1e9
        with contextlib.suppress(OSError):  # a process it started is still in it (a module-scoped server)
            group.rmdir()
        worker = os.environ.get("PYTEST_XDIST_WORKER", "")
        row = {"id": item.nodeid, "cpu": round(cpu, 3), "wall": round(wall, 3), "worker": worker}
        row["began"] = round(began, 3)  # the clock's time: which long tests started late
        row |= {"own": round(own, 3), "waited": round(waited, 3)}
        with OUT.open("a") as out:
            out.write(json.dumps(row) + "\n")


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def report(rows: list[dict]) -> None:
    """CPU and wall seconds summed by tier, folder and file; the 30 tests that used the most CPU."""

    def tier(test_id: str) -> str:
        folder = test_id.split("/")[1]
        return folder if folder in ("runtime", "realcli") else "the rest (--fast)"

    for name, key in (
        ("tier", tier),
        ("folder", lambda i: i.split("/")[1]),
        ("file", lambda i: i.split("::")[0]),
    ):
        sums: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for row in rows:
            total = sums[key(row["id"])]
            total[0] += 1
            total[1] += row["cpu"]
            total[2] += row["wall"]
        print(f"{'cpu s':>8} {'wall s':>8} {'tests':>5}  {name}")
        for label, (count, cpu, wall) in sorted(sums.items(), key=lambda kv: -kv[1][1])[:30]:
            print(f"{cpu:8.1f} {wall:8.1f} {count:5d}  {label}")
        print()
    for row in sorted(rows, key=lambda row: -row["cpu"])[:30]:
        print(f"{row['cpu']:8.2f} {row['wall']:8.1f}  {row['id']}")


def longest(rows: list[dict], least: float = 5.0) -> None:
    """The tests whose wall time was `least` seconds or more (their mean over the runs in the file), longest
    first: tests/longest.txt, the order the whole suite hands its tests out in (tests/longest_first.py)."""
    walls: dict[str, list[float]] = collections.defaultdict(list)
    for row in rows:
        walls[row["id"]].append(row["wall"])
    means = {test: sum(seen) / len(seen) for test, seen in walls.items()}
    print(f"# SECONDS NODE_ID: the tests of {least:g} s or more in whole-suite runs (mean): cpu_per_test.py")
    for test, seconds in sorted(means.items(), key=lambda kv: (-kv[1], kv[0])):
        if seconds >= least:
            print(f"{seconds:.1f} {test}")


if __name__ == "__main__":
    args = [arg for arg in sys.argv[1:] if arg != "--longest"]
    path = Path(args[0]) if args else OUT
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    if "--longest" in sys.argv:
        longest(rows)
    else:
        report(rows)
