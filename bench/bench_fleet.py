"""What does a worker cost `teleclaude run` at 1, 10 and 30 workers, here and on computers over ssh?

    PYTHONPATH=. python bench/bench_fleet.py [--workers 1,10,30] [--work 120] [--where local,ssh]
                                             [--per-computer 15] [--tmpdir DIR] [--traces DIR]
                                             [--sandbox auto|bwrap|off]

Each subject is `teleclaude run --parallel N` on a throwaway repository of N independent prepared items
(bench_loop.py's `build` and `timed_run`: its sampling, its busy window, its dispatch latencies), with
stand-in agent CLIs whose every step takes `--work` seconds and ends by their Stop hook. `ssh`: the items'
worktree steps run on loopback sshd computers (tests/loopback_sshd.py, `MaxSessions 10`), `--per-computer`
lanes each (30 workers: two computers of 15, so each needs two ssh connections). Printed per subject:

- run CPU per busy worker: the run's own CPU (with its reaped children) per second while every live worker
  was running, divided by N (ms/s);
- dispatch p50/p95 (a Stop hook to the next worker of the item typed into; the hook's own moment, also for a
  sandboxed worker's, whose news the run stores when it reads its mark: from the run's trace);
- memory (PSS, MB, the largest sample): the run process; its live children (tmux or ssh clients: a
  `wait-for` per worker); the project's supervisor (`-`: none ran; a run starts none, its workers have no
  parent: it watches them itself); the hook processes alive at once (at rest: none);
- wall time against the ideal, 3 × W (build, review, finalize; every item at once);
- the machine's load (1-minute average) at the subject's start and end.

Each row is also printed to stderr as soon as its subject is measured.

Never asserts; exits 0; deletes everything it made. The machine's load is printed: on a shared machine
compare the ratios (per worker at 30 against at 10), not the absolute numbers.
"""

from __future__ import annotations

import argparse
import getpass
import math
import os
import secrets
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench_loop import Result, build, dispatches, percentile, timed_run, turn_ends  # noqa: E402

from teleclaude.adapters import trust_store  # noqa: E402
from teleclaude.adapters.sessions_db import SessionStore  # noqa: E402
from teleclaude.adapters.tmux import Tmux  # noqa: E402
from teleclaude.agents import NAMES  # noqa: E402
from teleclaude.demo import stand_in  # noqa: E402
from teleclaude.demo.workers import commit_all  # noqa: E402
from tests.loopback_sshd import Loopback, clone, launch, shut  # noqa: E402

STEPS = 3  # build, review, finalize
# A dispatch's stages, from the run's trace (TELECLAUDE_TRACE, runtime/trace.py): each named by the mark that
# ends it; the first begins at the Stop hook's record, the last ends at the next worker's first typed byte.
# `deliver` is the next worker's start up to its prompt wait: for one started ahead, the step taken up or not
# (continuing.py); for a cold one, its CLI's start too.
STAGES = ("heard", "through", "ask", "answered", "ended", "submitted", "deliver", "prompt", "typed")


