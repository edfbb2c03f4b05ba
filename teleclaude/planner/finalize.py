"""`teleclaude finalize SLUG`: the finalizer's merge, under the project lock.

Whoever finalizes (a worker the runtime started, an orchestrator agent doing `/next-finalize` itself, a
person), the merge into the main checkout, the archive folder `done/NNN-{slug}/`, the roadmap's `[x]` and
their commit happen here, in one step under the same lock next_work and the runtime's starts take. So two
finalizes never merge at once, and the archive number is read after the previous finalize committed: it
never collides. Before merging, the planner is asked (under that lock) whether finalize is the item's next
step, so an unapproved branch is refused, and one that no longer merges cleanly is `MERGE_CONFLICT`
(another finalize merged first: next_work sends next-fix-merge).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, replace

from teleclaude.adapters import fs, sandbox_branch
from teleclaude.adapters import git as gitx
from teleclaude.adapters.settings import load_config
from teleclaude.config.matrix import Config
from teleclaude.errors import Error, ErrorCode, FrontEnd, call, guard
from teleclaude.planner import api as app
from teleclaude.planner import gate, mainref
from teleclaude.planner.core import layout
from teleclaude.planner.core.decide import decide_work, main_not_clean
from teleclaude.planner.core.gate import GateRun, Verdict
from teleclaude.planner.core.model import Complete, Dispatch, RunYourself, Step, WorktreeState
from teleclaude.planner.core.render import to_text
from teleclaude.planner.core.terminal import printable

# In the git common dir while a finalize's `git merge` runs: the item, main's HEAD before, the branch tip.
INTENT = "teleclaude-finalize"


@dataclass(frozen=True)
class Finalized:
    slug: str
    archive: str  # "done/NNN-slug/"
    merged: bool  # False: it was archived already, nothing was done
    gate: str = ""  # the [checks] gate's verdict on the merged tree, in one line ("": not gated)

    def text(self) -> str:
        if not self.merged:
            return f"FINALIZED:\n{self.slug} was delivered to {self.archive} already; nothing to do."
        gate = f"\n{printable(self.gate[0].upper() + self.gate[1:])}." if self.gate else ""
        return (
            f"FINALIZED:\n{self.slug} merged into the main checkout, archived to {self.archive}, marked [x], "
            f"its worktree and branch removed.{gate}\nRun {call('next_work').spelled(FrontEnd.CLI)} for what "
            "comes next."
        )


REGATES = 20  # main moved on while the gate ran this often in a row: give up (a busy repository)


@guard
def finalize(slug: str, cwd: str | os.PathLike | None = None) -> Finalized | Error:
    """With a [checks] gate, the merge it is about to make is gated first, outside the lock (other claims and
    finalizes go on meanwhile); under the lock it merges only the main and branch tip that passed, else the
    new combination is gated again. Red: main is untouched and the item goes back to be fixed."""
    repo = gitx.find_repo(cwd or os.getcwd())
    config = load_config(repo.root)
    checks = gate.checks_of(config)
    gated: gate.Gated | None = None
    if checks is not None and _looks_approved(app.RepoFacts(repo, config), slug):
        gated = gate.gate_merge(repo, slug, checks)
    for _ in range(REGATES):
        if gated is not None and not gated.run.passed:
            return _gate_failed(repo, slug, gated.run)
        with fs.project_lock(repo.common_dir):
            decided = _decide(repo, config, slug)
            if not isinstance(decided, str):
                return decided
            if checks is None:
                return _merge(repo, slug, decided)
            if gated is not None and _unchanged(repo, slug, gated):
                merged = _merge(repo, slug, decided)
                return replace(merged, gate=gated.run.summary()) if isinstance(merged, Finalized) else merged
        gated = gate.gate_merge(repo, slug, checks)  # main moved on meanwhile: the new combination
    return _refused(slug, f"main moved on {REGATES} times while {slug}'s gate ran; finalize it again.")


def _decide(repo: gitx.Repo, config: Config, slug: str) -> Finalized | Error | str:
    """Under the lock: what is left of an interrupted finalize undone, then the planner asked; the archive
    folder when the finalize may merge."""
    interrupted = _undo_interrupted_merge(repo)
    if interrupted is not None:
        return interrupted
    facts = app.RepoFacts(repo, config)
    decision = decide_work(facts, slug)
    match decision.action:
        case Complete(archive=archive):
            return _finish(repo, slug, archive)
        case Dispatch(step=Step.FINALIZE) | RunYourself(step=Step.FINALIZE) if not decision.effects:
            pass
        case Dispatch(step=Step.FIX_MERGE) | RunYourself(step=Step.FIX_MERGE):  # main moved on meanwhile
            return _conflict(slug, facts.merge_conflicts(slug))
        case Error() as error:
            return error
        case None:
            return Error(
                ErrorCode.FINALIZE_REFUSED,
                "not ready to finalize: ask for its next step.",
                slug,
                call("next_work", slug=slug),
            )
        case other:
            step = to_text(other).splitlines()
            return _refused(slug, "its next step is not a finalize:\n" + "\n".join(step[:12]))
    # (a dirty main checkout is refused by the planner's answer above: `decide.main_not_clean`)
    return facts.next_archive(slug)


def _looks_approved(facts: app.RepoFacts, slug: str) -> bool:
    """From the files alone, without the lock or git, to gate before taking it: its worktree, a built plan, an
    approving review. The planner's answer under the lock decides."""
    if gitx.worktree_state(facts.repo, slug).state is not WorktreeState.PRESENT:
        return False
    plan, review = facts.plan(slug), facts.review(slug)
    return plan is not None and plan.built and review is not None and review.approved


