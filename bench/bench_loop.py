"""How much of `teleclaude run`'s wall time is the loop's own, and how much does `--parallel N` save?

    PYTHONPATH=. python bench/bench_loop.py [--work 3] [--items 10] [--parallel 3,5] [--tmpdir DIR]

Each subject gets its own throwaway repository: a roadmap of `--items` independent prepared items, stand-in
agent CLIs whose every step takes `--work` seconds (`FAKE_AGENT_STEP_SECONDS`) and whose turns end by their
Stop hook (`FAKE_AGENT=hook`), and no timer set in teleclaude.toml (the defaults). `teleclaude run` and
`teleclaude run --parallel N` run one after another in the same process, so each parallel wall time is a
ratio of the serial one measured beside it. Printed per subject:

- wall time, the steps done, Σ work (steps × W) and the loop's overhead, (wall − Σ work) / wall;
- for the parallel runs, wall / serial wall, and its ideal ⌈items / N⌉ / items (10 items on 3 lanes take
  4 rounds: 0.40), which only a run with no cost of its own beside the steps reaches (its first start and
  its end count once in both runs, so they lift the ratio above it); and the time a step of its longest
  lane took, beside a serial step's;
- dispatch latency: from a worker's Stop hook (its turn-end event) to the next worker's first typed byte
  (the next session's `delivered_at`; same item under --parallel), p50 and p95 from the stored sessions;
- the serial wall time by part, from the stored timestamps: the workers' starts (session created, or for a
  worker started ahead of its step the last worker's Stop hook, to command typed), their turns (typed to the
  Stop hook: W and the stand-in's own work), the loop's step from a hook to the next session, and the rest;
  and how many workers were started ahead of their step (`[runtime] warm_start`), given it or ended unused;
- `run`'s own CPU (with its reaped children, e.g. tmux clients) per second, over the intervals where every
  live worker was running (none starting, none at its prompt), sampled from /proc every 0.25 s; a worker
  started ahead counts as running once PENDING for AHEAD seconds, so typing its step into it falls in
  that window too; over the quiet part of those intervals, where no worker was started, given its command
  or ended its turn in the last HANDOVER seconds (what watching busy workers costs, without the hand-overs
  between steps, which at W = 3 s and `--parallel 5` come more than once a second; a worker started ahead
  still waiting for its prompt a second after its start counts there); and over the whole run (its starts,
  planner calls and git included).

Never asserts; exits 0; deletes everything it made. The machine's load is printed: on a shared machine the
ratios move by a few hundredths from run to run.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from teleclaude.adapters.sessions_db import EVENTS, SESSIONS, SessionStore  # noqa: E402
from teleclaude.adapters.tmux import Tmux  # noqa: E402
from teleclaude.demo import stand_in  # noqa: E402
from teleclaude.demo.workers import PLAN, commit_all, git  # noqa: E402
from teleclaude.runtime.core.sessions import EventKind, SessionState  # noqa: E402

NAMES: tuple[str, ...] = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india")
NAMES += ("juliet", *(f"item-{n}" for n in range(11, 100)))
AHEAD = 1.0  # seconds: a session PENDING longer is a worker started ahead, at its prompt (`busy_and_quiet`)
HANDOVER = 1.0  # seconds after a worker's start, its command typed or an event: not quiet


@dataclass(frozen=True)
class Result:
    name: str
    wall: float
    code: int
    steps: int
    latencies: tuple[float, ...]
    parts: dict[str, float]  # the serial wall time cut at the stored timestamps (`breakdown`)
    ahead: tuple[int, int]  # workers started ahead: given their step, ended unused
    busy_cpu: float  # ms of CPU while every live worker was running
    busy_seconds: float
    quiet_cpu: float  # ms of CPU in the part of that time with no hand-over within HANDOVER seconds
    quiet_seconds: float
    cpu: float  # ms of CPU over the whole run (its last sample: its starts, its planner calls, its git)


def build(root: Path, socket: str, items: int) -> Path:
    """A repository with `items` independent prepared items; teleclaude.toml names only the tmux socket."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    slugs = NAMES[:items]
    roadmap = "# Roadmap\n\n## Bench\n" + "".join(f"- [ ] {slug} — Part {slug}.\n" for slug in slugs)
    (root / "todos").mkdir()
    (root / "todos" / "roadmap.md").write_text(roadmap)
    for slug in slugs:
        folder = root / "todos" / slug
        folder.mkdir()
        (folder / "requirements.md").write_text(f"# Requirements: {slug}\n\nPart {slug}.\n")
        (folder / "implementation-plan.md").write_text(PLAN.format(slug=slug, module=slug.replace("-", "_")))
    (root / "teleclaude.toml").write_text(f'[runtime]\nsocket = "{socket}"\n')
    commit_all(root, "Add the roadmap and the runtime settings")
    return root