@dataclass
class Memory:
    """The largest PSS seen of each part, in kB."""

    db: str
    run: int = 0
    clients: int = 0
    supervisor: int = 0
    hooks: int = 0
    at_rest: int = 0  # run + clients + supervisor in one busy sample
    supervised: bool = False  # a supervisor process of the database was seen (a run starts none: see below)

    def sample(self, pid: int, busy: bool) -> None:
        run = _pss(pid)
        clients = sum(_pss(child) for child in _children(pid))
        supervisor = hooks = 0
        for other in _pids():
            if other == pid:
                continue
            argv = _cmdline(other)
            if "teleclaude" not in " ".join(argv) or _env(other).get("TELECLAUDE_DB") != self.db:
                continue
            if "supervise" in argv:
                supervisor += _pss(other)
                self.supervised = True
            elif "hook" in argv:
                hooks += _pss(other)
        self.run, self.clients = max(self.run, run), max(self.clients, clients)
        self.supervisor, self.hooks = max(self.supervisor, supervisor), max(self.hooks, hooks)
        if busy:
            self.at_rest = max(self.at_rest, run + clients + supervisor)


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _env(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except OSError:
        return {}
    return dict(part.split("=", 1) for part in raw.split("\0") if "=" in part)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def trace_marks(trace: Path) -> dict[tuple[str, str], list[float]]:
    """(what, key) -> the moments of the run's trace marked so (runtime/trace.py)."""
    marks: dict[tuple[str, str], list[float]] = {}
    try:
        lines = trace.read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        stamp, _, what, name = (line.split(" ", 3) + ["", "", "", ""])[:4]
        marks.setdefault((what, name), []).append(float(stamp))
    return marks


def hooks_run(marks: dict[tuple[str, str], list[float]]) -> dict[str, datetime]:
    """session id -> when its Stop hook ran, for those whose news the run stored only when it read their mark
    (a sandboxed worker's channel): the first of each."""
    return {key: datetime.fromtimestamp(min(at), UTC) for (what, key), at in marks.items() if what == "hook"}


def stages(db: Path, trace: Path) -> dict[str, tuple[float, ...]]:
    """Each stage of every dispatch (STAGES), in seconds: from the mark that ends the stage before (the
    Stop hook's own moment for the first) to its own. A dispatch missing a mark (a start refused, retried)
    is left out."""
    marks = trace_marks(trace)
    if not marks:
        return {}
    store = SessionStore(db)
    sessions = [s for s in store.sessions() if s.delivered_at is not None]
    ends = turn_ends(store)
    for session_id, ran in hooks_run(marks).items():
        if session_id in ends:
            ends[session_id] = min(ends[session_id], ran)
    found: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for session in sessions:
        end = ends.get(session.id)
        if end is None:
            continue
        following = [
            s for s in sessions if s.slug == session.slug and s.delivered_at and s.delivered_at > end
        ]
        if not following:
            continue
        after = min(following, key=lambda s: s.delivered_at or end)
        assert after.delivered_at is not None
        typed = after.delivered_at.timestamp()
        moments = [end.timestamp()]
        for stage in STAGES:
            if stage == "typed":
                moments.append(typed)
                continue
            key = (
                session.id
                if stage == "heard"
                else after.id
                if stage in ("deliver", "prompt")
                else session.slug
            )
            at = next(
                (t for t in marks.get((stage, key), []) if moments[-1] - 0.001 <= t <= typed + 0.001), None
            )
            if at is None:
                break
            moments.append(at)
        else:
            for stage, begun, done in zip(STAGES, moments[:-1], moments[1:], strict=True):
                found[stage].append(done - begun)
    return {stage: tuple(values) for stage, values in found.items()}


def stages_line(where: str, workers: int, found: dict[str, tuple[float, ...]]) -> str:
    counted = len(next(iter(found.values()), ()))
    parts = " ".join(
        f"{stage} {percentile(values, 0.5):.2f}/{percentile(values, 0.95):.2f}"
        for stage, values in found.items()
    )
    return f"{where + ' ' + str(workers):<9} stages p50/p95 s ({counted} dispatches): {parts}"


def computers_toml(loopbacks: list[tuple[Loopback, Path, Path]], lanes: list[int]) -> str:
    text = ""
    for number, ((loopback, remote, remote_bin), count) in enumerate(zip(loopbacks, lanes, strict=True)):
        text += f"""
[computers.box{number}]
host = "127.0.0.1"
user = "{getpass.getuser()}"
port = {loopback.port}
identity_file = "{loopback.user_key}"
project = "{remote}"
path = "{remote_bin}:/usr/local/bin:/usr/bin:/bin"
agents = {{ {", ".join(f'{name} = "{name}"' for name in NAMES)} }}
ssh_options = ["UserKnownHostsFile={loopback.known_hosts}", "StrictHostKeyChecking=yes"]
lanes = {count}
"""
    return text


def line(where: str, workers: int, r: Result, m: Memory, load: tuple[float, float], ideal: float) -> str:
    """One subject's row of the table."""
    cpu = r.busy_cpu / r.busy_seconds if r.busy_seconds else float("nan")
    quiet = r.quiet_cpu / r.quiet_seconds if r.quiet_seconds else float("nan")  # no hand-over within 1 s
    return (
        f"{where + ' ' + str(workers):<9} {cpu:>8.1f} {cpu / workers:>7.2f} "
        f"{percentile(r.latencies, 0.5):>8.2f} {percentile(r.latencies, 0.95):>6.2f} "
        f"{m.run / 1024:>6.1f} {m.clients / 1024:>7.1f} "
        f"{f'{m.supervisor / 1024:.1f}' if m.supervised else '-':>7} "
        f"{m.hooks / 1024:>5.1f} "
        f"{m.at_rest / 1024:>7.1f} {r.wall:>7.1f} {r.wall / ideal:>7.2f} {load[0]:>4.0f}-{load[1]:<4.0f}"
        + ("" if r.code == 0 else f"  (exit {r.code})")
        + f"  busy {r.busy_seconds:.0f} s (of it quiet {r.quiet_seconds:.0f} s, {quiet:.1f} ms/s)"
        + f", {r.steps} steps"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,10,30")
    parser.add_argument("--work", type=float, default=120.0, help="seconds of every step (W)")
    parser.add_argument("--where", default="local,ssh")
    parser.add_argument("--per-computer", type=int, default=15, help="lanes of each ssh computer")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--traces", default=None, help="a folder to keep each subject's run trace in")
    parser.add_argument("--sandbox", default=None, help="[runtime] sandbox (default: the project's default)")
    options = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tc-bench-fleet-", dir=options.tmpdir))
    agents_env = {"FAKE_AGENT": "hook", "FAKE_AGENT_STEP_SECONDS": str(options.work)}
    env = {
        **os.environ,
        "PATH": f"{stand_in.install(base / 'bin')}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": str(base),
        "XDG_CONFIG_HOME": str(base / ".config"),
        **agents_env,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@teleclaude.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@teleclaude.invalid",
    }
    rows: list[tuple[str, int, Result, Memory, tuple[float, float]]] = []
    traced: list[str] = []
    sockets: list[str] = []
    loopbacks: list[Loopback] = []
    saved = dict(os.environ)
    os.environ.update(env)  # build's git calls and the trust store use the bench's
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` still cleans up (finally)
    load_before = os.getloadavg()[0]
    try:
        for where in options.where.split(","):
            for workers in (int(n) for n in options.workers.split(",")):
                socket = f"tc-bench-{secrets.token_hex(4)}"
                sockets.append(socket)
                folder = base / f"{where}{workers}"
                project = build(folder / "project", socket, workers)
                settings = project / "teleclaude.toml"
                text = settings.read_text()
                if options.sandbox:  # (a stand-in's Python may be out of reach in a sandbox over ssh)
                    text = text.replace("[runtime]\n", f'[runtime]\nsandbox = "{options.sandbox}"\n', 1)
                text += "".join(
                    f"\n[runtime.agents.{name}]\nenv = {{ "
                    + ", ".join(f'{k} = "{v}"' for k, v in agents_env.items())
                    + " }\n"
                    for name in NAMES
                )
                if where == "ssh":
                    count = math.ceil(workers / options.per_computer)
                    there = []
                    for number in range(count):
                        (folder / f"box{number}").mkdir()
                        loopback = launch(folder / f"box{number}")
                        if loopback is None:
                            print("sshd could not be started: no ssh subjects", file=sys.stderr)
                            break
                        loopbacks.append(loopback)
                        remote_bin = stand_in.install(folder / f"box{number}" / "bin", python=sys.executable)
                        there.append((loopback, folder / f"box{number}" / "project", remote_bin))
                    lanes = [
                        min(options.per_computer, workers - n * options.per_computer) for n in range(count)
                    ]
                    text += computers_toml(there, lanes[: len(there)])
                settings.write_text(text)
                db = folder / "teleclaude.db"
                trust_store.record(settings, settings.read_bytes(), {"TELECLAUDE_DB": str(db)})
                commit_all(project, "The bench's agents and computers")
                if where == "ssh":
                    for _, remote, _ in there:
                        clone(project, remote)
                memory = Memory(str(db))
                trace = folder / "trace.txt"
                run_env = {**env, "TELECLAUDE_DB": str(db), "TELECLAUDE_TRACE": str(trace)}
                load = os.getloadavg()[0]
                result = timed_run(
                    f"{where} {workers}", project, run_env, ["--parallel", str(workers)], memory.sample
                )
                # from each Stop hook's own moment: a sandboxed worker's is stored when its mark is read
                hooks = hooks_run(trace_marks(trace))
                result = replace(result, latencies=dispatches(SessionStore(db), True, hooks)[1])
                rows.append((where, workers, result, memory, (load, os.getloadavg()[0])))
                print(line(*rows[-1], STEPS * options.work), file=sys.stderr, flush=True)  # if stopped later
                traced.append(stages_line(where, workers, stages(db, trace)))
                if options.traces and trace.exists():
                    Path(options.traces).mkdir(parents=True, exist_ok=True)
                    shutil.copy(trace, Path(options.traces) / f"trace-{where}{workers}.txt")
                print(traced[-1], file=sys.stderr, flush=True)
                for loopback in loopbacks:
                    shut(loopback)
                loopbacks.clear()
    finally:
        os.environ.clear()
        os.environ.update(saved)
        for loopback in loopbacks:
            shut(loopback)
        for socket in sockets:
            Tmux(socket).kill_server()
        shutil.rmtree(base, ignore_errors=True)
    print(
        "teleclaude run --parallel N, N independent items, stand-ins with the Stop hook, "
        f"W = {options.work:g} s"
    )
    print(f"{os.cpu_count()} cores, load {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(
        f"{'subject':<9} {'CPU ms/s':>8} {'/worker':>7} {'disp p50':>8} {'p95 s':>6} {'run MB':>6} "
        f"{'clients':>7} {'superv.':>7} {'hooks':>5} {'at rest':>7} {'wall s':>7} {'/ ideal':>7} {'load':>9}"
    )
    for row in rows:
        print(line(*row, STEPS * options.work))
    for text in traced:
        print(text)
    if not any(row[3].supervised for row in rows):
        print(
            "superv. -: no supervisor ran. `teleclaude run` watches its own workers (they have no parent);"
            " the supervisor process serves workers an agent started over MCP"
        )
    print("targets at 30 on 2 cores: ≤ 0.5 ms/s a busy worker, dispatch p95 ≤ 1 s, memory at rest ≤ 150 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