def _unchanged(repo: gitx.Repo, slug: str, gated: gate.Gated) -> bool:
    """Main and the branch are still the two commits the gate passed."""
    try:
        now = gitx.run_git(["rev-parse", gitx.main_head_ref(repo), f"refs/heads/{slug}"], repo.root).split()
    except subprocess.CalledProcessError:  # the branch is gone
        return False
    return now == [gated.main, gated.tip]


def _gate_failed(repo: gitx.Repo, slug: str, run: GateRun) -> Error:
    said = printable(run.summary())
    if run.verdict is Verdict.BROKEN:
        return Error(
            ErrorCode.GATE_BROKEN,
            f"{slug} was not merged: {said}; the main checkout and trees/{slug} are as they were.\n"
            f"{gate.BROKEN_NEXT}",
            slug,
        )
    gate.send_back(repo, slug, run)
    findings = f"trees/{slug}/{layout.item_file(slug, layout.REVIEW)}"
    return Error(
        ErrorCode.GATE_RED,
        f"{slug} was not merged: {said}; the main checkout is untouched.\nThe gate's output is a Critical "
        f"finding in {findings} (REQUEST CHANGES), committed on branch {slug}: its next step is a fix, then "
        "a fresh review.",
        slug,
        call("next_work", slug=slug),
    )


def _merge(repo: gitx.Repo, slug: str, archive: str) -> Finalized | Error:
    root = repo.root
    intent = repo.common_dir / INTENT
    head, tip = gitx.commit_of(root, "HEAD"), gitx.branch_commit(root, slug)
    fs.atomic_write(intent, f"{slug}\n{head}\n{tip}\n".encode(), follow=False)
    try:
        gitx.run_git(["merge", "-q", "--no-ff", "-m", f"Merge {slug}", f"refs/heads/{slug}"], root)
    except subprocess.CalledProcessError as error:
        failed = _merge_failed(repo, slug, error)
        intent.unlink()  # only now: a finalize killed before the abort leaves its merge to the next one
        return failed
    intent.unlink()  # the merge is HEAD: a rerun goes on from there
    mainref.record(repo)
    try:
        (root / layout.DONE).mkdir(exist_ok=True)
        gitx.run_git(["mv", "--", layout.item_folder(slug), archive.rstrip("/")], root)
    except (OSError, subprocess.CalledProcessError) as error:
        return _refused(
            slug,
            f"{slug} is merged into the main checkout (its merge commit is HEAD), but moving "
            f"{layout.item_folder(slug)} to {archive} failed: {_why(error)}\nFix that, then run "
            f"`teleclaude finalize {slug}` again: it archives, commits and removes the worktree and branch.",
        )
    return _commit_and_clean(repo, slug, archive)


