"""What does the [checks] gate add to a finalize, beyond its commands' own time?

    PYTHONPATH=. python bench/bench_gate.py [--rounds 9]

Each round builds two demo repositories with the scripted workers up to the finalize of one item (not
timed): one without [checks], one with `gate = ["true"]` (trusted). Then `teleclaude finalize` of each is
timed, side by side in alternating order, with the project lock's holds timed too. Printed per subject:
the median and minimum of the finalize, of the time the lock was held, and of the gate commands' own time;
then the gate's overhead (gated finalize - plain finalize - the commands' own time; target <= 0.2 s) and
the ratio of lock holds (target <= 1.1 x: the lock is not held while the gate runs). It never asserts and
always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from teleclaude.adapters import fs, trust_store  # noqa: E402
from teleclaude.demo.workers import Workers, commit_all, make_repository  # noqa: E402
from teleclaude.planner import api as app  # noqa: E402
from teleclaude.planner import finalize as finalizing  # noqa: E402
from teleclaude.planner import gate  # noqa: E402
from teleclaude.planner.core.model import Dispatch, Step  # noqa: E402
from teleclaude.planner.finalize import Finalized  # noqa: E402

SLUG = "greeting"
HELD: list[float] = []


@contextlib.contextmanager
def timed_lock(common_dir: Path, timeout: float = 60.0, shared: bool = False) -> Iterator[None]:
    with _project_lock(common_dir, timeout, shared):
        began = time.perf_counter()
        try:
            yield
        finally:
            HELD.append(time.perf_counter() - began)


_project_lock = fs.project_lock


def approved(root: Path, gated: bool) -> Path:
    """A demo repository whose item SLUG the scripted workers took up to its finalize."""
    project = make_repository(root)
    if gated:
        settings = project / "teleclaude.toml"
        settings.write_text('[checks]\ngate = ["true"]\n')
        trust_store.record(settings, settings.read_bytes())
        commit_all(project, "A gate")
    workers = Workers(project)
    while True:
        action = app.next_work(SLUG, cwd=project)
        assert isinstance(action, Dispatch), action
        if action.step is Step.FINALIZE:
            return project
        workers.run(action)


def finalize_once(project: Path) -> tuple[float, float]:
    """(the finalize's wall time, the time the lock was held)."""
    HELD.clear()
    began = time.perf_counter()
    done = finalizing.finalize(SLUG, cwd=project)
    took = time.perf_counter() - began
    if not isinstance(done, Finalized):
        raise SystemExit(f"finalize failed: {done}")
    return took, sum(HELD)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-gate-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    os.environ.update(
        HOME=str(base / "home"), XDG_CONFIG_HOME=str(base / "config"), TELECLAUDE_DB=str(base / "db.sqlite")
    )
    finalizing.fs.project_lock = timed_lock
    results: dict[str, list[tuple[float, float]]] = {"off": [], "true gate": []}
    gate_time: list[float] = []
    try:
        for round_ in range(args.rounds):
            projects = {
                name: approved(base / f"{round_}-{index}", index == 1) for index, name in enumerate(results)
            }
            order = list(results) if round_ % 2 == 0 else list(reversed(results))
            for name in order:
                results[name].append(finalize_once(projects[name]))
            run = gate.run_gate(("true",), base, 60)
            gate_time.append(run.seconds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{'subject':<12} {'finalize':>16} {'lock held':>16}")
    for name, rows in results.items():
        walls, holds = [r[0] for r in rows], [r[1] for r in rows]
        print(
            f"{name:<12} {statistics.median(walls):8.3f} (min {min(walls):.3f}) "
            f"{statistics.median(holds):8.3f} (min {min(holds):.3f})"
        )
    plain, gated = results["off"], results["true gate"]
    command = statistics.median(gate_time)
    overhead = statistics.median(g[0] for g in gated) - statistics.median(p[0] for p in plain) - command
    least = min(g[0] for g in gated) - min(p[0] for p in plain) - min(gate_time)
    held = statistics.median(g[1] for g in gated) / statistics.median(p[1] for p in plain)
    print(f"`true` alone: {command:.3f} s (median of run_gate on it)")
    verdict = "OK" if overhead <= 0.2 else "MISS"
    print(f"gate overhead: {overhead:.3f} s (min {least:.3f}); target <= 0.2 s: {verdict}")
    print(f"lock held, gated / plain: {held:.2f} x; target <= 1.1 x: {'OK' if held <= 1.1 else 'MISS'}")
    print(f"load: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
