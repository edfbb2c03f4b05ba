"""next_work / next_prepare against real git repositories (pytest-git) and a real availability database."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from teleclaude.adapters import fs
from teleclaude.adapters import git as gitx
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.errors import Call, Error, ErrorCode
from teleclaude.planner import api as app
from teleclaude.planner.core.model import AgentReport, Complete, Dispatch, Prepared, RunYourself, Step
from teleclaude.runtime.core.sessions import Session, SessionState

from .repos import PLAN, commit, git, prepare, tree, write
from .repos import repo as repo  # noqa: F401 (the fixture)


def work(root: Path, slug: str | None = None, cwd: Path | None = None):
    return app.next_work(slug, cwd=cwd or root)


# --- step 1: choosing -----------------------------------------------------------------------------


def test_first_call_claims_the_item_and_creates_its_worktree(repo):
    before = (repo / "todos/roadmap.md").read_bytes()
    action = work(repo)
    assert isinstance(action, Dispatch)
    assert (action.step, action.slug, action.subfolder, action.project) == (
        Step.BUILD,
        "feat",
        "trees/feat",
        str(repo),
    )
    after = (repo / "todos/roadmap.md").read_bytes()
    assert after == before.replace(b"- [ ] feat", b"- [>] feat")
    assert git(tree(repo), "rev-parse", "--abbrev-ref", "HEAD").strip() == "feat"
    assert "/trees/" in (repo / ".git/info/exclude").read_text().splitlines()
    # the main checkout shows only the roadmap edit, not trees/
    assert git(repo, "status", "--porcelain").splitlines() == [" M todos/roadmap.md"]


def test_an_answer_that_changes_nothing_comes_while_another_call_reads_under_the_lock(repo):
    """A run's lanes ask side by side: a step after a step is decided beside another reader (the lock held
    shared), where a writer would wait for it."""
    first = work(repo)  # claims the item and makes its worktree: under the lock of its own
    with fs.project_lock(gitx.find_repo(repo).common_dir, shared=True):
        assert app.next_work("feat", cwd=repo, shared=True) == first


def test_a_dry_run_says_the_first_step_and_claims_nothing(repo):
    before = (repo / "todos/roadmap.md").read_bytes()
    branches = git(repo, "branch", "--list")
    rehearsed = app.next_work(cwd=repo, dry_run=True)
    assert isinstance(rehearsed, Dispatch)
    assert (rehearsed.step, rehearsed.subfolder) == (Step.BUILD, "trees/feat")
    assert (repo / "todos/roadmap.md").read_bytes() == before  # still `[ ]`
    assert not (repo / "trees").exists() and git(repo, "branch", "--list") == branches
    assert work(repo) == rehearsed  # the real call says the same, and does what it says


def test_a_failed_worker_is_news_only_for_its_own_step_and_comes_whole(repo):
    """The NOTE says why the last worker of this step failed, with the output its error quotes; the failure of
    another step (an earlier review, say) is not carried into a later build's note."""
    store, now = SessionStore(), datetime.now(UTC)

    def failed(command: str, error: str, minutes: int) -> None:
        at = now - timedelta(minutes=minutes)
        store.save(
            Session(
                id=f"s{minutes}",
                agent="claude",
                command=command,
                args="feat",
                project=str(repo.resolve()),
                subfolder=None,
                state=SessionState.ERRORED,
                created_at=at,
                updated_at=at,
                last_error=error,
            )
        )

    failed("next-review", "the reviewer crashed", 10)
    assert work(repo).note is None
    exited = "claude exited before showing its prompt. Its last output:\nPlease log in\nRun it by hand"
    failed("next-build", exited, 5)
    assert "Please log in" in (work(repo).note or "")


def test_second_call_is_stable(repo):
    first, second = work(repo), work(repo)
    assert first == second
    assert (repo / "todos/roadmap.md").read_text().count("[>]") == 1


def test_open_bug_comes_first(repo):
    write(repo, "todos/bugs.md", "# Bugs\n- [x] old\n- [ ] crash on start\n")
    action = work(repo)
    assert (action.step, action.subfolder, action.command) == (Step.BUGS, None, "next-bugs")
    assert not tree(repo).exists()


