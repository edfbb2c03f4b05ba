"""The demo's repository and its scripted workers: plain functions that edit files and commit the way a
builder, reviewer, fixer, finalizer and commit-pending agent would. `teleclaude demo`, the stand-in agent CLI
and the tests all drive these.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from teleclaude.adapters.git import run_git
from teleclaude.errors import Error, guard
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.planner.core.roadmap import parse_roadmap

ROADMAP = """# Roadmap

## Demo
- [ ] greeting — A module that says hello.
- [ ] farewell (after: greeting) — A module that says goodbye.
- [ ] shouting — Upper-case variants of both.
"""

PLAN = """# Implementation plan: {slug}

## Group 1: Code
- [ ] Write src/{module}.py
- [ ] Add a docstring

## Group 2: Tests
- [ ] Write tests/test_{module}.py

## Group 5: After the build
- [ ] Announce it
"""

REVIEW = """# Review findings: {slug}

## Critical
{critical}
## Important

## Suggestions

## Verdict
- [{approve}] APPROVE
- [{request}] REQUEST CHANGES
"""


def git(cwd: Path, *args: str) -> str:
    return run_git(list(args), cwd)


def commit_all(cwd: Path, message: str) -> None:
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)


def make_repository(root: Path) -> Path:
    """A git repository with the demo roadmap and three prepared items, all committed."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "teleclaude demo")
    git(root, "config", "user.email", "demo@teleclaude.invalid")
    (root / "todos").mkdir()
    (root / "todos" / "roadmap.md").write_text(ROADMAP)
    for item in parse_roadmap(ROADMAP).items:
        folder = root / "todos" / item.slug
        folder.mkdir()
        (folder / "requirements.md").write_text(f"# Requirements: {item.slug}\n\n{item.description}\n")
        plan = PLAN.format(slug=item.slug, module=item.slug.replace("-", "_"))
        (folder / "implementation-plan.md").write_text(plan)
    commit_all(root, "Add roadmap and prepared items")
    return root


# --- scripted workers -------------------------------------------------------------------------------


