"""Large inputs and the run loop, each next to a floor measured in the same run, with its aim and a verdict.

    PYTHONPATH=. python bench/bench_scale.py [--items 100000] [--tasks 200000] [--rounds 15]
                                             [--run-seconds 10]

    floor S   `python -c pass` + `git status` in the same small repository
    claim     `teleclaude next-work` (no slug) on a roadmap of `--items` items claiming the first open one;
              the roadmap was claimed before and edited back by hand, one line changed besides the marker,
              as in real use                                                           aim: <= 1 s
    plan      `teleclaude next-work SLUG` judging a plan of `--tasks` build tasks after one task was ticked
                                                                                       aim: <= 1 s
    floor M   mistune's own parse of the roadmap and the plan (3 runs)
    cold      the same claim with the parse cache deleted: both files parsed from scratch   aim: <= 1.3 x M
    limits    a 3,000-deep nested roadmap, 2,500,000 characters without an item, an 18 MB roadmap: each
              refused with FILE_ERROR (docs/design.md, Limits)             aim: FILE_ERROR within 1 s
    floor T   the CPU of one `tmux list-panes` client (the least a loop that looks at tmux once pays)
    run       `teleclaude run`'s own CPU (with its children) per second while a worker is busy
                                                                                       aim: <= 50 ms/s

Medians of `--rounds` rounds, interleaved with their floors; peak memory (max RSS) of each process; never
asserts; deletes its temp dir; exits 0.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))

from bench_next_work import default_tmpdir, git, plan_text, slug_for  # noqa: E402

from tests.servers import stop  # noqa: E402


def timed(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str, float]:
    """(wall ms, CPU ms of the child, its stdout's first line, its peak memory in MB)."""
    start = time.perf_counter()
    process = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    out = process.stdout.read()
    process.stdout.close()
    _, _, usage = os.wait4(process.pid, 0)  # this child's own rusage (CPU and peak RSS), not all children's
    process.returncode = 0  # reaped above
    wall = (time.perf_counter() - start) * 1000
    cpu = (usage.ru_utime + usage.ru_stime) * 1000
    return wall, cpu, out.decode(errors="replace").split("\n", 1)[0], usage.ru_maxrss / 1024


def big_roadmap(items: int) -> tuple[str, str]:
    """`items` items in sections of 50; the first is open and prepared, the rest open or done."""
    lines = ["# Roadmap", ""]
    for i in range(items):
        if i % 50 == 0:
            lines += ["", f"## Area {i // 50 + 1}", ""]
        mark = " " if i == 0 or i % 3 else "x"
        lines.append(f"- [{mark}] {slug_for(i)} — Item {i} of the large roadmap, with `code` and *words*.")
    return "\n".join(lines) + "\n", slug_for(0)


def build(base: Path, items: int, tasks: int, env: dict[str, str]) -> tuple[Path, str]:
    project = base / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    git(project, "config", "user.name", "bench")
    git(project, "config", "user.email", "bench@invalid")
    roadmap, slug = big_roadmap(items)
    (project / "todos" / slug).mkdir(parents=True)
    (project / "todos" / "roadmap.md").write_text(roadmap)
    (project / "todos" / slug / "requirements.md").write_text("# Requirements\n\n- It works.\n")
    (project / "todos" / slug / "implementation-plan.md").write_text(plan_text(slug, tasks))
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "large roadmap and plan")
    first = subprocess.run(
        [sys.executable, "-m", "teleclaude", "next-work", "--cwd", str(project)],
        env=env,
        capture_output=True,
        check=False,
    )
    print(f"setup: {first.stdout.decode().splitlines()[0] if first.stdout else first.stderr.decode()[-300:]}")
    return project, slug