def test_active_item_wins_over_earlier_pending_one(repo):
    prepare(repo, "other")
    write(repo, "todos/roadmap.md", "- [ ] feat\n- [>] other\n")
    commit(repo)
    assert work(repo).slug == "other"


def test_blocked_items_give_deps_unsatisfied_and_write_nothing(repo):
    write(repo, "todos/roadmap.md", "- [ ] feat (after: base)\n- [>] base\n")
    commit(repo)
    write(repo, "todos/roadmap.md", "- [ ] feat (after: base)\n- [ ] base (after: feat)\n")
    before = (repo / "todos/roadmap.md").read_bytes()
    action = work(repo)
    assert action.code is ErrorCode.DEPS_UNSATISFIED
    assert (repo / "todos/roadmap.md").read_bytes() == before


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_named_item_whose_dependency_is_open_is_refused_and_nothing_is_started(repo, dry_run):
    write(repo, "todos/roadmap.md", "- [ ] other — first\n- [ ] feat (after: other) — then\n")
    commit(repo)
    before = (repo / "todos/roadmap.md").read_bytes()
    action = app.next_work("feat", cwd=repo, dry_run=dry_run)
    assert isinstance(action, Error) and (action.code, action.slug) == (ErrorCode.DEPS_UNSATISFIED, "feat")
    assert action.next_step == Call("next_work", (("slug", "other"),))
    assert (repo / "todos/roadmap.md").read_bytes() == before and not (repo / "trees").exists()


def test_a_new_item_is_not_started_over_the_users_uncommitted_work_in_main(repo):
    """Its finalize would refuse to merge over them: said before a build is paid for, nothing claimed."""
    write(repo, "src/app.py", "print('mine')\n")
    before = (repo / "todos/roadmap.md").read_bytes()
    action = work(repo, "feat")
    assert isinstance(action, Error) and (action.code, action.slug) == (ErrorCode.MAIN_NOT_CLEAN, "feat")
    assert "src/" in action.message
    assert (repo / "todos/roadmap.md").read_bytes() == before and not (repo / "trees").exists()
    commit(repo)
    assert work(repo, "feat").step is Step.BUILD


def test_archived_dependency_is_satisfied(repo):
    write(repo, "todos/roadmap.md", "- [ ] feat (after: base)\n- [ ] base\n")
    write(repo, "done/001-base/requirements.md", "old\n")
    commit(repo)
    assert work(repo).slug == "feat"
    assert work(repo, "base") == Complete("base", "done/001-base/")
    assert "- [x] base" in (repo / "todos/roadmap.md").read_text()


def test_missing_roadmap_is_no_work(git_repo):
    root = Path(git_repo.workspace)
    assert work(root).code is ErrorCode.NO_WORK
    assert not (root / "todos").exists()


def test_everything_done_is_no_work(repo):
    write(repo, "todos/roadmap.md", "- [x] feat\n- [x] other\n")
    assert work(repo).code is ErrorCode.NO_WORK


def test_checkboxes_in_code_fences_are_not_work(repo):
    write(repo, "todos/roadmap.md", "```\n- [ ] feat\n```\n")
    assert work(repo).code is ErrorCode.NO_WORK
    assert "- [ ] feat" in (repo / "todos/roadmap.md").read_text()


@pytest.mark.parametrize("slug", ["../x", "-rf", "a b", "A", "x" * 200])
def test_hostile_slugs_are_refused_and_nothing_is_created(repo, slug):
    for call in (app.next_work, app.next_prepare):
        action = call(slug, cwd=repo)
        assert isinstance(action, Error) and action.code is ErrorCode.INVALID_SLUG
    assert not (repo / "trees").exists()
    assert git(repo, "branch", "--list").split() == ["*", git(repo, "branch", "--show-current").strip()]


# --- steps 2-5 --------------------------------------------------------------------------------------


def test_archived_item_is_complete_and_marked_done(repo):
    (repo / "done").mkdir()
    git(repo, "mv", "todos/feat", "done/004-feat")
    commit(repo)
    action = work(repo, "feat")
    assert action == Complete("feat", "done/004-feat/")
    assert (repo / "todos/roadmap.md").read_text().splitlines()[1] == "- [x] feat — the feature"


def test_unprepared_item_is_not_prepared(repo):
    action = work(repo, "other")
    assert action.code is ErrorCode.NOT_PREPARED and "feat" in action.message  # what could be worked
    assert not tree(repo, "other").exists()


