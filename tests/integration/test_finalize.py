"""`teleclaude finalize SLUG`: every finalize merges under the project lock, however it was started."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from teleclaude.adapters import fs
from teleclaude.adapters import git as gitx
from teleclaude.cli import main as cli_main
from teleclaude.demo.workers import git, make_repository
from teleclaude.errors import Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import Complete, Dispatch, Step
from teleclaude.planner.finalize import Finalized, _merge, finalize

from ..scripted import approve, git_hook


def holding_the_lock(process: subprocess.Popen, lock: Path) -> bool:
    """Whether `process` has the project lock file open: while the test holds the lock, it waits on it."""
    assert process.poll() is None, process.communicate()
    fds = Path(f"/proc/{process.pid}/fd")
    try:
        return any(fd.resolve() == lock for fd in fds.iterdir())
    except OSError:  # an fd closed between listing and reading it
        return False


def wait_until(check, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting")
        time.sleep(0.02)


def test_two_finalizes_started_together_merge_one_after_the_other_with_their_own_numbers(
    tmp_path, teleclaude_cli, copy_repository
):
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    approve(project, "shouting")
    repo = gitx.find_repo(project)
    lock = (repo.common_dir / fs.LOCK_NAME).resolve()
    with fs.project_lock(repo.common_dir):  # both wait on the lock, then race for it
        both = [teleclaude_cli(project, "finalize", slug) for slug in ("greeting", "shouting")]
        wait_until(lambda: all(holding_the_lock(process, lock) for process in both))
    results = [process.communicate(timeout=60) for process in both]
    for process, (out, err) in zip(both, results, strict=True):
        assert process.returncode == 0, out + err
        assert out.startswith("FINALIZED:")
    names = sorted(path.name for path in (project / "done").iterdir())
    assert sorted(name[4:] for name in names) == ["greeting", "shouting"]
    assert sorted(name[:3] for name in names) == ["001", "002"]  # no archive number twice
    subjects = git(project, "log", "--first-parent", "--format=%s", "main").splitlines()[:4]
    # each merge is followed by its own finalize commit: the two never interleave
    assert subjects[0].startswith("Finalize ") and subjects[1] == "Merge " + subjects[0].split()[1]
    assert subjects[2].startswith("Finalize ") and subjects[3] == "Merge " + subjects[2].split()[1]
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert isinstance(app.next_work("greeting", cwd=project), Complete)


def test_a_finalize_of_an_item_that_is_not_approved_is_refused_and_changes_nothing(
    tmp_path, capsys, copy_repository
):
    project = copy_repository(make_repository, tmp_path / "project")
    build = app.next_work("greeting", cwd=project)
    assert isinstance(build, Dispatch) and build.step is Step.BUILD
    head = git(project, "rev-parse", "HEAD")
    refused = finalize("greeting", cwd=project)
    assert isinstance(refused, Error) and refused.code is ErrorCode.FINALIZE_REFUSED
    assert git(project, "rev-parse", "HEAD") == head and not (project / "done").exists()
    assert cli_main(["finalize", "greeting", "--cwd", str(project)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == "ERROR: FINALIZE_REFUSED"


def test_a_dirty_main_checkout_is_refused_and_a_second_finalize_does_nothing(tmp_path, copy_repository):
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    (project / "scratch.txt").write_text("someone else's work\n")
    refused = finalize("greeting", cwd=project)
    assert isinstance(refused, Error) and refused.code is ErrorCode.FINALIZE_REFUSED
    (project / "scratch.txt").unlink()
    done = finalize("greeting", cwd=project)
    assert isinstance(done, Finalized) and done.merged and done.archive == "done/001-greeting/"
    head = git(project, "rev-parse", "HEAD")
    again = finalize("greeting", cwd=project)
    assert isinstance(again, Finalized) and not again.merged and again.archive == "done/001-greeting/"
    assert (git(project, "rev-parse", "HEAD"), git(project, "status", "--porcelain")) == (head, "")


def test_next_work_sends_no_finalizer_while_the_main_checkout_holds_a_users_file(
    tmp_path, capsys, copy_repository
):
    """The finalize would refuse, three times over; the planner sees the dirty main before sending one."""
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    (project / "scratch.txt").write_text("the user's own work\n")
    refused = app.next_work("greeting", cwd=project)
    assert isinstance(refused, Error) and refused.code is ErrorCode.FINALIZE_REFUSED
    assert cli_main(["next-work", "greeting", "--cwd", str(project)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == "ERROR: FINALIZE_REFUSED"
    assert (project / "scratch.txt").read_text() == "the user's own work\n"  # untouched
    (project / "scratch.txt").unlink()
    action = app.next_work("greeting", cwd=project)
    assert isinstance(action, Dispatch) and action.step is Step.FINALIZE


def test_a_merge_that_conflicts_is_aborted_and_sends_the_merge_fixer(tmp_path, capsys, copy_repository):
    """main can move between the planner's pre-merge check and the merge (another finalize, a person): the
    merge itself then meets the conflict. It is aborted, main is left as it was, the fixer is sent."""
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    (project / "src").mkdir(exist_ok=True)
    (project / "src" / "greeting.py").write_text('"""greeting, written on main meanwhile."""\n')
    git(project, "add", "--", "src/greeting.py")
    git(project, "commit", "-q", "-m", "main moves on")
    head, status = git(project, "rev-parse", "HEAD"), git(project, "status", "--porcelain")
    repo = gitx.find_repo(project)
    conflict = _merge(repo, "greeting", "done/001-greeting/")  # the merge step itself, past the check
    assert isinstance(conflict, Error) and conflict.code is ErrorCode.MERGE_CONFLICT
    assert git(project, "rev-parse", "HEAD") == head  # main is as it was
    assert not (repo.common_dir / "MERGE_HEAD").exists()
    assert git(project, "status", "--porcelain") == status  # the roadmap's [>] marks, as next_work left them
    assert "<<<<<<<" not in (project / "src" / "greeting.py").read_text()
    assert not (project / "done").exists()
    fixer = app.next_work("greeting", cwd=project)
    assert isinstance(fixer, Dispatch) and fixer.command == "next-fix-merge", fixer
    assert cli_main(["finalize", "greeting", "--cwd", str(project)]) == 1  # found before merging, too
    assert capsys.readouterr().out.splitlines()[0] == "ERROR: MERGE_CONFLICT"
    assert git(project, "rev-parse", "HEAD") == head and not (project / "done").exists()


def test_a_finalize_waits_for_an_index_lock_another_git_process_holds_briefly(tmp_path, copy_repository):
    """Another finalizer's agent runs `git status`, an editor stages a file: for that moment git refuses
    every command that writes the index. The finalize tries again and delivers once the lock is gone."""
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    lock = project / ".git" / "index.lock"
    lock.write_bytes(b"")
    release = threading.Timer(0.5, lock.unlink)
    release.start()
    try:
        done = finalize("greeting", cwd=project)
    finally:
        release.join()
    assert isinstance(done, Finalized) and done.merged and done.archive == "done/001-greeting/", done
    subjects = git(project, "log", "--first-parent", "--format=%s", "main").splitlines()
    assert subjects[:2] == ["Finalize greeting", "Merge greeting"]
    assert "[x] greeting" in git(project, "show", "HEAD:todos/roadmap.md")
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "branch", "--list", "greeting").strip() == ""


def test_a_git_command_refused_for_the_index_lock_runs_again_once_it_is_free(tmp_path, copy_repository):
    """The finalize's later steps (`git mv`, `git add`, `git commit`) go through the same adapter."""
    project = copy_repository(make_repository, tmp_path / "project")
    (project / "notes.txt").write_text("a note\n")
    lock = project / ".git" / "index.lock"
    lock.write_bytes(b"")
    release = threading.Timer(0.5, lock.unlink)
    release.start()
    try:
        gitx.run_git(["add", "--", "notes.txt"], project)
        gitx.run_git(["commit", "-q", "-m", "Add a note"], project)
    finally:
        release.join()
    assert git(project, "log", "-1", "--format=%s").strip() == "Add a note"