def _merge_failed(repo: gitx.Repo, slug: str, error: subprocess.CalledProcessError) -> Error:
    root = repo.root
    if isinstance(error, gitx.IndexLocked):  # for longer than the adapter waits; git changed nothing
        return Error(
            ErrorCode.LOCK_TIMEOUT,
            f"another git process held the main checkout's index lock (.git/index.lock) for over "
            f"{gitx.INDEX_LOCK_WAIT:g} s, so {slug} was not merged; the main checkout is as it was.\nRun "
            f"`teleclaude finalize {slug}` again. If it keeps failing while no git process runs, one that "
            "crashed left the file: remove it.",
            slug,
        )
    if not (repo.common_dir / "MERGE_HEAD").exists():  # the main checkout's git dir is the common one
        return _refused(slug, f"git merge {slug} failed: {_why(error)}")
    conflicted = gitx.run_git(["diff", "--name-only", "--diff-filter=U"], root).split()
    gitx.run_git(["merge", "--abort"], root)
    if not conflicted:  # it merged, but git stopped before the commit: a pre-merge-commit hook refused it
        return _refused(
            slug,
            f"git merge {slug} stopped before its commit: {_why(error)}\nThe merge was aborted and the "
            f"main checkout is as it was. Fix what git said (a hook?), then run `teleclaude finalize {slug}` "
            "again.",
        )
    return _conflict(slug, tuple(conflicted))


def _conflict(slug: str, conflicted: tuple[str, ...]) -> Error:
    return Error(
        ErrorCode.MERGE_CONFLICT,
        f"merging {slug} conflicts in {', '.join(conflicted[:10])}; nothing was merged and the main checkout "
        f"is as it was.\nAsk for the next step: it sends a merge fixer (next-fix-merge) to resolve it in "
        f"{layout.worktree(slug)}, then the finalize follows.",
        slug,
        call("next_work", slug=slug),
    )


def _undo_interrupted_merge(repo: gitx.Repo) -> Error | None:
    """Undo the merge a finalize killed inside `git merge` left staged (say, during a pre-merge-commit hook).

    git stages the merged files before it runs that hook and writes MERGE_HEAD only when it stops on its
    own, so the killed merge looks to git (and to a dirty-main check) like someone else's staged work. The
    finalize's intent file names the merge: while HEAD is still the commit it merged into and the index holds
    exactly that merge (or MERGE_HEAD is its branch tip), `git reset --merge` takes it back and keeps every
    unstaged edit (the roadmap's markers, a user's lines); the finalize then merges again. An intent whose
    HEAD moved on (the merge was committed) or whose index is clean again is only removed.
    """
    path = repo.common_dir / INTENT
    recorded = fs.read_bytes(path)
    if recorded is None:
        return None
    undone = _undo_merge(repo, recorded.decode("utf-8", "replace").split())
    if undone is None:
        path.unlink()
    return undone


def _undo_merge(repo: gitx.Repo, intent: list[str]) -> Error | None:
    root = repo.root
    if len(intent) != 3 or gitx.commit_of(root, "HEAD") != intent[1]:
        return None  # HEAD moved on: the merge was committed (or undone and main moved)
    slug, head, tip = intent
    index = gitx.index_tree(root)
    if index == gitx.run_git(["rev-parse", f"{head}^{{tree}}"], root).strip():
        return None  # nothing staged: the merge never began, or was undone already
    staged_ours = index is not None and index == gitx.merged_tree(root, head, tip)
    if gitx.commit_of(root, "MERGE_HEAD") != tip and not staged_ours:
        return _refused(
            slug,
            f"a finalize of {slug} was interrupted during its merge, and the main checkout's index has "
            "changed since, so it is not undone.\nUnstage what is not the merge's (`git restore --staged "
            "PATH`), then finalize again: it undoes the merge and merges anew.",
        )
    try:
        gitx.run_git(["reset", "-q", "--merge"], root)
    except subprocess.CalledProcessError as error:
        return _refused(
            slug,
            f"a finalize of {slug} was interrupted during its merge; undoing it failed: {_why(error)}\n"
            "Move the edits git names out of the way (made after the merge began), then finalize again.",
        )
    return None