def test_not_prepared_claims_nothing(repo):
    write(repo, "todos/roadmap.md", "- [ ] other\n- [ ] feat\n")
    commit(repo)
    before = (repo / "todos/roadmap.md").read_bytes()
    assert work(repo).code is ErrorCode.NOT_PREPARED
    assert (repo / "todos/roadmap.md").read_bytes() == before
    assert git(repo, "status", "--porcelain") == ""


def test_empty_plan_template_is_not_prepared(repo):
    prepare(repo, "other", plan="# Plan\n## Group 1\n## Group 2\n")
    commit(repo)
    assert work(repo, "other").code is ErrorCode.NOT_PREPARED


def test_uncommitted_prepared_files_dispatch_commit_pending_in_main(repo):
    prepare(repo, "other")
    action = work(repo, "other")
    assert (action.step, action.subfolder) == (Step.COMMIT, None)
    assert not tree(repo, "other").exists()


def test_repository_without_commits(git_repo):
    root = Path(git_repo.workspace)
    write(root, "todos/roadmap.md", "- [ ] feat\n")
    prepare(root, "feat")
    git(root, "add", "-A")  # staged, never committed
    assert work(root).code is ErrorCode.NO_COMMITS
    assert not tree(root).exists()


def test_existing_branch_is_reattached(repo):
    git(repo, "branch", "feat")
    git(repo, "commit", "-q", "--allow-empty", "-m", "main moves on")
    assert work(repo, "feat").step is Step.BUILD
    assert git(tree(repo), "rev-parse", "HEAD") == git(repo, "rev-parse", "feat")


def test_folder_that_is_not_a_worktree_is_refused_and_kept(repo):
    write(repo, "trees/feat/notes.txt", "mine\n")
    action = work(repo)
    assert action.code is ErrorCode.WORKTREE_FAILED
    assert (repo / "trees/feat/notes.txt").read_text() == "mine\n"
    assert git(repo, "branch", "--list", "feat") == ""


def test_worktree_whose_entry_was_pruned_is_refused(repo):
    work(repo)
    git(repo, "worktree", "prune")  # nothing to prune yet
    subprocess.run(["rm", "-rf", str(repo / ".git/worktrees/feat")], check=True)
    assert work(repo).code is ErrorCode.WORKTREE_FAILED


def test_empty_trees_folder_is_filled(repo):
    tree(repo).mkdir(parents=True)
    assert work(repo).step is Step.BUILD


def test_deleted_worktree_folder_is_recreated(repo):
    work(repo)
    subprocess.run(["rm", "-rf", str(tree(repo))], check=True)  # registered worktree, folder gone
    assert work(repo).step is Step.BUILD
    assert (tree(repo) / "todos/feat/implementation-plan.md").exists()


def test_branch_checked_out_elsewhere_is_worktree_failed(repo):
    git(repo, "worktree", "add", "-q", "-b", "feat", str(repo.parent / f"{repo.name}-elsewhere"))
    action = work(repo)
    assert action.code is ErrorCode.WORKTREE_FAILED and "feat" in action.message


# --- steps 6-10: in the worktree ------------------------------------------------------------------


def test_worker_leftovers_dispatch_commit_pending_in_the_worktree(repo):
    work(repo)
    write(tree(repo), "src/new.py", "x = 1\n")
    action = work(repo)
    assert (action.step, action.subfolder, action.agent, action.thinking_mode) == (
        Step.COMMIT,
        "trees/feat",
        "claude",
        "fast",
    )


def test_plan_is_read_from_the_worktree_not_main(repo):
    work(repo)
    write(repo, "todos/feat/implementation-plan.md", PLAN.replace("[ ]", "[x]"))  # main copy all ticked
    commit(repo, "tick on main by mistake")
    assert work(repo).step is Step.BUILD


def tick_and_commit(root: Path, slug: str = "feat") -> None:
    plan = tree(root, slug) / f"todos/{slug}/implementation-plan.md"
    plan.write_text(
        plan.read_text().replace("- [ ] write it", "- [x] write it").replace("- [ ] test", "- [x] test")
    )
    commit(tree(root, slug), "build")


