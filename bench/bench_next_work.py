"""How close is `next_work` to the cost of the one `git status` it cannot avoid?

    PYTHONPATH=. python bench/bench_next_work.py [--files 20000] [--items 1000] [--tasks 300]
                                                [--parse-items 10000] [--repeat N] [--quick] [--profile]

Builds a large throwaway repository in a temp dir (many small committed files, a long roadmap whose first
open item is prepared with a long implementation plan), calls next_work once so `trees/<slug>` exists (the
steady state: next-build), then measures each face of next_work next to its floor, interleaved round by
round so that both see the same machine noise:

    floor A   one `git status --porcelain=v2 --branch -z` in the worktree (what teleclaude runs)
    library   app.next_work(slug, cwd=project), warm                      target <= 1.1 x floor A
    floor P   floor A + the MCP round trip of a tool that does no git (agent_status)
    mcp       call_tool("teleclaude__next_work") on a running stdio server target <= 1.1 x floor P
    floor B   `python -c pass` + floor A
    cli       `python -m teleclaude next-work SLUG --cwd PROJECT`        target <= 2.5 x floor B
    cli_any   the same without SLUG (the cold path: the roadmap read too) target <= 2.0 x floor B
    parse     parse_roadmap on a 10,000-item roadmap, caches cleared      target ~ mistune alone (<= 1.2 x)
    info      MCP agent_status (the protocol's own round trip, no git) and the library call with its parse
              caches cleared (what every CLI process, or a server after an edit, pays)

Prints one line per measurement (median, min, ratio to its floor, target) and deletes the temp dir (under
/dev/shm when there is room: creating 40,000 files on a slow disk would dominate the run). It never asserts
and always exits 0: it is a measuring instrument, not a test. `--profile` adds a cProfile of the library
call (warm and cold), a cProfile of one CLI process and a `-X importtime` summary.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

WORDS = (
    "auth",
    "billing",
    "export",
    "cache",
    "search",
    "upload",
    "invoice",
    "token",
    "session",
    "report",
    "audit",
    "queue",
    "worker",
    "index",
    "schema",
    "payment",
    "profile",
    "notify",
    "email",
    "import",
    "metrics",
    "webhook",
    "storage",
    "sync",
    "render",
    "layout",
    "router",
)


# --- building the repository ----------------------------------------------------------------------------


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode(errors="replace")


def write_tree(root: Path, files: int) -> None:
    """`files` small Python files in nested folders: src/pkgNN/modNN/fileNNNNN.py (about 50 per folder)."""
    per_folder, folders_per_pkg = 50, 20
    made: set[Path] = set()
    for i in range(files):
        folder_index = i // per_folder
        folder = (
            root
            / "src"
            / f"pkg{folder_index // folders_per_pkg:03d}"
            / f"mod{folder_index % folders_per_pkg:02d}"
        )
        if folder not in made:
            folder.mkdir(parents=True, exist_ok=True)
            made.add(folder)
        (folder / f"file{i:05d}.py").write_text(
            f'"""File {i}."""\n\nVALUE = {i}\n\n\ndef f{i}():\n    return VALUE\n'
        )


def slug_for(i: int) -> str:
    return f"{WORDS[i % len(WORDS)]}-{WORDS[(i * 7 + 3) % len(WORDS)]}-{i}"


def roadmap_text(items: int, seed: int = 7) -> tuple[str, str]:
    """A roadmap of `items` task items with varied bullets, markers, nesting, dependencies and noise.

    The first ~30 % are done (`[x]`/`[X]`, a few with free-text titles), then the first open item (returned
    as the second value, its dependencies all done), then a mix. Code blocks and block quotes hold fake
    items that a parser must not count. No `[>]`: next_work claims the first open item itself.
    """
    rng = random.Random(seed)
    lines = ["# Roadmap", "", "Work items in order. Continuation lines belong to the item above.", ""]
    done_until = max(1, int(items * 0.3))
    first_open = slug_for(done_until)
    seps = (" — ", " - ", ": ", " ")
    bullets = ("-", "*", "+")
    bullet = "-"
    emitted = 0
    i = 0
    while emitted < items:
        if emitted % 25 == 0:
            lines += ["", f"## Area {emitted // 25 + 1}", ""]
            bullet = bullets[(emitted // 25) % 3]
        if emitted and emitted % 50 == 0:
            lines += [
                "```markdown",
                f"- [ ] fake-in-code-{emitted} — not an item",
                "```",
                "",
                f"> - [ ] quoted-{emitted} — not an item either",
                "",
            ]
        slug = slug_for(i)
        if i < done_until:
            mark = "X" if rng.random() < 0.1 else "x"
        elif i == done_until:
            mark = " "
        else:
            mark = rng.choices(" xX", weights=(70, 25, 5))[0]
        after = ""
        if i == done_until:
            after = f" (after: {slug_for(done_until - 1)})"
        elif i > done_until and rng.random() < 0.3:
            deps = sorted({slug_for(rng.randrange(0, i)) for _ in range(rng.randint(1, 3))})
            after = f" (after: {', '.join(deps)})"
        description = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10))).capitalize() + "."
        if i < done_until and rng.random() < 0.03:
            lines.append(
                f"{bullet} [{mark}] Old cleanup of the {rng.choice(WORDS)} code"
            )  # free-text history
        elif i % 97 == 5:
            lines.append(f"{i % 9 + 1}. [{mark}] {slug}{after}{rng.choice(seps)}{description}")
        else:
            lines.append(f"{bullet} [{mark}] {slug}{after}{rng.choice(seps)}{description}")
        if rng.random() < 0.15:
            lines.append(f"  Continuation: {' '.join(rng.choice(WORDS) for _ in range(8))}.")
        emitted += 1
        i += 1
        if i % 97 != 6 and rng.random() < 0.1 and emitted < items:  # a nested sub-item under a bullet item
            child = slug_for(i)
            child_mark = "x" if i < done_until else rng.choice(" x")
            lines.append(f"  {bullet} [{child_mark}] {child}{rng.choice(seps)}Sub-item of the one above.")
            emitted += 1
            i += 1
    lines.append("")
    return "\n".join(lines), first_open


def plan_text(slug: str, tasks: int, seed: int = 11) -> str:
    """Groups 1-4 with `tasks` build tasks (nested ones included), ~90 % ticked, plus a Group 5 checklist."""
    rng = random.Random(seed)
    lines = [f"# Implementation plan: {slug}", "", "Overview paragraph with `code` and *emphasis*.", ""]
    per_group = [tasks // 4 + (1 if g < tasks % 4 else 0) for g in range(4)]
    names = ("Foundations", "Storage", "Interfaces", "Tests and docs")
    for group, count in enumerate(per_group, start=1):
        lines += [f"## Group {group}: {names[group - 1]}", ""]
        for t in range(count):
            ticked = rng.random() < 0.9 and not (group == 4 and t == count - 1)
            indent = "  " if t and rng.random() < 0.15 else ""
            lines.append(
                f"{indent}- [{'x' if ticked else ' '}] Task {group}.{t + 1}: {rng.choice(WORDS)} "
                f"the {rng.choice(WORDS)} `{rng.choice(WORDS)}()` path"
            )
            if t % 40 == 20:
                lines += ["", "```python", "- [ ] not a task (in code)", "```", ""]
        lines.append("")
    lines += ["## Group 5: After the build", "", "- [ ] Announce it", "- [ ] Update the changelog", ""]
    return "\n".join(lines)


def build_project(base: Path, files: int, items: int, tasks: int) -> tuple[Path, str]:
    project = base / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    git(project, "config", "user.name", "teleclaude bench")
    git(project, "config", "user.email", "bench@teleclaude.invalid")
    git(project, "config", "commit.gpgsign", "false")
    write_tree(project, files)
    roadmap, slug = roadmap_text(items)
    (project / "todos" / slug).mkdir(parents=True)
    (project / "todos" / "roadmap.md").write_text(roadmap)
    (project / "todos" / slug / "requirements.md").write_text(
        f"# Requirements: {slug}\n\n" + "\n".join(f"- The system shall {w} things." for w in WORDS) + "\n"
    )
    (project / "todos" / slug / "implementation-plan.md").write_text(plan_text(slug, tasks))
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "Large project with a prepared roadmap item")
    return project, slug


def settle_index(where: Path) -> None:
    """Let a normal `git status` rewrite the index so no entry stays racily clean (as after any commit)."""
    git(where, "status", "--porcelain")


# --- measuring ------------------------------------------------------------------------------------------


def timed(function: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = function()
    return (time.perf_counter() - start) * 1000, result


async def timed_async(coroutine_function) -> tuple[float, object]:
    start = time.perf_counter()
    result = await coroutine_function()
    return (time.perf_counter() - start) * 1000, result


def run_ok(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, check=False)


def first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def command_of(text: str) -> str:
    for line in text.splitlines():
        if line.strip().startswith("command="):
            return line.strip().removeprefix("command=").strip('",')
    return "?"


class Samples(dict):
    def add(self, name: str, ms: float) -> None:
        self.setdefault(name, []).append(ms)

    def process(self, name: str, function: Callable[[], object]) -> None:
        """The wall time of `function` as `name`, and the CPU time (user + system) of the processes it ran
        and waited for as `name` + "_cpu": far steadier than wall time on a loaded machine."""
        used = children_cpu()
        self.add(name, timed(function)[0])
        self.add(f"{name}_cpu", (children_cpu() - used) * 1000)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def clear_caches(project: Path) -> None:
    """Forget every parse: the caches in this process and the one on disk."""
    from teleclaude.adapters import parse_cache
    from teleclaude.planner.core import markdown, plan, roadmap

    roadmap.parse_roadmap.cache_clear()
    plan.parse_plan.cache_clear()
    markdown.blocks.cache_clear()
    parse_cache._last.clear()
    roadmap._recent = {}  # the in-process chunk summaries
    plan._recent = {}
    shutil.rmtree(project / ".git" / parse_cache.FOLDER, ignore_errors=True)


async def measure(
    project: Path,
    slug: str,
    env: dict[str, str],
    repeat: int,
    parse_repeat: int,
    parse_text: str,
    log_file: Path,
) -> tuple[Samples, list[str]]:
    import mistune
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    from teleclaude.adapters import parse_cache
    from teleclaude.planner import api as app
    from teleclaude.planner.core.render import to_text
    from teleclaude.planner.core.roadmap import parse_roadmap

    tree = project / "trees" / slug
    notes: list[str] = []
    git_env = {**env, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}  # adapters/git.py run_git
    status_args = ["git", "status", "--porcelain=v2", "--branch", "-z"]  # adapters/git.py status, no pathspec
    cli_args = [sys.executable, "-m", "teleclaude", "next-work", slug, "--cwd", str(project)]
    cli_any_args = [sys.executable, "-m", "teleclaude", "next-work", "--cwd", str(project)]
    mistune_parse = mistune.create_markdown(renderer=None)

    def git_status():
        done = run_ok(status_args, tree, git_env)
        return done.returncode

    def library():
        return app.next_work(slug, cwd=project)

    def library_cold() -> float:
        """ms of the library call with no parse cache at all (the first call after the cache is deleted);
        the on-disk cache is set aside for it and put back, so the CLI lines see the steady state."""
        folder = project / ".git" / parse_cache.FOLDER
        aside = project.parent / "cache-aside"
        shutil.rmtree(aside, ignore_errors=True)
        if folder.exists():
            folder.rename(aside)
        clear_caches(project)
        ms = timed(lambda: app.next_work(slug, cwd=project))[0]
        shutil.rmtree(folder, ignore_errors=True)
        if aside.exists():
            aside.rename(folder)
        return ms

    def parse_cold():
        clear_caches(project)
        return parse_roadmap(parse_text)

    # Warm-ups (not timed): imports, first parse, first git status, one CLI run to fill the page cache.
    git_status()
    notes.append(f"library: {first_line(to_text(library()))} {command_of(to_text(library()))}")
    cli = run_ok(cli_args, project, env)
    notes.append(
        f"cli: exit {cli.returncode}, {first_line(cli.stdout.decode())} {command_of(cli.stdout.decode())}"
    )
    parsed = parse_cold()
    notes.append(
        f"parse: {len(parsed.items)} items, {len(parsed.problems)} problems, "
        f"{len(parse_text) / 1e6:.2f} MB of text"
    )
    mistune_parse(parse_text)

    transport = StdioTransport(
        sys.executable,
        ["-m", "teleclaude", "mcp"],
        env=env,
        cwd=str(project),
        keep_alive=False,
        log_file=log_file,
    )
    samples = Samples()
    async with Client(transport) as client:

        async def call():
            return await client.call_tool("teleclaude__next_work", {"slug": slug, "cwd": str(project)})

        warm = await call()
        text = warm.content[0].text
        notes.append(f"mcp: {first_line(text)} {command_of(text)}")
        for _ in range(repeat):
            samples.process("git", git_status)
            samples.add("library", timed(library)[0])
            samples.add("mcp", (await timed_async(call))[0])
            samples.add(
                "mcp_ping", (await timed_async(lambda: client.call_tool("teleclaude__agent_status", {})))[0]
            )
            samples.process("git", git_status)  # twice per round: floor A sits next to every subject
            samples.add("library_cold", library_cold())  # refills the in-process caches for the next round
            samples.process("pass", lambda: run_ok([sys.executable, "-c", "pass"], project, env))
            samples.process("cli", lambda: run_ok(cli_args, project, env))
            samples.process("cli_any", lambda: run_ok(cli_any_args, project, env))
    # Parsing last: clearing the caches here must not turn the warm library calls above into cold ones.
    for _ in range(parse_repeat):
        samples.add("mistune", timed(lambda: mistune_parse(parse_text))[0])
        samples.add("parse", timed(parse_cold)[0])
    return samples, notes


def report(samples: Samples, parse_items: int) -> None:
    med = {name: statistics.median(values) for name, values in samples.items()}
    low = {name: min(values) for name, values in samples.items()}
    med["floorB"] = med["pass"] + med["git"]
    low["floorB"] = low["pass"] + low["git"]
    med["floorB_cpu"] = med["pass_cpu"] + med["git_cpu"]
    low["floorB_cpu"] = low["pass_cpu"] + low["git_cpu"]
    # A server cannot answer faster than its transport plus the git status it runs.
    med["floorP"] = med["mcp_ping"] + med["git"]
    low["floorP"] = low["mcp_ping"] + low["git"]
    rows = [
        # name, key, floor key, target ratio, target text
        ("A  git status --porcelain=v2 (worktree)", "git", None, None, "floor A"),
        ("   library app.next_work (warm)", "library", "git", 1.1, "<= 1.1 x A"),
        ("   MCP call_tool agent_status (no git; info)", "mcp_ping", "git", None, "info"),
        ("P  git status + MCP round trip", "floorP", None, None, "floor P"),
        ("   MCP call_tool next_work (warm)", "mcp", "floorP", 1.1, "<= 1.1 x P"),
        ("   library, parse caches cleared (info)", "library_cold", "git", None, "info"),
        ("   python -c pass", "pass", None, None, ""),
        ("B  python -c pass + git status", "floorB", None, None, "floor B"),
        ("   CLI python -m teleclaude next-work SLUG", "cli", "floorB", 2.5, "<= 2.5 x B"),
        ("   CLI python -m teleclaude next-work (no slug)", "cli_any", "floorB", 2.0, "<= 2.0 x B"),
        ("B' the same floor in CPU time (user + system)", "floorB_cpu", None, None, "floor B'"),
        ("   CLI next-work SLUG, CPU time", "cli_cpu", "floorB_cpu", 2.5, "<= 2.5 x B'"),
        ("   CLI next-work (no slug), CPU time", "cli_any_cpu", "floorB_cpu", 2.0, "<= 2.0 x B'"),
        (f"M  mistune parse, {parse_items:,} items", "mistune", None, None, "floor M"),
        (f"   parse_roadmap, {parse_items:,} items (cold)", "parse", "mistune", 1.2, "~1 x M (<= 1.2)"),
    ]
    header = (
        f"{'measurement':<44}{'median ms':>10}{'min ms':>9}{'ratio':>8}{'(min)':>8}  {'target':<16}verdict"
    )
    print(header)
    print("-" * len(header))
    for name, key, floor, target, target_text in rows:
        ratio = ratio_min = verdict = ""
        if floor:
            r = med[key] / med[floor]
            ratio, ratio_min = f"{r:.2f}x", f"{low[key] / low[floor]:.2f}x"
            verdict = "info" if target is None else "OK" if r <= target else "MISS"
        print(
            f"{name:<44}{med[key]:>10.1f}{low[key]:>9.1f}{ratio:>8}{ratio_min:>8}  {target_text:<16}{verdict}"
        )


# --- profiling (--profile) ------------------------------------------------------------------------------


def profile(project: Path, slug: str, env: dict[str, str], calls: int = 20) -> None:
    from teleclaude.planner import api as app

    app.next_work(slug, cwd=project)
    for title, before in (("warm", lambda: None), ("parse caches cleared", lambda: clear_caches(project))):
        profiler = cProfile.Profile()
        for _ in range(calls):
            before()
            profiler.enable()
            app.next_work(slug, cwd=project)
            profiler.disable()
        print(f"\ncProfile of {calls} library calls ({title}), by cumulative time; ms per call:")
        print_stats(profiler, calls, 16)

    done = run_ok(
        [
            sys.executable,
            "-m",
            "cProfile",
            "-o",
            str(project.parent / "cli.prof"),
            "-m",
            "teleclaude",
            "next-work",
            slug,
            "--cwd",
            str(project),
        ],
        project,
        env,
    )
    if done.returncode == 0 and (project.parent / "cli.prof").exists():
        print("\ncProfile of one CLI process (imports included), by cumulative time; ms:")
        print_stats(pstats.Stats(str(project.parent / "cli.prof")), 1, 22)

    done = run_ok(
        [sys.executable, "-X", "importtime", "-m", "teleclaude", "next-work", slug, "--cwd", str(project)],
        project,
        env,
    )
    rows = []
    for line in done.stderr.decode().splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line.split("|")  # "import time:  self | cumulative | [indent]name"
        rows.append((int(parts[1]), int(parts[0].split(":")[1]), parts[2][1:]))
    top_level = [r for r in rows if not r[2].startswith(" ")]
    total = sum(r[0] for r in top_level)
    print(
        f"\n-X importtime of the CLI: {total / 1000:.1f} ms of imports (inflated by the tracing); "
        "top-level by cumulative:"
    )
    for cumulative, _, name in sorted(top_level, reverse=True)[:8]:
        print(f"  {cumulative / 1000:7.1f} ms  {name}")
    print("  heaviest single modules by self time:")
    for _, self_us, name in sorted(rows, key=lambda r: r[1], reverse=True)[:12]:
        print(f"  {self_us / 1000:7.1f} ms self  {name.strip()}")


def print_stats(stats: cProfile.Profile | pstats.Stats, calls: int, limit: int) -> None:
    """A compact table: cumulative and own time per call in ms, call count, function."""
    table = pstats.Stats(stats) if isinstance(stats, cProfile.Profile) else stats
    table.strip_dirs()
    # (file, line, function) -> (cc, nc, tt, ct, callers): the table print_stats reads, which typeshed leaves
    # out; get_stats_profile() would key it by bare function name, merging every __init__
    entries: dict[tuple[str, int, str], tuple[int, int, float, float, dict]] = table.stats  # type: ignore[attr-defined]
    rows = sorted(entries.items(), key=lambda kv: kv[1][3], reverse=True)
    print(f"  {'cum ms':>8} {'own ms':>8} {'calls':>7}  function")
    for (filename, line, name), (_, ncalls, tottime, cumtime, _) in rows[:limit]:
        where = f"{filename}:{line}({name})" if filename != "~" else name
        print(f"  {cumtime * 1000 / calls:8.2f} {tottime * 1000 / calls:8.2f} {ncalls / calls:7.0f}  {where}")
    own = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:8]
    print(
        "  by own time: "
        + "; ".join(
            f"{(f'{f}:{ln}({n})' if f != '~' else n)} {v[2] * 1000 / calls:.1f}" for (f, ln, n), v in own
        )
    )


def default_tmpdir() -> str | None:
    """tmpfs when there is room: creating 40,000 files on a slow disk can take longer than all the timing."""
    shm = Path("/dev/shm")
    try:
        usable = shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2 * 1024**3
    except OSError:
        usable = False
    return str(shm) if usable else None


# --- main -----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000, help="committed files in the repository")
    parser.add_argument("--items", type=int, default=1_000, help="items in todos/roadmap.md")
    parser.add_argument("--tasks", type=int, default=300, help="build tasks in the implementation plan")
    parser.add_argument("--parse-items", type=int, default=10_000, help="items in the parsing benchmark")
    parser.add_argument("--repeat", type=int, default=None, help="rounds (default 25, or 7 with --quick)")
    parser.add_argument(
        "--tmpdir", default=None, help="where the repository goes (default /dev/shm if usable)"
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    parser.add_argument(
        "--profile", action="store_true", help="also profile the library call and CLI imports"
    )
    args = parser.parse_args(argv)
    repeat = args.repeat or (7 if args.quick else 25)
    parse_repeat = 3 if args.quick else max(3, repeat // 2)  # ~2 s a round at 10,000 items

    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="teleclaude-bench-", dir=args.tmpdir or default_tmpdir()))
    env = {
        **os.environ,
        "TELECLAUDE_DB": str(base / "teleclaude.db"),  # never the user's ~/.teleclaude
        "XDG_CONFIG_HOME": str(base / "config"),  # no user teleclaude.toml either
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }
    env.pop("TELECLAUDE_DEBUG", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure the CLI as installed: with its bytecode written
    os.environ.update({k: env[k] for k in ("TELECLAUDE_DB", "XDG_CONFIG_HOME")})
    os.environ.pop("TELECLAUDE_DEBUG", None)
    sys.path.insert(0, str(REPO_ROOT))
    try:
        from teleclaude.planner import api as app

        project, slug = build_project(base, args.files, args.items, args.tasks)
        built = time.perf_counter()
        first = app.next_work(None, cwd=project)  # claims the first open item and creates trees/<slug>
        # An availability database that exists (as after any mark) so the read path is the real one.
        app.mark_agent_available("codex", cwd=project)
        time.sleep(1.05)  # then rewrite both indexes so no entry is racily clean
        settle_index(project)
        settle_index(project / "trees" / slug)
        ready = time.perf_counter()
        from teleclaude.planner.core.render import to_text

        print(
            f"teleclaude next_work benchmark: {args.files:,} files, {args.items:,} roadmap items, "
            f"{args.tasks} plan tasks; {repeat} rounds ({parse_repeat} for parsing); "
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
            f"in {base}"
        )
        print(
            f"setup: repository {built - started:.1f} s, first next_work + worktree {ready - built:.1f} s; "
            f"first answer: {first_line(to_text(first))} {command_of(to_text(first))} {slug}"
        )
        parse_text, _ = roadmap_text(args.parse_items, seed=13)
        samples, notes = asyncio.run(
            measure(project, slug, env, repeat, parse_repeat, parse_text, base / "mcp-server.log")
        )
        print("warm answers: " + "; ".join(notes))
        print()
        report(samples, args.parse_items)
        if args.profile:
            profile(project, slug, env)
    except Exception as error:  # a measuring instrument: report, never fail the caller
        print(f"benchmark failed: {type(error).__name__}: {error}", file=sys.stderr)
        log = base / "mcp-server.log"
        if log.exists():
            print(log.read_text()[-2000:], file=sys.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.1f} s; removed {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
