"""Issue 13.8: worktrees git did not finish. A `git worktree add` cut short by a kill is recognised: our own
is made again, a foreign one is `WORKTREE_FAILED` with the repair; never `NOT_PREPARED`. A failing
post-checkout hook is reported with its reason, and a branch named like the slug that shares no history
with main is refused before anything is claimed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step

from .conftest import PREPARED, committed_repo, git

ROADMAP = PREPARED["todos/roadmap.md"]


@pytest.fixture
def repo(tmp_path) -> Path:
    """`big.txt` comes before todos/ in a checkout and goes through the `stall` filter, once configured."""
    files = {".gitattributes": "big.txt filter=stall\n", "big.txt": "content\n", **PREPARED}
    return committed_repo(tmp_path / "project", files)


def killed_during_checkout(root: Path, command: list[str], tmp_path: Path) -> None:
    """Run `command` in its own process group and kill the group while git checks out big.txt."""
    started = tmp_path / "checking-out"
    git(root, "config", "filter.stall.smudge", f"touch {started}; sleep 60; cat")
    process = subprocess.Popen(command, cwd=root, start_new_session=True)
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    assert started.exists(), "the checkout never reached big.txt"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    git(root, "config", "--unset", "filter.stall.smudge")


def locked(root: Path) -> bool:
    return "locked" in git(root, "worktree", "list", "--porcelain")


def test_our_own_unfinished_worktree_is_made_again(repo, tmp_path):
    killed_during_checkout(repo, [sys.executable, "-m", "teleclaude", "next-work"], tmp_path)
    assert (repo / "trees/feat/.git").is_file() and locked(repo)
    assert not (repo / "trees/feat/todos").exists()
    action = app.next_work(cwd=repo)
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action
    assert (repo / "trees/feat/todos/feat/implementation-plan.md").exists()
    assert not locked(repo)
    assert git(repo / "trees/feat", "status", "--porcelain") == ""
    assert (repo / "todos/roadmap.md").read_text() == ROADMAP.replace("[ ]", "[>]")


def test_a_foreign_unfinished_worktree_is_worktree_failed_and_the_repair_works(repo, tmp_path):
    killed_during_checkout(repo, ["git", "worktree", "add", "trees/feat", "-b", "feat"], tmp_path)
    action = app.next_work(cwd=repo)
    assert isinstance(action, Error) and action.code is ErrorCode.WORKTREE_FAILED, action
    assert (repo / "todos/roadmap.md").read_text() == ROADMAP
    git(repo, "worktree", "remove", "--force", "--force", "trees/feat")  # the repair it names
    action = app.next_work(cwd=repo)
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action


@pytest.mark.parametrize(
    ("says", "reason"),
    [("echo 'npm install: no network' >&2", "npm install: no network"), ("", "post-checkout")],
)
def test_a_failing_post_checkout_hook_is_reported_with_its_reason(repo, says, reason):
    hook = repo / ".git/hooks/post-checkout"
    hook.write_text(f"#!/bin/sh\n{says}\nexit 1\n")
    hook.chmod(0o755)
    action = app.next_work(cwd=repo)
    assert isinstance(action, Error) and action.code is ErrorCode.WORKTREE_FAILED, action
    assert reason in action.message  # what the hook said, or at least which hook failed
    assert (repo / "trees/feat/todos/feat/implementation-plan.md").exists() and not locked(repo)
    action = app.next_work(cwd=repo)  # the worktree was made: the next call goes on with it
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action


def test_a_branch_named_like_the_slug_with_unrelated_history_is_refused_before_the_claim(repo):
    empty_tree = git(repo, "hash-object", "-t", "tree", "-w", "--stdin").strip()
    unrelated = git(repo, "commit-tree", empty_tree, "-m", "someone else's feat").strip()
    git(repo, "branch", "feat", unrelated)
    action = app.next_work(cwd=repo)
    assert isinstance(action, Error) and action.code is ErrorCode.WORKTREE_FAILED, action
    assert (repo / "todos/roadmap.md").read_text() == ROADMAP
    assert not (repo / "trees/feat").exists()