def review(root: Path, approve: bool) -> None:
    verdict = (
        "- [x] APPROVE\n- [ ] REQUEST CHANGES\n" if approve else "- [ ] APPROVE\n- [x] REQUEST CHANGES\n"
    )
    write(tree(root), "todos/feat/review-findings.md", "# Findings\n## Critical\n## Verdict\n" + verdict)
    commit(tree(root), "review")


def fix(root: Path) -> None:
    (tree(root) / "todos/feat/review-findings.md").unlink()
    commit(tree(root), "fix")


def test_build_done_dispatches_review(repo):
    work(repo)
    tick_and_commit(repo)
    action = work(repo)
    assert (action.step, action.agent, action.command) == (Step.REVIEW, "codex", "next-review")


def test_changes_requested_dispatch_fix_then_round_limit(repo):
    work(repo)
    tick_and_commit(repo)
    for _ in range(3):
        review(repo, approve=False)
        assert work(repo).step is Step.FIX
        fix(repo)
        assert work(repo).step is Step.REVIEW
    review(repo, approve=False)
    assert work(repo).code is ErrorCode.REVIEW_ROUND_LIMIT


def test_round_limit_from_project_config(repo):
    write(repo, "teleclaude.toml", "max_review_rounds = 1\n")
    commit(repo)  # the user's file: uncommitted, no new item would start over it
    work(repo)
    tick_and_commit(repo)
    review(repo, approve=False)
    fix(repo)
    review(repo, approve=False)
    assert work(repo).code is ErrorCode.REVIEW_ROUND_LIMIT


def test_approved_dispatches_finalize_in_main_with_next_archive_number(repo):
    write(repo, "done/007-older/requirements.md", "x\n")
    commit(repo)
    work(repo)
    tick_and_commit(repo)
    review(repo, approve=True)
    action = work(repo)
    assert (action.step, action.subfolder) == (Step.FINALIZE, None)
    assert "done/008-feat/" in action.note


# --- where the call comes from ---------------------------------------------------------------------


def test_cwd_in_worktree_or_subfolder_resolves_to_the_main_checkout(repo):
    first = work(repo)
    (repo / "todos/feat/sub").mkdir()
    assert work(repo, cwd=tree(repo) / "todos") == first
    assert work(repo, cwd=repo / "todos/feat/sub") == first
    assert app.next_prepare("feat", cwd=tree(repo)).slug == "feat"


def test_not_a_git_repository(tmp_path):
    assert work(tmp_path).code is ErrorCode.NOT_A_GIT_REPO
    assert work(tmp_path / "missing").code is ErrorCode.NOT_A_GIT_REPO
    action = app.next_prepare(cwd=tmp_path)
    assert isinstance(action, Error) and action.code is ErrorCode.NOT_A_GIT_REPO


def test_broken_config_is_reported_not_raised(repo):
    write(repo, "teleclaude.toml", "max_review_rounds = [\n")
    assert work(repo).code is ErrorCode.INVALID_CONFIG


# --- agents -----------------------------------------------------------------------------------------


def test_fallback_through_the_real_database(repo):
    assert work(repo).agent == "gemini"
    app.mark_agent_unavailable("gemini", "2h", "quota_exhausted", cwd=repo)
    assert work(repo).agent == "claude"
    app.mark_agent_unavailable("gemini", "2020-01-01T00:00:00Z", "old", cwd=repo)  # a past time
    assert work(repo).agent == "gemini"
    for agent in ("gemini", "claude", "codex"):
        app.mark_agent_unavailable(agent, "45m", "rate_limited", cwd=repo)
    action = work(repo)
    assert isinstance(action, RunYourself) and action.subfolder == "trees/feat"
    app.mark_agent_available("claude", cwd=repo)
    assert work(repo).agent == "claude"


def test_codex_gets_the_same_command_name(repo):
    write(repo, "teleclaude.toml", '[matrix]\nbuild = ["codex:slow"]\n')
    commit(repo)
    action = work(repo)
    assert (action.agent, action.thinking_mode, action.command) == ("codex", "slow", "next-build")


def test_unknown_agent_and_bad_time(repo):
    marked = app.mark_agent_unavailable("gpt", "1h", cwd=repo)
    assert isinstance(marked, Error) and marked.code is ErrorCode.UNKNOWN_AGENT
    marked = app.mark_agent_unavailable("gemini", "soon", cwd=repo)
    assert isinstance(marked, Error) and marked.code is ErrorCode.INVALID_TIME
    report = app.agent_status(cwd=repo)
    assert isinstance(report, AgentReport) and report.unavailable == ()