class Workers:
    """Stand-ins for the agents. `forget_commit` and `reject_first` make them misbehave once, on purpose."""

    def __init__(
        self,
        project: Path,
        forget_commit: str | None = None,
        reject_first: str | None = None,
        shared: bool = False,
        breaks: bool = False,
    ):
        self.project = project
        self.forget_commit = forget_commit
        self.reject_first = reject_first
        self.shared = shared  # the builder also writes NOTES.md, which every shared item writes: a conflict
        self.breaks = breaks  # the builder also writes a test that fails; only a fixer removes it
        self.reviews: dict[str, int] = {}

    def run(self, action: Dispatch) -> str:
        return self.worker(action.step)(self.project / (action.subfolder or ""), action)

    def worker(self, step: Step) -> Callable[[Path, Dispatch], str]:
        """The stand-in for `step`: called with the folder it works in and the dispatch."""
        return {
            Step.BUILD: self.build,
            Step.REVIEW: self.review,
            Step.FIX: self.fix,
            Step.FINALIZE: self.finalize,
            Step.FIX_MERGE: self.fix_merge,
            Step.COMMIT: self.commit_pending,
            Step.BUGS: self.bugs,
        }[step]

    def build(self, tree: Path, action: Dispatch) -> str:
        slug, module = action.slug, action.slug.replace("-", "_")
        (tree / "src").mkdir(exist_ok=True)
        (tree / "tests").mkdir(exist_ok=True)
        (tree / "src" / f"{module}.py").write_text(
            f'"""{slug}."""\n\n\ndef {module}():\n    return "{slug}"\n'
        )
        (tree / "tests" / f"test_{module}.py").write_text(f"def test_{module}():\n    assert True\n")
        if self.breaks:
            (tree / "tests" / f"test_broken_{module}.py").write_text(
                f"def test_broken_{module}():\n    assert 1 == 2, 'the builder broke this'\n"
            )
        tick_build_tasks(tree / "todos" / slug / "implementation-plan.md")
        if self.shared:
            notes = tree / "NOTES.md"
            notes.write_text(
                (notes.read_text() if notes.exists() else "# Notes\n\n") + f"{slug} was built here.\n"
            )
        if self.forget_commit == slug:
            self.forget_commit = None
            return "builder: did every task in Groups 1-4 and ticked them, but forgot to commit"
        commit_all(tree, f"Build {slug}")
        return "builder: did every task in Groups 1-4, ticked them, committed"

    def review(self, tree: Path, action: Dispatch) -> str:
        slug = action.slug
        self.reviews[slug] = self.reviews.get(slug, 0) + 1
        rejects = self.reject_first == slug and self.reviews[slug] == 1
        critical = "- The function has no test of its return value.\n" if rejects else ""
        text = REVIEW.format(
            slug=slug, critical=critical, approve=" " if rejects else "x", request="x" if rejects else " "
        )
        (tree / "todos" / slug / "review-findings.md").write_text(text)
        commit_all(tree, f"Review {slug}")
        return "reviewer: REQUEST CHANGES (one critical finding)" if rejects else "reviewer: APPROVE"

    def fix(self, tree: Path, action: Dispatch) -> str:
        slug, module = action.slug, action.slug.replace("-", "_")
        test = tree / "tests" / f"test_{module}.py"
        test.write_text(
            f"from src.{module} import {module}\n\n\n"
            f"def test_{module}():\n    assert {module}() == '{slug}'\n"
        )
        for broken in (tree / "tests").glob("test_broken_*.py"):
            broken.unlink()
        (tree / "todos" / slug / "review-findings.md").unlink()
        commit_all(tree, f"Fix review findings for {slug}")
        return "fixer: fixed the critical finding, deleted review-findings.md, committed"

    def finalize(self, main: Path, action: Dispatch) -> str:
        """What the finalizer's command file says: `teleclaude finalize SLUG` (merge, archive, mark, clean up,
        under the project lock; then, outside it, the item's worktrees on other computers)."""
        # imported here: every stand-in loads this module, and only a finalizer needs the planner's finalize
        # and the runtime (~0.1 s of CPU a start)
        from teleclaude.planner.finalize import finalize
        from teleclaude.runtime.remote import clean_up_delivered

        slug = action.slug
        done = finalize(slug, cwd=main)
        if isinstance(done, Error):
            return f"BLOCKED: next-finalize {slug} - {done.code.value}: {done.message.splitlines()[0]}"
        elsewhere = guard(clean_up_delivered)(slug, cwd=main)
        said = [] if isinstance(elsewhere, Error) else [result.text() for result in elsewhere]
        return "; ".join(
            [f"finalizer: merged {slug}, archived to {done.archive}, marked [x], removed the worktree", *said]
        )

    def fix_merge(self, tree: Path, action: Dispatch) -> str:
        """Merge main into the branch and keep both sides of every conflicted file."""
        try:
            git(tree, "merge", "-q", "-m", f"Merge main into {action.slug}", "main")
            return "merge fixer: main merged in without conflicts"
        except subprocess.CalledProcessError:
            pass
        conflicted = git(tree, "diff", "--name-only", "--diff-filter=U").split()
        for name in conflicted:
            path = tree / name
            kept = [line for line in path.read_text().splitlines(keepends=True) if not _MARKER.match(line)]
            path.write_text("".join(kept))
        git(tree, "add", "-A")
        git(tree, "commit", "-q", "--no-edit")
        return f"merge fixer: merged main, kept both sides of {len(conflicted)} conflicted file(s)"

    def commit_pending(self, where: Path, action: Dispatch) -> str:
        changed = git(where, "status", "--porcelain").splitlines()
        commit_all(where, f"Commit pending work for {action.slug}")
        return f"commit-pending: committed {len(changed)} changed path(s)"

    def bugs(self, main: Path, action: Dispatch) -> str:
        bugs = main / "todos" / "bugs.md"
        bugs.write_text(bugs.read_text().replace("- [ ]", "- [x]"))
        commit_all(main, "Fix open bugs")
        return "bug fixer: fixed and ticked every open bug"


_MARKER = re.compile(r"^(<<<<<<<|=======|>>>>>>>)( |$)")


def tick_build_tasks(plan: Path) -> None:
    """Tick every task of Groups 1-4, as a builder does when it has done them."""
    groups = re.compile(r"^(## Group [1-4].*?)(?=^## Group [5-9]|\Z)", re.M | re.S)
    plan.write_text(groups.sub(lambda match: match[0].replace("- [ ]", "- [x]"), plan.read_text()))
