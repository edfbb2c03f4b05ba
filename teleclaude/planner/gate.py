"""The gate: `[checks] gate` run on a tree, and the tree that would become main made to run it on.

`gate_merge` merges the main checkout's HEAD into the item's worktree without committing (`git merge
--no-ff --no-commit`: the tree `teleclaude finalize` is about to make; the user's checkout is never
touched), runs the gate there, and puts the worktree back as it was. A red gate's finding is committed on
the branch (`send_back`), where the planner reads it: the next step is a fix, then a fresh review. Each run
is recorded (one JSON line in the git common dir) for `status`, the board and `teleclaude report`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from teleclaude.adapters import fs
from teleclaude.adapters import git as gitx
from teleclaude.adapters.checks import run_command
from teleclaude.adapters.settings import load_config
from teleclaude.config.checks import Checks
from teleclaude.config.matrix import Config
from teleclaude.config.profiles import UntrustedConfig
from teleclaude.errors import Error, ErrorCode, guard
from teleclaude.planner.core import layout
from teleclaude.planner.core.gate import (
    CommandResult,
    GateRecord,
    GateRun,
    Verdict,
    command_lines,
    findings,
)
from teleclaude.planner.core.model import WorktreeState
from teleclaude.planner.core.roadmap import slug_problem
from teleclaude.planner.core.terminal import printable

BROKEN_NEXT = (
    "The gate could not judge the tree: fix [checks] in teleclaude.toml (a command not found?) or the "
    "command that changes tracked files, then run `teleclaude check` again."
)
RECORDS = "teleclaude-gates.jsonl"  # in the git common dir
_GIT_CONTEXT = ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE", "GIT_PREFIX", "TELECLAUDE_SESSION_ID")


def environment() -> dict[str, str]:
    """The worker's environment, without what would point git or teleclaude at the caller's context."""
    return {key: value for key, value in os.environ.items() if key not in _GIT_CONTEXT}


def run_gate(
    commands: tuple[str, ...], cwd: Path, timeout: float, where: str = "", clean: bool = False
) -> GateRun:
    """Each command in order until one fails; a failed command runs once more at once (flaky if it passes
    then). Tracked files the gate changed make it broken. `clean`: the checkout had no change at all before
    (teleclaude's worktree of an item, asked to be reviewed or finalized): the untracked files the gate left
    (not ignored: a `__pycache__/` a .gitignore does not name) are removed after it, and tracked files it
    changed are put back (HEAD's), so that the planner does not take them for a worker's uncommitted work."""
    env = environment()
    before = () if clean else _tracked_changes(cwd)
    results: list[CommandResult] = []
    for command in commands:
        first = run_command(command, cwd, timeout, env)
        retry = None
        if not first.passed and not first.missing:
            retry = run_command(command, cwd, timeout, env)
        result = CommandResult(first, retry)
        results.append(result)
        if not result.passed:
            break
    changed = tuple(path for path in _tracked_changes(cwd) if path not in before)
    if clean:
        if changed:
            gitx.run_git(["reset", "-q", "--hard"], cwd)
        gitx.run_git(["clean", "-fdq"], cwd)
    return GateRun(tuple(results), changed, where)


def run_setup(commands: tuple[str, ...], cwd: Path, timeout: float) -> GateRun:
    """`[checks] setup` in a new worktree: each command once, until one fails (no retry)."""
    env = environment()
    results: list[CommandResult] = []
    for command in commands:
        results.append(CommandResult(run_command(command, cwd, timeout, env)))
        if not results[-1].passed:
            break
    return GateRun(tuple(results), where=str(cwd))


@dataclass(frozen=True)
class Gated:
    """The gate on main + the branch: the run, and the two commits merged (the merge finalize may make)."""

    run: GateRun
    main: str
    tip: str


def gate_merge(repo: gitx.Repo, slug: str, checks: Checks) -> Gated | None:
    """The gate on main merged into trees/{slug}, its worktree; None when that has changes (never touched
    then) or main does not merge into the branch cleanly: the planner's next answer says what to do."""
    tree = repo.tree(slug)
    began = time.monotonic()
    if gitx.status(tree).changes:
        return None
    main, tip = gitx.run_git(["rev-parse", gitx.main_head_ref(repo), f"refs/heads/{slug}"], tree).split()
    where = f"main {main[:10]} merged into {slug} {tip[:10]}"
    # main in the branch's history (a serial run's usual case): the merge's tree is the branch tip's own
    merging = not gitx.is_ancestor(tree, main, tip)
    if merging:
        try:
            gitx.run_git(["merge", "-q", "--no-ff", "--no-commit", main], tree)
        except subprocess.CalledProcessError:
            _restore(tree, tip)
            return None
    run = GateRun(where=where)
    try:
        run = run_gate(checks.gate, tree, checks.timeout, where, clean=True)
    finally:
        if merging or run.changed:
            _restore(tree, tip)
    record(repo, slug, "finalize", run, time.monotonic() - began)
    return Gated(run, main, tip)


def _restore(tree: Path, tip: str) -> None:
    """The worktree as it was: the branch tip checked out, no merge in progress (untracked files stay)."""
    gitx.run_git(["reset", "-q", "--hard", tip], tree)


def _tracked_changes(cwd: Path) -> tuple[str, ...]:
    try:
        out = gitx.run_git(["diff", "--name-only", "-z"], cwd)
    except subprocess.CalledProcessError:  # not in a git checkout: nothing tracked to change
        return ()
    return tuple(path for path in out.split("\0") if path)


def send_back(repo: gitx.Repo, slug: str, run: GateRun) -> None:
    """A red gate's finding, written as the reviewer writes review-findings.md and committed on the branch."""
    tree = repo.tree(slug)
    path = layout.item_file(slug, layout.REVIEW)
    fs.atomic_write(tree / path, findings(slug, run).encode())
    gitx.run_git(["add", "--", path], tree)
    failing = run.failing
    command = failing.first.command if failing else "the gate"
    gitx.run_git(["commit", "-q", "--no-verify", "-m", f"Gate red for {slug}: {command}"], tree)


# --- the record --------------------------------------------------------------------------------------------


def record(repo: gitx.Repo, slug: str, kind: str, run: GateRun, seconds: float | None = None) -> None:
    line = {
        "slug": slug,
        "kind": kind,
        "verdict": run.verdict.value,
        "seconds": round(run.seconds if seconds is None else seconds, 3),
        "summary": run.summary(),
        "at": time.time(),
    }
    data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
    fd = os.open(repo.common_dir / RECORDS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)  # one write of one line: appends of several processes do not interleave
    finally:
        os.close(fd)


def records(common_dir: Path) -> dict[str, tuple[GateRecord, ...]]:
    """Every recorded gate run, per item, oldest first (a line that does not read is skipped)."""
    lines = fs.read_tail(common_dir / RECORDS)
    found: dict[str, list[GateRecord]] = {}
    for line in lines:
        try:
            data = json.loads(line)
            entry = GateRecord(
                str(data["slug"]),
                str(data["kind"]),
                Verdict(data["verdict"]),
                float(data["seconds"]),
                str(data["summary"]),
                float(data["at"]),
            )
        except (ValueError, KeyError, TypeError):
            continue
        found.setdefault(entry.slug, []).append(entry)
    return {slug: tuple(entries) for slug, entries in found.items()}


# --- `teleclaude check [SLUG]` -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    run: GateRun | None  # None: no [checks] gate (or setup)
    slug: str | None
    setup: bool = False  # the run is of `setup`, not of the gate

    def text(self) -> str:
        if self.run is None and self.setup:
            return "OK: teleclaude.toml has no [checks] setup: nothing to run."
        if self.run is None:
            return (
                "OK: teleclaude.toml has no [checks] gate, so merges into main are not gated.\n"
                'Add one (see `teleclaude init`\'s example), e.g. [checks] gate = ["pytest -q"].'
            )
        verdict = self.run.verdict
        head = "ERROR: GATE_BROKEN" if verdict is Verdict.BROKEN else f"GATE: {verdict.value}"
        if self.setup:
            head = f"SETUP: {'passed' if self.run.passed else 'failed'}"
        head += f"\n{printable(self.run.summary())} (on {printable(self.run.where)})"
        lines = [line for result in self.run.results for line in command_lines(result)]
        lines += [f"changed tracked file: {printable(path)}" for path in self.run.changed]
        lines += [printable(line) for line in self.run.extra]
        if verdict is Verdict.BROKEN:
            lines.append(BROKEN_NEXT)
        return "\n".join([head, *lines])


def checks_of(config: Config) -> Checks | None:
    """The gate to run, or None; refused (UNTRUSTED_CONFIG) while the project's [checks] is not trusted:
    nothing is run, and nothing may be merged without it."""
    withheld = config.gate_withheld()
    if withheld is not None:
        raise UntrustedConfig(withheld)
    return config.checks if config.checks and config.checks.gated else None


@guard
def check(slug: str | None = None, cwd: str | os.PathLike | None = None) -> Checked | Error:
    """The gate by hand: with SLUG, on main merged into its branch, exactly as finalize runs it; else on the
    checkout `cwd` is in, as it is."""
    repo = gitx.find_repo(cwd or os.getcwd())
    checks = checks_of(load_config(repo.root))
    if checks is None:
        return Checked(None, slug)
    if slug is None:
        here = Path(gitx.run_git(["rev-parse", "--show-toplevel"], Path(cwd or os.getcwd())).strip())
        began = time.monotonic()
        run = run_gate(checks.gate, here, checks.timeout, str(here))
        record(repo, _slug_of(repo, here), "check", run, time.monotonic() - began)
        return Checked(run, None)
    problem = slug_problem(slug)
    if problem:
        return Error(ErrorCode.INVALID_SLUG, f"{problem}.\nPass a slug from todos/roadmap.md.")
    if gitx.worktree_state(repo, slug).state is not WorktreeState.PRESENT or not gitx.branch_commit(
        repo.root, slug
    ):
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            f"{slug} has no worktree (trees/{slug}) and branch to gate.\nRun `teleclaude check` without a "
            "slug to gate the checkout you are in.",
            slug,
        )
    gated = gate_merge(repo, slug, checks)
    if gated is None:
        return Error(
            ErrorCode.INVALID_ARGUMENT,
            f"trees/{slug} has uncommitted changes, or main does not merge into {slug} cleanly: nothing was "
            f"gated.\nCommit there (or ask next_work: a merge fixer resolves a conflict), then check again.",
            slug,
        )
    return Checked(gated.run, slug)


def _slug_of(repo: gitx.Repo, here: Path) -> str:
    """The item whose worktree `here` is, or "" for the main checkout."""
    trees = repo.root / layout.TREES
    return here.name if here.parent == trees else ""
