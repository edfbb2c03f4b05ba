"""`GIT_DIR` (or `GIT_WORK_TREE`, `GIT_INDEX_FILE`, …) naming another repository: git obeys it before its
folder, so next_work would have registered its worktree in that other repository. It is refused before
anything is touched; the variables git sets for this repository's own hooks keep working."""

from __future__ import annotations

from pathlib import Path

import pytest

from teleclaude.demo.workers import git, make_repository

from .conftest import first_line


@pytest.mark.parametrize("variable", ["GIT_DIR", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE"])
def test_next_work_with_git_sent_to_another_repository_is_refused_and_touches_neither(
    cli, subprocess_env, tmp_path, variable
):
    ours, other = make_repository(tmp_path / "ours"), make_repository(tmp_path / "other")
    target = {"GIT_INDEX_FILE": other / ".git" / "index", "GIT_WORK_TREE": other}.get(
        variable, other / ".git"
    )
    subprocess_env[variable] = str(target)
    before = [(git(repo, "worktree", "list"), git(repo, "status", "--porcelain")) for repo in (ours, other)]
    done = cli("next-work", cwd=ours)
    assert first_line(done.stdout) == "ERROR: NOT_A_GIT_REPO", done.stdout + done.stderr
    assert [
        (git(repo, "worktree", "list"), git(repo, "status", "--porcelain")) for repo in (ours, other)
    ] == before
    assert not (ours / "trees").exists() and not (other / "trees").exists()


def test_git_dir_of_the_repository_itself_is_fine(cli, subprocess_env, tmp_path):
    ours: Path = make_repository(tmp_path / "ours")
    subprocess_env["GIT_DIR"] = str(ours / ".git")
    done = cli("next-work", cwd=ours)
    assert first_line(done.stdout) == "TOOL_CALL:", done.stdout + done.stderr
    assert (ours / "trees").is_dir()
