"""Issue 13.5: links that lead outside the repository. A claim is never written through a `todos/` or
roadmap link that leaves the repository, and `git worktree add` never follows a `trees/` link out of it;
both are coded errors. Links that stay inside the repository keep working."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch, Step

from .conftest import git

ROADMAP = "- [ ] feat — the feature\n"
PLAN = "# Plan\n## Group 1\n- [ ] write it\n"


def fill_todos(todos: Path) -> None:
    (todos / "feat").mkdir(parents=True)
    (todos / "roadmap.md").write_text(ROADMAP)
    (todos / "feat/requirements.md").write_text("# feat\nDo it.\n")
    (todos / "feat/implementation-plan.md").write_text(PLAN)


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    fill_todos(root / "todos")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "roadmap")
    return root


@pytest.fixture
def outside(tmp_path) -> Path:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_todos_link_out_of_the_repository_gets_no_claim(repo, outside):
    fill_todos(outside)
    before = snapshot(outside)
    subprocess.run(["rm", "-r", str(repo / "todos")], check=True)
    (repo / "todos").symlink_to(outside)
    action = app.next_work(cwd=repo)
    assert isinstance(action, Error) and action.code is ErrorCode.FILE_ERROR, action
    assert snapshot(outside) == before
    assert not (repo / "trees/feat").exists()


def test_a_roadmap_link_out_of_the_repository_gets_no_claim(repo, outside):
    (outside / "roadmap.md").write_text(ROADMAP)
    (repo / "todos/roadmap.md").unlink()
    (repo / "todos/roadmap.md").symlink_to(outside / "roadmap.md")
    action = app.next_work(cwd=repo)
    assert isinstance(action, Error) and action.code is ErrorCode.FILE_ERROR, action
    assert (outside / "roadmap.md").read_text() == ROADMAP


def test_a_roadmap_link_inside_the_repository_is_followed_and_kept(repo):
    (repo / "plans").mkdir()
    (repo / "todos/roadmap.md").rename(repo / "plans/roadmap.md")
    (repo / "todos/roadmap.md").symlink_to("../plans/roadmap.md")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "move the roadmap")
    action = app.next_work(cwd=repo)
    assert isinstance(action, Dispatch) and action.step is Step.BUILD, action
    assert (repo / "todos/roadmap.md").is_symlink()
    assert (repo / "plans/roadmap.md").read_text() == ROADMAP.replace("[ ]", "[>]")


@pytest.mark.parametrize("link", ["trees", "trees/feat"])
def test_a_trees_link_out_of_the_repository_makes_no_worktree_there(repo, outside, link):
    (repo / link).parent.mkdir(exist_ok=True)
    (repo / link).symlink_to(outside)
    action = app.next_work(cwd=repo)
    assert isinstance(action, Error) and action.code is ErrorCode.WORKTREE_FAILED, action
    assert list(outside.iterdir()) == []
    assert (repo / "todos/roadmap.md").read_text() == ROADMAP  # nothing claimed
    assert "elsewhere" not in git(repo, "worktree", "list")


def test_a_trees_link_inside_the_repository_is_fine(repo):
    (repo / ".worktrees").mkdir()
    (repo / "trees").symlink_to(".worktrees")
    action = app.next_work(cwd=repo)
    assert isinstance(action, Dispatch) and action.subfolder == "trees/feat", action
    assert (repo / ".worktrees/feat/todos/feat/implementation-plan.md").read_text() == PLAN
