"""Refs that lie: a tag (or any other ref) named like an item's branch is never what is merged or checked."""

from __future__ import annotations

from pathlib import Path

from teleclaude.demo.workers import git, make_repository
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step
from teleclaude.planner.finalize import Finalized, finalize

from ..scripted import approve


def approved(tmp_path: Path, slug: str) -> Path:
    project = make_repository(tmp_path / "project")
    approve(project, slug)
    return project


def unreviewed_commit(project: Path, path: str) -> str:
    """A commit beside main that nobody reviewed: it adds `path`."""
    tree = project / "trees" / "unreviewed"
    git(project, "worktree", "add", "-q", "--detach", str(tree), "main")
    (tree / path).write_text("not reviewed\n")
    git(tree, "add", path)
    git(tree, "commit", "-q", "-m", "unreviewed")
    commit = git(tree, "rev-parse", "HEAD").strip()
    git(project, "worktree", "remove", "--force", str(tree))
    return commit


def test_a_tag_named_like_the_approved_branch_is_not_what_finalize_merges(tmp_path):
    project = approved(tmp_path, "greeting")
    branch_tip = git(project, "rev-parse", "refs/heads/greeting").strip()
    git(project, "tag", "greeting", unreviewed_commit(project, "planted.txt"))
    done = finalize("greeting", cwd=project)
    assert isinstance(done, Finalized), done
    assert not (project / "planted.txt").exists()
    merged = git(project, "rev-parse", "HEAD^1^2").strip()  # Finalize's parent is the merge; its 2nd parent
    assert merged == branch_tip


def test_a_tag_that_would_conflict_does_not_make_a_cleanly_merging_branch_a_merge_fix(tmp_path):
    project = approved(tmp_path, "greeting")
    # the tag changes a file main changes too, so merging it would conflict; the branch does not
    tagged = unreviewed_commit(project, "NOTES.md")
    (project / "NOTES.md").write_text("main moved on\n")
    git(project, "add", "NOTES.md")
    git(project, "commit", "-q", "-m", "main moves on")
    git(project, "tag", "greeting", tagged)
    action = app.next_work("greeting", cwd=project)
    assert isinstance(action, Dispatch) and action.step is Step.FINALIZE, action
