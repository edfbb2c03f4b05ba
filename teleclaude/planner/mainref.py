"""Main as teleclaude last left it: a run notices a main that moved without a finalize.

`teleclaude run` accepts main as it finds it when it starts, and `teleclaude finalize` records each commit it
makes there, both in the git common dir (`teleclaude-main`: the ref the main checkout has checked out and
its commit). Before each step the run compares: a main that moved otherwise (a commit by hand, a worker that
moved `refs/heads/main`) is `MAIN_MOVED`, naming the commit, instead of a worktree built on it. Running
`teleclaude run` again accepts main as it is then.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from teleclaude.adapters import fs
from teleclaude.adapters import git as gitx
from teleclaude.errors import Error, ErrorCode

RECORD = "teleclaude-main"  # in the git common dir: "REF COMMIT"


@dataclass(frozen=True)
class MainRef:
    ref: str  # refs/heads/main, or a commit id when the main checkout is detached
    commit: str

    def line(self) -> str:
        return f"{self.ref} {self.commit}\n"


def parse(text: str) -> MainRef | None:
    parts = text.split()
    return MainRef(parts[0], parts[1]) if len(parts) == 2 else None


def moved(expected: MainRef | None, now: MainRef) -> Error | None:
    """MAIN_MOVED when main is not where teleclaude last left it (nothing recorded: nothing to compare)."""
    if expected is None or expected == now:
        return None
    if expected.ref != now.ref:
        what = f"the main checkout has {now.ref} checked out ({now.commit[:12]}), not {expected.ref}"
    else:
        what = f"{now.ref} is at {now.commit[:12]}, not at {expected.commit[:12]} where teleclaude left it"
    return Error(
        ErrorCode.MAIN_MOVED,
        f"{what}: main moved without a finalize (a commit by hand, or a worker moved it), so no step is "
        f'built on it.\ncommit="{now.commit}"\nLook at it (git show {now.commit[:12]}); if it is yours, run '
        "`teleclaude run` again: a new run accepts main as it is.",
    )


def current(repo: gitx.Repo) -> MainRef:
    return MainRef(gitx.main_head_ref(repo), gitx.commit_of(repo.root, "HEAD"))


def record(repo: gitx.Repo) -> None:
    """Main as it is now is where teleclaude left it (a finalize's commit, a run's start); under the lock."""
    fs.atomic_write(repo.common_dir / RECORD, current(repo).line().encode(), follow=False)


def recorded(repo: gitx.Repo) -> MainRef | None:
    try:
        return parse((repo.common_dir / RECORD).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def accept(root: str | os.PathLike) -> None:
    """`teleclaude run` starts: main as it is is the one its steps build on."""
    repo = gitx.find_repo(root)
    with fs.project_lock(repo.common_dir):
        record(repo)


def check(root: str | os.PathLike, accepted: Callable[[float], bool] = lambda since: False) -> Error | None:
    """MAIN_MOVED when main moved since the run accepted it, other than by a finalize; under the lock, so a
    finalize's commit and its record are seen together. `accepted(since)`: whether a move since that time
    (epoch seconds) is one the caller let happen (a worker it started on the main checkout): then main as
    it is now is recorded instead."""
    repo = gitx.find_repo(root)
    # held shared, beside the lanes' next_work (a run asks each round): taken alone only to record main
    with fs.project_lock(repo.common_dir, shared=True):
        found = moved(recorded(repo), current(repo))
    if found is None:
        return None
    with fs.project_lock(repo.common_dir):
        found = moved(recorded(repo), current(repo))  # again: a finalize may have recorded it meanwhile
        if found is not None and accepted((repo.common_dir / RECORD).stat().st_mtime):
            record(repo)
            return None
        return found