def _finish(repo: gitx.Repo, slug: str, archive: str) -> Finalized | Error:
    """A delivered item: what an interrupted finalize left undone is done now, else nothing.

    A finalize whose own commit was refused (a pre-commit hook) leaves the merge commit, the archive and the
    roadmap's `[x]` uncommitted; the planner then already sees the item as done. Those changes are committed
    (nothing else: other uncommitted changes are refused as before), then the worktree and branch go.
    """
    root = repo.root
    ours = (archive.rstrip("/"), layout.item_folder(slug), layout.ROADMAP)
    changes = gitx.status(root).changes
    pending = [path for path in changes if path != layout.ROADMAP and _under(path, ours)]
    if pending:
        dirty = [path for path in changes if not _under(path, ours)]
        if dirty:
            return main_not_clean(slug, tuple(dirty))
        return _commit_and_clean(repo, slug, archive)
    if not _merged_branch_left(repo, slug):
        return Finalized(slug, archive, merged=False)
    return _clean(repo, slug, archive)


def _commit_and_clean(repo: gitx.Repo, slug: str, archive: str) -> Finalized | Error:
    root = repo.root
    folder = archive.rstrip("/")
    try:
        app.mark_done(repo, slug)
        item = layout.item_folder(slug)  # named only while it exists: else `git add` refuses the pathspec
        left = (root / item).exists() or gitx.run_git(["ls-files", "--", item], root).strip()
        gitx.run_git(["add", "-A", "--", folder, *([item] if left else [])], root)
        _stage_done(repo, slug)
        gitx.run_git(["commit", "-q", "-m", f"Finalize {slug}"], root)
        mainref.record(repo)
    except (OSError, subprocess.CalledProcessError) as error:
        return _refused(
            slug,
            f"{slug} is merged into the main checkout, but its archive commit failed: {_why(error)}\n"
            f"The main checkout now has the merge commit as HEAD, and the move of {layout.item_folder(slug)} "
            f"to {archive} and the roadmap's [x] uncommitted (staged). Fix what git said (a pre-commit "
            f"hook?), then run `teleclaude finalize {slug}` again: it commits them and removes the worktree "
            "and branch. Do not reset the main checkout.",
        )
    return _clean(repo, slug, archive)


def _clean(repo: gitx.Repo, slug: str, archive: str) -> Finalized | Error:
    """The item's worktree and branch removed, and with them what its sandboxed workers were given."""
    root = repo.root
    admin = None
    try:
        if gitx.worktree_state(repo, slug).state is WorktreeState.PRESENT:
            admin = gitx.worktree_git_dir(repo.tree(slug))
            gitx.run_git(["worktree", "remove", layout.worktree(slug)], root)
        if gitx.branch_commit(repo.root, slug):
            gitx.run_git(["branch", "-q", "-d", slug], root)
    except subprocess.CalledProcessError as error:
        return _refused(
            slug,
            f"{slug} is merged and archived to {archive}, but its worktree or branch could not be removed: "
            f"{_why(error)}\nLook at {layout.worktree(slug)}; remove it with git worktree remove once "
            f"nothing in it is needed, or run `teleclaude finalize {slug}` again.",
        )
    sandbox_branch.forget(repo, admin.name if admin else None, slug)
    app.forget_plan(repo, slug)
    return Finalized(slug, archive, merged=True)


def _stage_done(repo: gitx.Repo, slug: str) -> None:
    """Stage the roadmap as it is staged (normally: as committed) with only this item's `[x]` added.

    The working file keeps every byte it has: next_work's `[>]` markers and a user's unsaved-to-git edits
    stay uncommitted instead of riding along in the `Finalize` commit."""
    entry = gitx.staged(repo.root, layout.ROADMAP)
    if entry is None:
        return  # no roadmap in the index: the [x] stays in the working file only
    mode, data = entry
    done = app.marked_done(repo, data, slug)
    if done is not None:
        gitx.stage(repo.root, layout.ROADMAP, mode, done)


def _merged_branch_left(repo: gitx.Repo, slug: str) -> bool:
    """Whether the item's worktree or branch is still there although its branch is in the main checkout's
    HEAD: what a finalize stopped before its clean-up leaves. An unmerged branch is left alone."""
    commit = gitx.branch_commit(repo.root, slug)
    if not commit:
        return gitx.worktree_state(repo, slug).state is WorktreeState.PRESENT
    return gitx.in_history(repo.root, commit)


def _under(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in folders)


def _refused(slug: str, why: str) -> Error:
    return Error(ErrorCode.FINALIZE_REFUSED, why, slug)


def _why(error: OSError | subprocess.CalledProcessError) -> str:
    if isinstance(error, OSError):
        return str(error)
    said = " ".join((error.stderr or b"").decode(errors="replace").split())
    return said or f"exit status {error.returncode}"
