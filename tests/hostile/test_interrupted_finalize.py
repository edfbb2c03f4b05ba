"""Issue 23.5: a finalize killed inside its `git merge` (here: during a pre-merge-commit hook) leaves the
merge staged with no MERGE_HEAD. The next finalize recognises the merge it recorded, undoes it without
losing a user's uncommitted roadmap edit, and merges again; next_work then moves on."""

from __future__ import annotations

from pathlib import Path

from teleclaude.demo.workers import git, make_repository
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Dispatch
from teleclaude.planner.finalize import Finalized, finalize

from ..scripted import approve, git_hook


def killed_during_the_merge(project: Path, slug: str, teleclaude_cli) -> None:
    """`teleclaude finalize SLUG` whose pre-merge-commit hook SIGKILLs its whole process group: the CLI,
    git and the hook die together, as with `kill -9` on the group while the hook runs."""
    hook = git_hook(project, "pre-merge-commit", "#!/bin/sh\nkill -KILL 0\n")
    process = teleclaude_cli(project, "finalize", slug)
    process.communicate(timeout=60)
    assert process.returncode == -9
    hook.unlink()


def test_a_finalize_killed_in_its_merge_is_undone_and_done_by_the_next_finalize(
    tmp_path, teleclaude_cli, copy_repository
):
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    roadmap = project / "todos" / "roadmap.md"
    edited = roadmap.read_text() + "- [ ] polish — a user's line, not committed\n"
    roadmap.write_text(edited)
    head = git(project, "rev-parse", "HEAD")
    killed_during_the_merge(project, "greeting", teleclaude_cli)
    assert git(project, "rev-parse", "HEAD") == head
    assert "A  src/greeting.py" in git(project, "status", "--porcelain")  # the merge, staged
    assert not (project / ".git" / "MERGE_HEAD").exists()
    done = finalize("greeting", cwd=project)
    assert isinstance(done, Finalized) and done.merged and done.archive == "done/001-greeting/", done
    subjects = git(project, "log", "--first-parent", "--format=%s", "main").splitlines()
    assert subjects[:3] == ["Finalize greeting", "Merge greeting", "Add roadmap and prepared items"]
    assert roadmap.read_text() == edited.replace("[>] greeting", "[x] greeting")  # the user's line kept
    assert git(project, "status", "--porcelain").split() == ["M", "todos/roadmap.md"]
    following = app.next_work(cwd=project)
    assert isinstance(following, Dispatch) and following.slug != "greeting", following


def test_another_items_finalize_undoes_the_killed_merge_first(tmp_path, teleclaude_cli, copy_repository):
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    approve(project, "shouting")
    killed_during_the_merge(project, "greeting", teleclaude_cli)
    done = finalize("shouting", cwd=project)
    assert isinstance(done, Finalized) and done.merged, done
    assert isinstance(finalize("greeting", cwd=project), Finalized)
    assert sorted(path.name for path in (project / "done").iterdir()) == ["001-shouting", "002-greeting"]


def test_an_index_changed_after_the_killed_merge_is_refused_and_left_as_it_is(
    tmp_path, teleclaude_cli, copy_repository
):
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    killed_during_the_merge(project, "greeting", teleclaude_cli)
    (project / "notes.txt").write_text("someone's work\n")
    git(project, "add", "notes.txt")
    status = git(project, "status", "--porcelain")
    refused = finalize("greeting", cwd=project)
    assert isinstance(refused, Error) and refused.code is ErrorCode.FINALIZE_REFUSED, refused
    assert git(project, "status", "--porcelain") == status
    git(project, "restore", "--staged", "notes.txt")  # what the message says to do
    dirty = finalize("greeting", cwd=project)  # the merge is undone; notes.txt is someone else's work
    assert isinstance(dirty, Error) and dirty.code is ErrorCode.FINALIZE_REFUSED, dirty
    assert (project / "notes.txt").read_text() == "someone's work\n"
    assert "src/greeting.py" not in git(project, "status", "--porcelain")
    (project / "notes.txt").rename(tmp_path / "notes.txt")
    done = finalize("greeting", cwd=project)
    assert isinstance(done, Finalized) and done.merged, done


def test_a_pre_merge_commit_hook_that_refuses_is_refused_not_a_merge_conflict(tmp_path, copy_repository):
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    git_hook(project, "pre-merge-commit", "#!/bin/sh\necho 'no merges on Fridays' >&2\nexit 1\n")
    head, status = git(project, "rev-parse", "HEAD"), git(project, "status", "--porcelain")
    refused = finalize("greeting", cwd=project)
    assert isinstance(refused, Error) and refused.code is ErrorCode.FINALIZE_REFUSED, refused
    assert "no merges on Fridays" in refused.message
    assert (git(project, "rev-parse", "HEAD"), git(project, "status", "--porcelain")) == (head, status)