def test_corrupt_database_is_moved_aside_and_work_goes_on(repo, isolated_environment):
    db = isolated_environment / "teleclaude.db"
    db.write_bytes(b"this is not sqlite" * 100)
    assert work(repo).agent == "gemini"
    app.mark_agent_unavailable("gemini", "1h", "x", cwd=repo)
    assert work(repo).agent == "claude"
    assert any(p.name.startswith("teleclaude.db.corrupt-") for p in db.parent.iterdir())


# --- next_prepare -----------------------------------------------------------------------------------


def test_prepare_dispatches_architects_then_reports_prepared(repo):
    action = app.next_prepare(cwd=repo)
    assert isinstance(action, Dispatch)
    assert (action.step, action.slug, action.subfolder) == (Step.REQUIREMENTS, "other", None)
    assert action.note is not None and "collaborator" in action.note
    write(repo, "todos/other/requirements.md", "# other\n")
    action = app.next_prepare(cwd=repo)
    assert isinstance(action, Dispatch) and action.step is Step.PLAN
    write(repo, "todos/other/implementation-plan.md", PLAN)
    assert app.next_prepare(cwd=repo) == Prepared("feat")
    assert app.next_prepare("other", cwd=repo) == Prepared("other")


def test_prepare_writes_nothing(repo):
    before = git(repo, "status", "--porcelain", "--ignored")
    app.next_prepare(cwd=repo)
    assert git(repo, "status", "--porcelain", "--ignored") == before
    assert not (repo / "trees").exists()


def test_claim_keeps_crlf_bom_trailing_spaces_and_missing_final_newline(repo):
    original = "\ufeff# Roadmap  \r\n\r\n* [ ] feat — the feature   \r\n- [ ] other".encode()
    (repo / "todos/roadmap.md").write_bytes(original)
    commit(repo)
    assert work(repo).step is Step.BUILD
    after = (repo / "todos/roadmap.md").read_bytes()
    assert after == original.replace(b"* [ ] feat", b"* [>] feat")


def test_gitignored_prepared_files_stop_before_the_worktree(repo):
    write(repo, ".gitignore", "todos/*/\n")
    git(repo, "rm", "-r", "-q", "--cached", "todos/feat")
    commit(repo, "ignore item folders")
    before = (repo / "todos/roadmap.md").read_bytes()
    action = work(repo)
    assert action.code is ErrorCode.NOT_PREPARED and not tree(repo).exists()
    assert (repo / "todos/roadmap.md").read_bytes() == before


def test_symlinked_roadmap_is_rewritten_through_the_link(repo):
    (repo / "ROADMAP.md").write_bytes((repo / "todos/roadmap.md").read_bytes())
    (repo / "todos/roadmap.md").unlink()
    (repo / "todos/roadmap.md").symlink_to("../ROADMAP.md")
    commit(repo, "link")
    assert work(repo).step is Step.BUILD
    assert (repo / "todos/roadmap.md").is_symlink()
    assert "- [>] feat" in (repo / "ROADMAP.md").read_text()


def test_failed_worktree_creation_claims_nothing(repo):
    (repo / "trees").mkdir()
    (repo / "trees/feat").symlink_to("/nonexistent-teleclaude-target")
    before = (repo / "todos/roadmap.md").read_bytes()
    assert work(repo).code is ErrorCode.WORKTREE_FAILED
    assert (repo / "todos/roadmap.md").read_bytes() == before


def test_unreadable_availability_database_means_everyone_is_available(repo, monkeypatch, tmp_path):
    folder = tmp_path / "db-is-a-folder"
    folder.mkdir()
    monkeypatch.setenv("TELECLAUDE_DB", str(folder))
    assert work(repo).agent == "gemini"


def test_file_errors_are_reported_not_raised(repo):
    (repo / "todos/roadmap.md").unlink()
    (repo / "todos/roadmap.md").symlink_to("roadmap.md")  # a link to itself: reading it fails
    for call in (app.next_prepare, app.next_work):
        action = call(cwd=repo)
        assert isinstance(action, Error) and action.code is ErrorCode.FILE_ERROR
        assert "roadmap.md" in action.message
