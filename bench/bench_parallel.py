"""How much does `teleclaude run --parallel 2` save over the serial run on the same roadmap?

    PYTHONPATH=. python bench/bench_parallel.py [--rounds 3] [--idle 1.0] [--tmpdir DIR]

Each round builds two identical throwaway repositories (the demo's roadmap plus a fourth independent item:
greeting, farewell after greeting, shouting, whisper; greeting and shouting both write NOTES.md, so the
second of them to be finalized conflicts and goes through next-fix-merge), then times `python -m teleclaude
run` on one and `python -m teleclaude run --parallel 2` on the other, in alternating order, with the stand-in
agent CLIs in a private tmux server. `--idle` is the runtime's idle_threshold: how long a worker must sit at
its prompt before its turn counts as ended, the fixed cost of every step. Prints the median and minimum wall
times and their ratio; deletes everything it made; never asserts; exits 0 (a run that fails is reported).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from teleclaude.adapters.tmux import Tmux  # noqa: E402
from teleclaude.demo import stand_in  # noqa: E402
from teleclaude.demo.workers import PLAN, commit_all, make_repository  # noqa: E402

SETTINGS = """[runtime]
socket = "{socket}"
idle_threshold = {idle}
poll_interval = 0.05
startup_timeout = 15
settle = 0.1
"""


def build(root: Path, socket: str, idle: float) -> Path:
    project = make_repository(root)
    roadmap = project / "todos" / "roadmap.md"
    roadmap.write_text(roadmap.read_text() + "- [ ] whisper — Lower-case variants.\n")
    (project / "todos" / "whisper").mkdir()
    (project / "todos" / "whisper" / "requirements.md").write_text("# Requirements: whisper\n\nWhisper.\n")
    (project / "todos" / "whisper" / "implementation-plan.md").write_text(
        PLAN.format(slug="whisper", module="whisper")
    )
    (project / "teleclaude.toml").write_text(SETTINGS.format(socket=socket, idle=idle))
    commit_all(project, "Add whisper and the runtime settings")
    return project


def timed_run(project: Path, env: dict[str, str], *args: str) -> tuple[float, int]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "teleclaude", "run", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:  # the report's first line says why
        lines = done.stdout.splitlines()
        first = next((line for line in lines if line[:1].isupper() and ":" in line), lines[-1:] or [""])
        print(f"run {' '.join(args) or '(serial)'} exited {done.returncode}: {first}", file=sys.stderr)
    return seconds, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=1.0)
    parser.add_argument("--tmpdir", default=None)
    options = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tc-bench-parallel-", dir=options.tmpdir))
    socket = f"tc-bench-{secrets.token_hex(4)}"
    env = {
        **os.environ,
        "PATH": f"{stand_in.install(base / 'bin')}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": str(base),
        "XDG_CONFIG_HOME": str(base / ".config"),
        "FAKE_AGENT_SHARED": "greeting,shouting",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@teleclaude.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@teleclaude.invalid",
    }
    times: dict[str, list[float]] = {"serial": [], "--parallel 2": []}
    failures: list[str] = []
    saved = dict(os.environ)
    os.environ.update(env)  # make_repository's git calls use the bench identity
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` still cleans up (finally)
    try:
        for round_ in range(options.rounds):
            order = ["serial", "--parallel 2"] if round_ % 2 == 0 else ["--parallel 2", "serial"]
            for name in order:
                folder = base / f"r{round_}-{name.strip('-').replace(' ', '')}"
                project = build(folder / "project", socket, options.idle)  # the database stays outside
                run_env = {**env, "TELECLAUDE_DB": str(folder / "teleclaude.db")}
                seconds, code = timed_run(project, run_env, *name.split()[:2] if name != "serial" else ())
                times[name].append(seconds)
                if code != 0:
                    failures.append(f"round {round_ + 1} {name}: exit {code}")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        Tmux(socket).kill_server()
        shutil.rmtree(base, ignore_errors=True)
    cores = os.cpu_count()
    load = os.getloadavg()[0]
    print(f"teleclaude run, 4 items (one dependency, one merge conflict), idle_threshold {options.idle} s")
    print(f"{options.rounds} rounds, {cores} cores, load {load:.1f}")
    print(f"{'subject':<14} {'median s':>9} {'min s':>7}")
    for name, values in times.items():
        print(f"{name:<14} {statistics.median(values):>9.1f} {min(values):>7.1f}")
    serial, parallel = (statistics.median(times[n]) for n in ("serial", "--parallel 2"))
    print(
        f"--parallel 2 / serial: {parallel / serial:.2f} (median), "
        f"{min(times['--parallel 2']) / min(times['serial']):.2f} (min)"
    )
    for failure in failures:
        print(f"FAILED {failure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
