"""Quota foresight: how many turns does `teleclaude run` lose to an agent's limit with it, and without it?

    PYTHONPATH=. python bench/bench_quota.py [--items 10] [--share 25] [--window 30] [--tmpdir DIR]

Two runs of the same throwaway repository (bench_loop.build: `--items` independent prepared items), one after
the other, with stand-in agent CLIs whose turns end by their Stop hook. Every row of the matrix prefers
claude, then codex, then gemini, and claude has a small rate-limit window: each of its turns uses `--share`
percent of it, and it resets `--window` seconds after its first turn (the stand-in's
`FAKE_AGENT_WINDOW_CLAUDE`); a turn that starts on a used-up window is lost (its StopFailure hook: claude is
out until the reset, and the run gives the step to the next agent).

- foresight on: the stand-in claude reports its window after each turn through `teleclaude hook statusline`,
  as Claude Code's status line does (`FAKE_AGENT_CLAUDE=hook,usage`), and the planner moves steps off claude
  once it is over `[matrix] headroom` (90 %, the default);
- foresight off: the same window, unreported (`FAKE_AGENT_CLAUDE=hook`): claude is seen only when a turn is
  lost.

Printed per run: wall time, items delivered, steps started per agent, and turns lost to the limit (sessions
a limit ended: a `rate_limited` event). Never asserts; exits 0; deletes everything it made.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench_loop import build  # noqa: E402

from teleclaude.adapters.sessions_db import EVENTS, SessionStore  # noqa: E402
from teleclaude.adapters.tmux import Tmux  # noqa: E402
from teleclaude.config.matrix import DEFAULT_MATRIX  # noqa: E402
from teleclaude.demo import stand_in  # noqa: E402
from teleclaude.demo.workers import commit_all  # noqa: E402
from teleclaude.runtime.core.sessions import EventKind  # noqa: E402

ROW = '["claude:med", "codex:med", "gemini:med"]'


@dataclass(frozen=True)
class Result:
    name: str
    wall: float
    code: int
    delivered: int
    steps: Counter[str]
    lost: int


def run(name: str, project: Path, env: dict[str, str]) -> Result:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "teleclaude", "run"], cwd=project, env=env, capture_output=True, text=True
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        first = next((line for line in done.stdout.splitlines() if line[:1].isupper() and ":" in line), "")
        print(f"{name}: run exited {done.returncode}: {first}", file=sys.stderr)
    sessions = SessionStore(env["TELECLAUDE_DB"]).sessions()
    roadmap = (project / "todos" / "roadmap.md").read_text()
    return Result(
        name,
        wall,
        done.returncode,
        len(re.findall(r"^- \[x\]", roadmap, re.MULTILINE)),
        Counter(s.agent for s in sessions if s.delivered_at is not None),
        limited(Path(env["TELECLAUDE_DB"])),
    )


def limited(db: Path) -> int:
    """The sessions whose turn a limit ended (a `rate_limited` event; the run ends such a session after)."""
    with closing(sqlite3.connect(db)) as conn:
        query = f"SELECT COUNT(DISTINCT session_id) FROM {EVENTS} WHERE kind = ?"
        return conn.execute(query, [EventKind.RATE_LIMITED.value]).fetchone()[0]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--share", type=float, default=25.0, help="percent of claude's window each turn uses")
    parser.add_argument("--window", type=float, default=30.0, help="seconds from its first turn to its reset")
    parser.add_argument("--tmpdir", default=None)
    options = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tc-bench-quota-", dir=options.tmpdir))
    env = {
        **os.environ,
        "PATH": f"{stand_in.install(base / 'bin')}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": str(base),
        "XDG_CONFIG_HOME": str(base / ".config"),
        "FAKE_AGENT": "hook",
        "FAKE_AGENT_WINDOW_CLAUDE": f"{options.share:g}:{options.window:g}",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@teleclaude.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@teleclaude.invalid",
    }
    subjects = [("foresight on", "hook,usage"), ("foresight off", "hook")]
    results: list[Result] = []
    sockets: list[str] = []
    saved = dict(os.environ)
    os.environ.update(env)  # build's git calls use the bench identity
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` still cleans up (finally)
    try:
        for name, modes in subjects:
            socket = f"tc-bench-{secrets.token_hex(4)}"
            sockets.append(socket)
            folder = base / name.replace(" ", "-")
            project = build(folder / "project", socket, options.items)
            matrix = "".join(f"{task} = {ROW}\n" for task in DEFAULT_MATRIX)
            with (project / "teleclaude.toml").open("a") as settings:
                settings.write(f"[matrix]\n{matrix}")
            commit_all(project, "Every step: claude first")
            run_env = {
                **env,
                "TELECLAUDE_DB": str(folder / "teleclaude.db"),
                "FAKE_AGENT_CLAUDE": modes,
                "FAKE_AGENT_WINDOW_FILE": str(folder / "window.json"),
            }
            results.append(run(name, project, run_env))
    finally:
        os.environ.clear()
        os.environ.update(saved)
        for socket in sockets:
            Tmux(socket).kill_server()
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"teleclaude run, {options.items} independent items, stand-ins with the Stop hook; every step "
        f"prefers claude, whose window takes {options.share:g} % a turn and resets {options.window:g} s "
        "after its first"
    )
    print(f"{'run':<14} {'wall s':>7} {'delivered':>9} {'lost turns':>10}  steps by agent")
    for r in results:
        steps = ", ".join(f"{agent} {count}" for agent, count in sorted(r.steps.items()))
        print(
            f"{r.name:<14} {r.wall:>7.1f} {r.delivered:>6}/{options.items:<2} {r.lost:>10}  {steps}"
            + ("" if r.code == 0 else f"  (exit {r.code})")
        )
    print("expected: fewer lost turns with foresight on, the same items delivered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