@pytest.mark.parametrize("markers", ["uncommitted", "committed"])
def test_an_index_lock_held_past_the_wait_is_lock_timeout_and_changes_nothing(
    tmp_path, capsys, copy_repository, monkeypatch, markers
):
    """With the roadmap's markers uncommitted git's merge fails stashing them; with a clean main checkout
    it fails writing the index and leaves its merge state (MERGE_HEAD), which is taken back."""
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    if markers == "committed":
        git(project, "commit", "-q", "-am", "Mark greeting")
    monkeypatch.setattr(gitx, "INDEX_LOCK_WAIT", 1.0)
    head, status = git(project, "rev-parse", "HEAD"), git(project, "status", "--porcelain")
    (project / ".git" / "index.lock").write_bytes(b"")  # a git process that crashed, or a long one
    assert cli_main(["finalize", "greeting", "--cwd", str(project)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == "ERROR: LOCK_TIMEOUT"
    assert git(project, "rev-parse", "HEAD") == head
    assert not (project / ".git" / "MERGE_HEAD").exists()  # git's merge state, taken back
    assert not (project / "done").exists() and (project / "todos" / "greeting").is_dir()
    (project / ".git" / "index.lock").unlink()
    assert git(project, "status", "--porcelain") == status
    assert git(project, "branch", "--list", "greeting").strip() != ""
    done = finalize("greeting", cwd=project)  # once the lock is gone, the same command delivers
    assert isinstance(done, Finalized) and done.merged, done


def test_a_finalize_commit_refused_by_a_hook_says_so_and_the_next_finalize_completes_it(
    tmp_path, capsys, copy_repository
):
    """The merge is committed, then a pre-commit hook refuses `Finalize greeting`: the error names the state
    main is in and the next step; once the hook is fixed, finalizing again commits the archive and the [x]
    and removes the worktree and branch (no reset, no second merge)."""
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    hook = git_hook(
        project, "pre-commit", "#!/bin/sh\necho 'lint: greeting.py is not formatted' >&2\nexit 1\n"
    )
    assert cli_main(["finalize", "greeting", "--cwd", str(project)]) == 1
    said = capsys.readouterr().out
    assert said.splitlines()[0] == "ERROR: FINALIZE_REFUSED"
    assert "lint: greeting.py is not formatted" in said  # what the hook said
    assert git(project, "log", "-1", "--format=%s").strip() == "Merge greeting"
    assert (project / "done" / "001-greeting").is_dir()  # staged, not committed
    assert git(project, "ls-tree", "-r", "--name-only", "HEAD", "--", "done").strip() == ""
    hook.unlink()  # the hook's complaint is dealt with
    done = finalize("greeting", cwd=project)
    assert isinstance(done, Finalized) and done.merged and done.archive == "done/001-greeting/", done
    subjects = git(project, "log", "--first-parent", "--format=%s", "main").splitlines()
    assert subjects[:2] == ["Finalize greeting", "Merge greeting"]
    assert subjects.count("Finalize greeting") == 1 and subjects.count("Merge greeting") == 1
    assert git(project, "ls-tree", "-r", "--name-only", "HEAD", "--", "done/001-greeting").strip() != ""
    assert git(project, "ls-tree", "-r", "--name-only", "HEAD", "--", "todos/greeting").strip() == ""
    assert "[x] greeting" in git(project, "show", "HEAD:todos/roadmap.md")
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(project, "branch", "--list", "greeting").strip() == ""
    head = git(project, "rev-parse", "HEAD")
    again = finalize("greeting", cwd=project)
    assert isinstance(again, Finalized) and not again.merged
    assert (git(project, "rev-parse", "HEAD"), git(project, "status", "--porcelain")) == (head, "")


def test_the_finalize_commit_takes_only_the_items_x_from_the_roadmap_and_leaves_a_users_edit_uncommitted(
    tmp_path,
    copy_repository,
):
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    approve(project, "shouting")  # its [>] is next_work's uncommitted marker
    roadmap = project / "todos" / "roadmap.md"
    edited = roadmap.read_text() + "- [ ] polish — someone is still writing this line\n"
    roadmap.write_text(edited)  # a user's edit, not committed
    done = finalize("greeting", cwd=project)
    assert isinstance(done, Finalized) and done.merged, done
    changed = [
        line
        for line in git(project, "diff", "HEAD^", "HEAD", "--", "todos/roadmap.md").splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert len(changed) == 2 and "greeting" in changed[0] and "[x] greeting" in changed[1], changed
    assert "polish" not in git(project, "show", "HEAD:todos/roadmap.md")
    assert roadmap.read_text() == edited.replace("[>] greeting", "[x] greeting")  # every byte of it kept
    assert git(project, "status", "--porcelain").split() == ["M", "todos/roadmap.md"]


def test_a_delivered_items_plan_leaves_the_parse_cache(tmp_path, copy_repository):
    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    cache = Path(gitx.find_repo(project).common_dir) / "teleclaude-cache"
    assert (cache / "plan-greeting.json").exists()  # next_work parsed its plan on the way
    done = finalize("greeting", cwd=project)
    assert isinstance(done, Finalized) and done.merged, done
    assert not (cache / "plan-greeting.json").exists()
    assert (cache / "roadmap.json").exists()


def test_a_workers_finalize_refused_on_a_dirty_main_is_also_sent_when_notify_is_set(
    tmp_path, capsys, copy_repository, monkeypatch
):
    import os

    from ..servers import Receiver

    project = copy_repository(make_repository, tmp_path / "project")
    approve(project, "greeting")
    (project / "scratch.txt").write_text("someone else's work\n")
    with Receiver() as receiver:
        path = Path(os.environ["XDG_CONFIG_HOME"]) / "teleclaude" / "notify.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'[notify]\nurls = ["{receiver.url()}"]\n')
        path.chmod(0o600)
        assert cli_main(["finalize", "greeting", "--cwd", str(project)]) == 1  # a person's: at the terminal
        assert receiver.messages == []
        monkeypatch.setenv("TELECLAUDE_SESSION_ID", "a1b2c3d4")  # an orchestrator agent's finalizer
        assert cli_main(["finalize", "greeting", "--cwd", str(project)]) == 1
        (message,) = receiver.messages
    assert capsys.readouterr().out.splitlines()[0] == "ERROR: FINALIZE_REFUSED"
    assert message["title"] == "teleclaude: greeting not finalized"
    assert message["message"].splitlines()[-1] == f"next: cd {project} && teleclaude finalize greeting"