def cpu_ms(pid: int) -> float:
    """CPU ms of `pid` and its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def busy_and_quiet(db: Path) -> tuple[bool, bool]:
    """(busy, quiet). Busy: every live session of the run is `running`, but for a worker started ahead of
    its step (PENDING for more than AHEAD seconds: at its prompt by then, waiting). Quiet: busy, and no
    session was created, given its command or had an event in the last HANDOVER seconds. Read-only and
    outside SessionStore: a reader that caught the file while the run creates it must not take it for a
    corrupt one and move it aside."""
    now = datetime.now(UTC)
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2)) as conn:
            rows = conn.execute(f"SELECT state, created_at, delivered_at FROM {SESSIONS}").fetchall()
            (last_event,) = conn.execute(f"SELECT max(at) FROM {EVENTS}").fetchone()
        states = [(SessionState(state), datetime.fromisoformat(created)) for state, created, _ in rows]
        moments = [
            datetime.fromisoformat(at) for _, created, delivered in rows for at in (created, delivered) if at
        ]
        moments += [datetime.fromisoformat(last_event)] if last_event else []
    except (sqlite3.Error, ValueError):
        return False, False
    live = [
        state
        for state, created in states
        if not state.is_final
        and not (state is SessionState.PENDING and (now - created).total_seconds() > AHEAD)
    ]
    busy = bool(live) and all(state is SessionState.RUNNING for state in live)
    return busy, busy and all((now - at).total_seconds() > HANDOVER for at in moments)


def timed_run(
    name: str,
    project: Path,
    env: dict[str, str],
    args: list[str],
    sample: Callable[[int, bool], None] | None = None,
) -> Result:
    """`teleclaude run ARGS` timed and sampled; `sample(pid, busy)` is called at every sample too (for
    bench_fleet.py's memory)."""
    db = Path(env["TELECLAUDE_DB"])
    process = subprocess.Popen(
        [sys.executable, "-m", "teleclaude", "run", *args],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # read as it comes: a run that prints more than a pipe holds (thirty workers) would block on its stdout
    output: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: output.extend(process.stdout or ()), daemon=True)
    reader.start()
    started = time.monotonic()
    busy_cpu = busy_seconds = quiet_cpu = quiet_seconds = 0.0
    last: tuple[float, float, bool, bool] | None = None
    used = 0.0
    try:
        while process.poll() is None:
            try:
                now, used = time.monotonic(), cpu_ms(process.pid)
                busy, quiet = busy_and_quiet(db) if db.exists() else (False, False)
            except (OSError, ValueError):
                break
            if sample is not None:
                sample(process.pid, busy)
            if last is not None and last[2] and busy:
                busy_seconds += now - last[0]
                busy_cpu += used - last[1]
            if last is not None and last[3] and quiet:
                quiet_seconds += now - last[0]
                quiet_cpu += used - last[1]
            last = (now, used, busy, quiet)
            time.sleep(0.25)
    finally:
        if process.poll() is None and sys.exc_info()[0] is not None:  # the bench was stopped
            process.terminate()
    process.wait()
    reader.join()
    out = "".join(output)
    wall = time.monotonic() - started
    if process.returncode != 0:
        first = next((line for line in out.splitlines() if line[:1].isupper() and ":" in line), "")
        print(f"run {' '.join(args) or '(serial)'} exited {process.returncode}: {first}", file=sys.stderr)
        if os.environ.get("BENCH_SHOW_RUN"):  # the whole of the run's output, to tell why
            print(out, file=sys.stderr)
    store = SessionStore(db)
    steps, latencies = dispatches(store, per_item=bool(args))
    parts = {} if args else breakdown(store, wall)
    code = process.returncode or 0
    return Result(
        name,
        wall,
        code,
        steps,
        latencies,
        parts,
        ahead(store),
        busy_cpu,
        busy_seconds,
        quiet_cpu,
        quiet_seconds,
        used,
    )


def turn_ends(store: SessionStore) -> dict[str, datetime]:
    """session id -> when its Stop hook ended its first turn."""
    ends: dict[str, datetime] = {}
    with closing(sqlite3.connect(store.path)) as db:
        query = f"SELECT session_id, at FROM {EVENTS} WHERE kind = ? AND detail LIKE '%hook%' ORDER BY id"
        for session_id, at in db.execute(query, [EventKind.TURN_ENDED.value]):
            ends.setdefault(session_id, datetime.fromisoformat(at))
    return ends


def breakdown(store: SessionStore, wall: float) -> dict[str, float]:
    """A serial run's wall time in its parts, summed over its delivered sessions (in order of delivery):
    each worker's start (its session created, or the last worker's Stop hook if it was started ahead
    before that, to its command typed), its turn (typed to its Stop hook: W and the stand-in's own), the
    loop's step to the next session (the hook to the next session created; none for one started ahead),
    and the rest (the run's own start and end, retries, workers started ahead and not used)."""
    sessions = sorted((s for s in store.sessions() if s.delivered_at), key=lambda s: s.delivered_at or 0)
    ends = turn_ends(store)
    parts = dict.fromkeys(("start", "turn", "to next", "rest"), 0.0)
    last_end = None
    for session, following in zip(sessions, [*sessions[1:], None], strict=True):
        end = ends.get(session.id)
        if session.delivered_at is None or end is None:
            continue
        began = max(session.created_at, last_end) if last_end else session.created_at
        parts["start"] += (session.delivered_at - began).total_seconds()
        parts["turn"] += (end - session.delivered_at).total_seconds()
        if following is not None:
            parts["to next"] += max((following.created_at - end).total_seconds(), 0.0)
        last_end = end
    parts["rest"] = wall - sum(parts.values())
    return parts


def ahead(store: SessionStore) -> tuple[int, int]:
    """Workers started before the last worker's Stop hook (ahead of their step): (given their step, ended
    unused)."""
    sessions = store.sessions()
    ends = sorted(turn_ends(store).values())
    used = sum(1 for s in sessions if s.delivered_at and any(s.created_at < e < s.delivered_at for e in ends))
    unused = sum(1 for s in sessions if s.delivered_at is None and s.state is SessionState.CANCELLED)
    return used, unused


def dispatches(
    store: SessionStore, per_item: bool, hooks: Mapping[str, datetime] | None = None
) -> tuple[int, tuple[float, ...]]:
    """(sessions delivered, seconds from each Stop-hook turn end to the next worker's first typed byte).
    `hooks`: when Stop hooks ran whose news the run stored later (a sandboxed worker's mark, recorded at
    the look that read it: bench_fleet.py reads their moments from the run's trace)."""
    sessions = [s for s in store.sessions() if s.delivered_at is not None]
    ends = turn_ends(store)
    for session_id, at in (hooks or {}).items():
        if session_id in ends:
            ends[session_id] = min(ends[session_id], at)
    latencies = []
    for session in sessions:
        end = ends.get(session.id)
        if end is None:
            continue
        following = [
            s.delivered_at
            for s in sessions
            if s.delivered_at and s.delivered_at > end and (not per_item or s.slug == session.slug)
        ]
        if following:
            latencies.append((min(following) - end).total_seconds())
    return len(sessions), tuple(latencies)


def percentile(values: tuple[float, ...], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=float, default=3.0, help="seconds of every step (W)")
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--parallel", default="3,5", help="comma-separated N of the --parallel runs")
    parser.add_argument("--tmpdir", default=None)
    options = parser.parse_args()
    items = max(1, min(options.items, len(NAMES)))
    base = Path(tempfile.mkdtemp(prefix="tc-bench-loop-", dir=options.tmpdir))
    env = {
        **os.environ,
        "PATH": f"{stand_in.install(base / 'bin')}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": str(base),
        "XDG_CONFIG_HOME": str(base / ".config"),
        "FAKE_AGENT": "hook",
        "FAKE_AGENT_STEP_SECONDS": str(options.work),
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@teleclaude.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@teleclaude.invalid",
    }
    subjects = [("serial", [])] + [
        (f"--parallel {n}", ["--parallel", n]) for n in options.parallel.split(",") if n.strip()
    ]
    results: list[Result] = []
    sockets: list[str] = []
    saved = dict(os.environ)
    os.environ.update(env)  # build's git calls use the bench identity
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` still cleans up (finally)
    load_before = os.getloadavg()[0]
    try:
        for name, args in subjects:
            socket = f"tc-bench-{secrets.token_hex(4)}"
            sockets.append(socket)
            folder = base / name.strip("-").replace(" ", "")
            project = build(folder / "project", socket, items)
            run_env = {**env, "TELECLAUDE_DB": str(folder / "teleclaude.db")}
            results.append(timed_run(name, project, run_env, args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
        for socket in sockets:
            Tmux(socket).kill_server()
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"teleclaude run, {items} independent items, stand-ins with the Stop hook, "
        f"W = {options.work:g} s a step, default timers"
    )
    print(f"{os.cpu_count()} cores, load {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    header = (
        f"{'subject':<13} {'wall s':>7} {'steps':>5} {'Σ work s':>8} {'overhead':>8} {'/ serial':>8} "
        f"{'dispatch p50':>12} {'p95 s':>6} {'CPU ms/s busy':>13} {'quiet':>6} {'whole run':>9}"
    )
    print(header)
    serial = results[0].wall if results else float("nan")
    for r in results:
        work = r.steps * options.work
        overhead = (r.wall - work) / r.wall if r.name == "serial" else float("nan")
        ratio = r.wall / serial
        cpu = r.busy_cpu / r.busy_seconds if r.busy_seconds else float("nan")
        quiet = r.quiet_cpu / r.quiet_seconds if r.quiet_seconds else float("nan")
        print(
            f"{r.name:<13} {r.wall:>7.1f} {r.steps:>5} {work:>8.1f} "
            f"{f'{overhead:.1%}' if r.name == 'serial' else '':>8} {ratio:>8.2f} "
            f"{percentile(r.latencies, 0.5):>12.2f} {percentile(r.latencies, 0.95):>6.2f} {cpu:>13.1f} "
            f"{quiet:>6.1f} {r.cpu / r.wall:>9.1f}" + ("" if r.code == 0 else f"  (exit {r.code})")
        )
    for r in results:
        if r.parts:
            steps = max(r.steps, 1)
            cut = ", ".join(
                f"{name} {value:.1f} s ({value / steps:.2f} s a step)" for name, value in r.parts.items()
            )
            print(f"{r.name} wall time by part: {cut}")
    for r in results[1:]:
        lanes = int(r.name.split()[-1])
        rounds = -(-items // lanes)  # the longest lane's items
        per_item = r.steps / items
        print(
            f"{r.name}: ideal {rounds / items:.2f} × serial ({rounds} rounds of {items} items, nothing but "
            f"the steps); {r.wall / (rounds * per_item):.2f} s a step of its longest lane, serial "
            f"{serial / max(results[0].steps, 1):.2f} s a step (both with the run's own start and end)"
        )
    for r in results[:1]:  # (under --parallel other items' hooks end meanwhile, and none is started ahead)
        used, unused = r.ahead
        print(f"{r.name}: workers started ahead of their step: {used} given it, {unused} ended unused")
    busy = [f"{r.name} {r.busy_seconds:.0f} s ({r.quiet_seconds:.0f} s quiet)" for r in results]
    print("time with every live worker running (the CPU columns' window): " + ", ".join(busy))
    print("aims: overhead ≤ 10 % serial; --parallel 3 ≤ 0.40 × serial; dispatch p95 ≤ 1 s; CPU ≤ 15 ms/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