def unclaim(project: Path, slug: str, round_: int = 0) -> None:
    """Put the item back to `[ ]` and edit one description near the middle (a different text each round),
    as a user's edit would: the roadmap is never the one the last call parsed."""
    path = project / "todos" / "roadmap.md"
    text = path.read_text().replace(f"- [>] {slug} ", f"- [ ] {slug} ", 1)
    middle = text.index("\n- [", len(text) // 2) + 1
    end = text.index("\n", middle)
    line = text[middle:end].split(" (edited", 1)[0]
    path.write_text(f"{text[:middle]}{line} (edited {round_}){text[end:]}")


def toggle_task(plan: Path, round_: int) -> None:
    """Tick or untick one task near the middle: one chunk of the plan changes."""
    text = plan.read_text()
    middle = text.index("- [", len(text) // 2)
    mark = text[middle + 3]
    plan.write_text(text[: middle + 3] + (" " if mark == "x" else "x") + text[middle + 4 :])


def run_cpu(base: Path, seconds: float, env: dict[str, str]) -> tuple[float, float, str] | None:
    """(CPU ms per second of `teleclaude run` and its children, CPU ms of one tmux client, a note)."""
    if not shutil.which("tmux"):
        return None
    from teleclaude.demo import stand_in
    from teleclaude.demo.scenario import commit_all, make_repository

    socket = f"tc-bench-{secrets.token_hex(4)}"
    project = make_repository(base / "run-project")
    (project / "teleclaude.toml").write_text(f'[runtime]\nsocket = "{socket}"\n')
    commit_all(project, "runtime settings")
    bin_dir = stand_in.install(base / "bin")
    run_env = {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}", "FAKE_AGENT": "hang"}
    process = subprocess.Popen(
        [sys.executable, "-m", "teleclaude", "run"],
        cwd=project,
        env=run_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tmux = ["tmux", "-L", socket]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # a worker pane running the busy stand-in
            panes = subprocess.run([*tmux, "list-panes", "-a"], capture_output=True, check=False)
            if panes.returncode == 0 and panes.stdout.strip():
                break
            time.sleep(0.2)
        else:
            return None
        time.sleep(3)  # past the start-up: the worker has its command and is busy
        before = _cpu_of(process.pid)
        time.sleep(seconds)
        used = (_cpu_of(process.pid) - before) / seconds
        floor = statistics.median(timed([*tmux, "list-panes", "-a"], base, env)[1] for _ in range(15))
        return used, floor, "1 busy worker"
    finally:
        stop(process, 15)
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)


def _cpu_of(pid: int) -> float:
    """CPU ms of `pid` and its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


MISTUNE_BOTH = """
import sys, mistune
parse = mistune.create_markdown(renderer=None)
for path in sys.argv[1:]:
    parse(open(path, encoding="utf-8").read())
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--run-seconds", type=float, default=10.0)
    options = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="teleclaude-scale-", dir=default_tmpdir()))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "TELECLAUDE_DEBUG")}
    env.update(
        TELECLAUDE_DB=str(base / "teleclaude.db"),
        XDG_CONFIG_HOME=str(base / "config"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    )
    os.environ.update({k: env[k] for k in ("TELECLAUDE_DB", "XDG_CONFIG_HOME")})
    print(
        f"teleclaude scale benchmark: {options.items:,} roadmap items, {options.tasks:,} plan tasks, "
        f"{options.rounds} rounds; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    samples: dict[str, list[float]] = {}
    memory: dict[str, float] = {}
    answers: dict[str, str] = {}

    def sample(key: str, args: list[str], cwd: Path) -> None:
        wall, _, answers[key], peak = timed(args, cwd, env)
        samples.setdefault(key, []).append(wall)
        memory[key] = max(memory.get(key, 0.0), peak)

    try:
        project, slug = build(base, options.items, options.tasks, env)
        tree, plan = (
            project / "trees" / slug,
            project / "trees" / slug / "todos" / slug / "implementation-plan.md",
        )
        claim = [sys.executable, "-m", "teleclaude", "next-work", "--cwd", str(project)]
        judge = [sys.executable, "-m", "teleclaude", "next-work", slug, "--cwd", str(project)]
        status = ["git", "status", "--porcelain=v2", "--branch", "-z"]
        for round_ in range(options.rounds):
            unclaim(project, slug, round_)
            sample("claim", claim, project)
            toggle_task(plan, round_)
            sample("plan", judge, project)
            sample("pass", [sys.executable, "-c", "pass"], project)
            sample("git", status, tree)
        for cold_round in range(3):  # the whole parse cache deleted: both files parsed from scratch
            unclaim(project, slug, options.rounds + cold_round)
            shutil.rmtree(project / ".git" / "teleclaude-cache", ignore_errors=True)
            sample("cold", claim, project)
            sample(
                "mistune",
                [sys.executable, "-c", MISTUNE_BOTH, str(project / "todos" / "roadmap.md"), str(plan)],
                project,
            )
        claimed = (project / "todos" / "roadmap.md").read_text().count(f"- [>] {slug} ")
        refused = {}
        for name, roadmap in (
            ("deep", "".join("  " * i + f"- [ ] d{i}\n" for i in range(3000))),  # 3,000 levels of nesting
            ("wide", "x" * 2_500_000 + "\n- [ ] after-a-long-paragraph\n"),  # past MAX_CHUNK_CHARS at once
            ("huge", ("- [ ] an-item — " + "y" * 100 + "\n") * 160_000),  # 18 MB: past the 16 MB file cap
        ):
            folder = base / name
            (folder / "todos").mkdir(parents=True)
            git(folder, "init", "-q")
            (folder / "todos" / "roadmap.md").write_text(roadmap)
            sample(name, [*claim[:-1], str(folder)], folder)
            refused[name] = answers[name].startswith("ERROR: FILE_ERROR")
            shutil.rmtree(folder, ignore_errors=True)
        running = run_cpu(base, options.run_seconds, env)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    med = {name: statistics.median(values) for name, values in samples.items()}
    floor = med["pass"] + med["git"]
    print(f"answers: claim {answers['claim']!r} (claimed: {claimed == 1}); plan {answers['plan']!r}")
    print()
    print(f"{'measurement':<46}{'median':>10}{'ratio':>10}  {'peak MB':>8}  {'aim':<22}verdict")
    print("-" * 104)

    def line(
        name: str, value: str, ratio: str = "", peak: str = "", aim: str = "", verdict: str = ""
    ) -> None:
        print(f"{name:<46}{value:>10}{ratio:>10}  {peak:>8}  {aim:<22}{verdict}")

    line("S  python -c pass + git status (small repo)", f"{floor:.0f} ms", aim="floor S")
    for key, name in (
        ("claim", f"claim in a {options.items:,}-item roadmap"),
        ("plan", f"judge a {options.tasks:,}-task plan"),
    ):
        verdict = "OK" if med[key] <= 1000 else "MISS"
        ratio = f"{med[key] / floor:.1f}x S"
        line(f"   {name}", f"{med[key]:.0f} ms", ratio, f"{memory[key]:.0f}", "<= 1 s", verdict)
    line(
        "M  mistune alone on both files (3 runs)",
        f"{med['mistune']:.0f} ms",
        peak=f"{memory['mistune']:.0f}",
        aim="floor M",
    )
    cold_ratio = med["cold"] / med["mistune"]
    line(
        "   the claim, parse cache deleted (3 runs)",
        f"{med['cold']:.0f} ms",
        f"{cold_ratio:.2f}x M",
        f"{memory['cold']:.0f}",
        "<= 1.3 x M",
        "OK" if cold_ratio <= 1.3 else "MISS",
    )
    for key, name in (
        ("deep", "3,000-deep nested roadmap"),
        ("wide", "2,500,000 characters without an item"),
        ("huge", "18 MB roadmap"),
    ):
        line(
            f"   {name}",
            f"{med[key]:.0f} ms",
            f"{med[key] / floor:.1f}x S",
            f"{memory[key]:.0f}",
            "FILE_ERROR, <= 1 s",
            "OK" if refused[key] and med[key] <= 1000 else f"MISS: {answers[key][:40]!r}",
        )
    if running is None:
        line("   teleclaude run: not measured (no tmux, or no worker started)", "", verdict="MISS")
    else:
        used, tmux_floor, note = running
        line("T  one tmux list-panes client (CPU)", f"{tmux_floor:.1f} ms", aim="floor T")
        line(
            f"   teleclaude run, own CPU/s ({note})",
            f"{used:.0f} ms",
            f"{used / tmux_floor:.1f}x T",
            aim="<= 50 ms (5 % of 1 CPU)",
            verdict="OK" if used <= 50 else "MISS",
        )
    print(f"\nload at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
