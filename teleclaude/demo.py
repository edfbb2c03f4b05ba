"""`teleclaude demo`: a throwaway repository driven from `[ ]` to `done/` through `next_work`.

The workers here are scripted stand-ins: plain functions that edit files and commit the way a builder,
reviewer, fixer, finalizer and commit-pending agent would. The tests drive the same functions.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from teleclaude import app
from teleclaude.adapters.git import run_git
from teleclaude.core.markdown import decode
from teleclaude.core.model import Action, Complete, Dispatch, Error, ErrorCode, Marker, Step
from teleclaude.core.render import to_text
from teleclaude.core.roadmap import parse_roadmap, rewrite_marker

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

    def __init__(self, project: Path, forget_commit: str | None = None, reject_first: str | None = None):
        self.project = project
        self.forget_commit = forget_commit
        self.reject_first = reject_first
        self.reviews: dict[str, int] = {}

    def run(self, action: Dispatch) -> str:
        where = self.project / (action.subfolder or "")
        worker: Callable[[Path, Dispatch], str] = {
            Step.BUILD: self.build,
            Step.REVIEW: self.review,
            Step.FIX: self.fix,
            Step.FINALIZE: self.finalize,
            Step.COMMIT: self.commit_pending,
            Step.BUGS: self.bugs,
        }[action.step]
        return worker(where, action)

    def build(self, tree: Path, action: Dispatch) -> str:
        slug, module = action.slug, action.slug.replace("-", "_")
        (tree / "src").mkdir(exist_ok=True)
        (tree / "tests").mkdir(exist_ok=True)
        (tree / "src" / f"{module}.py").write_text(
            f'"""{slug}."""\n\n\ndef {module}():\n    return "{slug}"\n'
        )
        (tree / "tests" / f"test_{module}.py").write_text(f"def test_{module}():\n    assert True\n")
        plan = tree / "todos" / slug / "implementation-plan.md"
        ticked = re.sub(
            r"^(## Group [1-4].*?)(?=^## Group [5-9]|\Z)", _tick, plan.read_text(), flags=re.M | re.S
        )
        plan.write_text(ticked)
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
        (tree / "todos" / slug / "review-findings.md").unlink()
        commit_all(tree, f"Fix review findings for {slug}")
        return "fixer: fixed the critical finding, deleted review-findings.md, committed"

    def finalize(self, main: Path, action: Dispatch) -> str:
        slug = action.slug
        archive = re.search(r"done/\d{3}-[a-z0-9-]+/", action.note or "")[0].rstrip("/")
        git(main, "merge", "-q", "--no-ff", "-m", f"Merge {slug}", slug)
        (main / "done").mkdir(exist_ok=True)
        git(main, "mv", f"todos/{slug}", archive)
        roadmap = main / "todos" / "roadmap.md"
        data = roadmap.read_bytes()
        roadmap.write_bytes(rewrite_marker(data, parse_roadmap(decode(data)).find(slug).line, Marker.DONE))
        commit_all(main, f"Finalize {slug}")
        git(main, "worktree", "remove", f"trees/{slug}")
        git(main, "branch", "-q", "-d", slug)
        return f"finalizer: merged {slug}, archived to {archive}/, marked [x], removed the worktree"

    def commit_pending(self, where: Path, action: Dispatch) -> str:
        changed = git(where, "status", "--porcelain").splitlines()
        commit_all(where, f"Commit pending work for {action.slug}")
        return f"commit-pending: committed {len(changed)} changed path(s)"

    def bugs(self, main: Path, action: Dispatch) -> str:
        bugs = main / "todos" / "bugs.md"
        bugs.write_text(bugs.read_text().replace("- [ ]", "- [x]"))
        commit_all(main, "Fix open bugs")
        return "bug fixer: fixed and ticked every open bug"


def _tick(match: re.Match) -> str:
    return match[0].replace("- [ ]", "- [x]")


# --- the orchestrator loop --------------------------------------------------------------------------


def drive(
    project: Path,
    workers: Workers,
    say: Callable[[str], None],
    verbose: bool = False,
    max_steps: int = 60,
    on_step: Callable[[int, Action], None] | None = None,
) -> list[Action]:
    """Call next_work like an orchestrator: follow one slug until COMPLETE, then ask for the next one."""
    actions: list[Action] = []
    slug: str | None = None
    for step in range(1, max_steps + 1):
        action = app.next_work(slug, cwd=project)
        actions.append(action)
        say(f"[{step:02d}] next_work({slug or ''}) -> {_summary(action)}")
        if verbose:
            say("     " + to_text(action).replace("\n", "\n     "))
        if on_step:
            on_step(step, action)
        if isinstance(action, Dispatch):
            slug = action.slug or slug
            say(f"     {workers.run(action)}")
        elif isinstance(action, Complete):
            slug = None
        elif isinstance(action, Error) and action.code is ErrorCode.NO_WORK:
            return actions
        else:
            return actions
    return actions


def _summary(action: Action) -> str:
    first = to_text(action).splitlines()[0].rstrip(":")
    if isinstance(action, Dispatch):
        where = action.subfolder or "main checkout"
        return f"{first} {action.command} {action.slug} ({action.agent}, {action.thinking_mode}) in {where}"
    if isinstance(action, Complete):
        return f"{first} {action.slug} -> {action.archive}"
    return first


def run(keep: bool = False, verbose: bool = False) -> int:
    base = Path(tempfile.mkdtemp(prefix="teleclaude-demo-"))
    os.environ["TELECLAUDE_DB"] = str(base / "teleclaude.db")  # never touch the user's availability
    project = make_repository(base / "project")
    print(f"teleclaude demo in {project}\n")
    print((project / "todos" / "roadmap.md").read_text())
    workers = Workers(project, forget_commit="greeting", reject_first="greeting")

    def rate_limit_gemini(step: int, action: Action) -> None:
        if isinstance(action, Complete) and action.slug == "greeting":
            app.mark_agent_unavailable("gemini", "2h", "rate_limited", cwd=project)
            print("     (gemini reports a rate limit: marked unavailable for 2h; builds fall back to claude)")

    actions = drive(project, workers, print, verbose, on_step=rate_limit_gemini)
    print("\n" + (project / "todos" / "roadmap.md").read_text())
    done = sorted(p.name for p in (project / "done").iterdir())
    print(f"done/: {', '.join(done)}")
    print(git(project, "log", "--oneline", "--first-parent", "-n", "8"))
    finished = isinstance(actions[-1], Error) and actions[-1].code is ErrorCode.NO_WORK and len(done) == 3
    if keep:
        print(f"Kept {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    print("Demo finished: every item delivered." if finished else "Demo stopped early.")
    return 0 if finished else 1
