"""`teleclaude run` and `[checks]`: earlier is cheaper.

`set_up`: a new worktree's `setup` commands, once, before the first worker starts there (a failure starts no
worker: the item is parked with the output and the command that runs it again). `gate_turn`: when a builder
or fixer ends its turn with every box ticked and its work committed (the planner's next step is a review),
the gate runs in its worktree before a reviewer is started; red sends the same worker back with the output
(`sent_back_text`), at most `max_nudges` times in a row. The finalize gates main + the branch whatever
happened here.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from teleclaude.adapters import git as gitx
from teleclaude.adapters.settings import load_config
from teleclaude.config.checks import Checks
from teleclaude.errors import Error, ErrorCode, guard
from teleclaude.planner import api as app
from teleclaude.planner import gate
from teleclaude.planner.core import layout
from teleclaude.planner.core.gate import GateRun, Verdict, red_streak
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.planner.core.terminal import printable
from teleclaude.planner.gate import Checked
from teleclaude.runtime.core.sessions import Session
from teleclaude.runtime.core.supervision import MARK, bare_command

SETUP_MARK = "teleclaude-setup"  # in the worktree's own git dir: its setup passed (gone with the worktree)
_GATED_STEPS = (Step.BUILD.command, Step.FIX.command)


def project_checks(root: Path) -> Checks | None:
    """The project's trusted [checks], or None (the runtime refuses every start while they are untrusted)."""
    config = load_config(root)
    if config.gate_withheld() is not None:
        return None
    return config.checks


def set_up(root: Path, slug: str, checks: Checks, again: bool = False) -> GateRun | None:
    """Run `setup` in trees/{slug} unless it passed there already (`again`: all the same); the run when it
    was run, else None."""
    if not checks.setup or not slug:
        return None
    repo = gitx.find_repo(root)
    tree = repo.tree(slug)
    if not tree.is_dir():
        return None
    mark = _admin_dir(tree) / SETUP_MARK
    if mark.exists() and not again:
        return None
    began = time.monotonic()
    run = gate.run_setup(checks.setup, tree, checks.timeout)
    gate.record(repo, slug, "setup", run, time.monotonic() - began)
    if run.passed:
        mark.write_text("\n".join(checks.setup) + "\n")
    return run


@guard
def setup_by_hand(slug: str, cwd: str | os.PathLike | None = None) -> Checked | Error:
    """`teleclaude check --setup SLUG`: the item's setup again, in its worktree; once it passes, `teleclaude
    run` starts workers there."""
    repo = gitx.find_repo(cwd or os.getcwd())
    checks = gate.checks_of(load_config(repo.root))
    if checks is None or not checks.setup:
        return Checked(None, slug, setup=True)
    if not repo.tree(slug).is_dir():
        return Error(ErrorCode.INVALID_ARGUMENT, f"{slug} has no worktree (trees/{slug}) to set up.", slug)
    return Checked(set_up(repo.root, slug, checks, again=True), slug, setup=True)


def setup_failed(slug: str, run: GateRun) -> Error:
    lines = [line for result in run.results for line in gate.command_lines(result)]
    again = shlex.join(["teleclaude", "check", "--setup", slug])
    return Error(
        ErrorCode.GATE_BROKEN,
        f"[checks] setup failed in {layout.worktree(slug)}, so no worker was started there: "
        f"{printable(run.summary())}\n" + "\n".join(lines) + f"\nFix it, run `{again}` until it passes, then "
        "run `teleclaude run` again.",
        slug,
    )


def gate_turn(root: Path, session: Session, checks: Checks) -> GateRun | None:
    """The gate on a builder's or fixer's finished turn, in its worktree: None when it is not due (another
    step, boxes still open, uncommitted work: the planner's next step is not the review)."""
    if not checks.gated or bare_command(session.command) not in _GATED_STEPS or not session.subfolder:
        return None
    if layout.worktree(session.slug) != session.subfolder.rstrip("/"):
        return None
    action = app.next_work(session.slug, cwd=root, dry_run=True)
    if not (isinstance(action, Dispatch) and action.step is Step.REVIEW):
        return None
    repo = gitx.find_repo(root)
    tree = repo.tree(session.slug)
    began = time.monotonic()
    where = f"{layout.worktree(session.slug)} after its turn"
    run = gate.run_gate(checks.gate, tree, checks.timeout, where, clean=True)
    gate.record(repo, session.slug, "turn", run, time.monotonic() - began)
    return run


def sent_back_text(run: GateRun) -> str:
    """One line to type into the worker: what failed and its last lines, escaped."""
    failing = run.failing
    tail = " | ".join(line.strip()[:160] for line in (failing.last.tail[-4:] if failing else ()))
    said = f"; its last lines: {tail}" if tail else ""
    return printable(
        f"{MARK} Your check failed: the project's gate ([checks] in teleclaude.toml) {run.summary()}{said}. "
        "Fix what it reports, commit, then end your turn."
    )


def keeps_failing(root: Path, error: Error) -> bool:
    """A REVIEW_ROUND_LIMIT whose item's last finalize gates were red: its gate keeps failing."""
    if error.code is not ErrorCode.REVIEW_ROUND_LIMIT or not error.slug:
        return False
    runs = gate.records(gitx.find_repo(root).common_dir).get(error.slug, ())
    return red_streak(runs) > 0


def red(run: GateRun) -> bool:
    return run.verdict is Verdict.RED


def _admin_dir(tree: Path) -> Path:
    return Path(gitx.run_git(["rev-parse", "--absolute-git-dir"], tree).strip())
