"""Git as facts for the planner, and the one change it makes (creating a worktree).

Every git command runs through `run_git` with an argument list. Finding the repository reads `.git` files
directly, without starting a process.
"""

from __future__ import annotations

import os
import time
from contextlib import suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from teleclaude.adapters import gitstatus, spawn
from teleclaude.errors import ErrorCode, Failure
from teleclaude.planner.core import layout
from teleclaude.planner.core.model import MainStatus, Worktree, WorktreeState

TYPE_CHECKING = False  # typing's own, without importing typing


class _Subprocess:
    """`subprocess`, imported when first used: git runs through spawn.py where it can, and the planner's
    cold path (one `git status`) never needs it; its `CalledProcessError` is what every git failure raises."""

    def __getattr__(self, name: str) -> object:
        import subprocess

        globals()["subprocess"] = subprocess
        return getattr(subprocess, name)


class NotAGitRepo(Failure):
    code = ErrorCode.NOT_A_GIT_REPO
    next_step = "Run this in a git repository (or `git init` one)."


class ForeignRepository(NotAGitRepo):
    next_step = "Unset it (git sets it for hooks of this repository only), or run this in that repository."


class WorktreeError(Failure):
    """The whole answer: what went wrong with trees/{slug} and the next step."""

    code = ErrorCode.WORKTREE_FAILED


# `git worktree add --lock --reason LOCK_REASON`, unlocked once it is complete: a worktree still locked with
# this reason was cut short (say, the process was killed) and is teleclaude's own to redo. `git worktree add`
# on its own locks with "initializing" until the checkout is done.
LOCK_REASON = "teleclaude is creating this worktree"
GIT_INITIALIZING = "initializing"
INDEX_LOCK_WAIT = 5.0  # seconds a git command waits for another git process's index lock
INDEX_LOCK_LOOK = 0.1  # seconds between its tries


@dataclass(frozen=True)
class Repo:
    root: Path  # the main checkout
    common_dir: Path  # the git directory shared by all worktrees

    def tree(self, slug: str) -> Path:
        return self.root / layout.worktree(slug)


def find_repo(cwd: str | os.PathLike) -> Repo:
    """The main checkout that `cwd` belongs to, also from inside a worktree or a subfolder."""
    start = Path(cwd).absolute()
    if not start.is_dir():
        raise NotAGitRepo(f"{start} is not a directory")
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return _own_environment(Repo(folder, dot_git), folder)
        if dot_git.is_file():
            return _own_environment(_repo_from_gitfile(folder, dot_git), folder)
    raise NotAGitRepo(f"{start} is not inside a git repository")


def _own_environment(repo: Repo, checkout: Path) -> Repo:
    """`repo`, unless the environment sends git elsewhere: git obeys these variables before its folder, so
    one that leads out of the repository would have every git command read and change another one."""
    for name in ("GIT_DIR", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_WORK_TREE"):
        value = os.environ.get(name)
        if not value:
            continue
        path = Path(value).resolve()  # a relative one from the process's folder, as git takes it
        within = checkout.resolve() if name == "GIT_WORK_TREE" else repo.common_dir.resolve()
        if path != within and not (name != "GIT_WORK_TREE" and path.is_relative_to(within)):
            raise ForeignRepository(f"{name}={value} leads git out of the repository {checkout} is in")
    return repo


def _repo_from_gitfile(folder: Path, dot_git: Path) -> Repo:
    git_dir = _gitfile_target(dot_git)
    if git_dir is None or not git_dir.is_dir():
        raise NotAGitRepo(f"{dot_git} does not point to a git directory")
    common = _common_dir(git_dir)
    if common == git_dir:  # a submodule or a separate git dir: this folder is its own main checkout
        return Repo(folder, git_dir)
    return Repo(common.parent, common)


def _gitfile_target(dot_git: Path) -> Path | None:
    try:
        content = dot_git.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not content.startswith("gitdir:"):
        return None
    return (dot_git.parent / content.removeprefix("gitdir:").strip()).resolve()


def worktree_git_dir(tree: Path) -> Path | None:
    """The admin folder (`.git/worktrees/NAME`) of the linked worktree `tree`; None for any other folder."""
    dot_git = tree / ".git"
    if not dot_git.is_file():
        return None
    git_dir = _gitfile_target(dot_git)
    if git_dir is None or not git_dir.is_dir() or _common_dir(git_dir) == git_dir:
        return None
    return git_dir


def worktree_branch(git_dir: Path) -> str:
    """The branch (without refs/heads/) a worktree's admin folder has checked out; "" when detached."""
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return ""
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else ""


def _common_dir(git_dir: Path) -> Path:
    try:
        pointer = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    return (git_dir / pointer).resolve()


def run_git(args: list[str], cwd: Path) -> str:
    return run_git_bytes(args, cwd).decode("utf-8", errors="surrogateescape")


def run_git_bytes(args: list[str], cwd: Path, given: bytes | None = None, home: str | None = None) -> bytes:
    """git's output as bytes; `given` is its standard input; `home` the HOME whose ~/.gitconfig it reads
    (else this process's).

    A command git refused because another git process (an agent's `git status`, an editor) held the index
    lock is run again until the lock is free, for up to INDEX_LOCK_WAIT seconds, then `IndexLocked`."""
    env = {**os.environ, **gitstatus.GIT_ENV} | ({"HOME": home} if home else {})
    starts_merge = args[:1] == ["merge"] and not {"--abort", "--continue", "--quit"} & set(args)
    index = _index_file(cwd) if starts_merge else None
    deadline = time.monotonic() + INDEX_LOCK_WAIT
    while True:
        before = _stat(index)
        code, out, said = _git(args, cwd, env, given)
        if code == 0:
            return out
        if not _lock_refused(said, index, before):
            raise subprocess.CalledProcessError(code, ["git", *args], out, said)
        if index is not None:  # the refused merge wrote its merge state (MERGE_HEAD), and nothing else
            _git(["merge", "--quit"], cwd, env)
        if time.monotonic() >= deadline:
            raise _index_locked()(code, ["git", *args], out, said)
        time.sleep(INDEX_LOCK_LOOK)


def _git(
    args: list[str], cwd: Path, env: dict[str, str], given: bytes | None = None
) -> tuple[int, bytes, bytes]:
    """git's exit code, output and errors: spawned with `os` (spawn.py) where it can be, as `git -C cwd`
    (the same as git started there), else through `subprocess` (input to give, a `cwd` that is not a folder:
    its error is subprocess's)."""
    if given is None and os.path.isdir(cwd):
        done = spawn.run(["git", "-C", os.fspath(cwd), *args], env)
        if done is not None:
            return done
    ran = subprocess.run(["git", *args], cwd=cwd, env=env, input=given, capture_output=True, check=False)
    return ran.returncode, ran.stdout, ran.stderr


def identity(cwd: Path, home: str | None = None) -> tuple[tuple[str, str], ...]:
    """The `user.name` and `user.email` git commits with in `cwd` (its repository's config over HOME's and
    the system's), each one that is set."""
    try:
        said = run_git_bytes(["config", "--get-regexp", r"^user\.(name|email)$"], cwd, home=home)
    except subprocess.CalledProcessError:  # neither is set
        return ()
    found: dict[str, str] = {}
    for line in said.decode("utf-8", errors="replace").splitlines():
        key, _, value = line.partition(" ")
        found[key] = value  # the last file that sets it wins, as for git itself
    return tuple(found.items())


if TYPE_CHECKING:
    import subprocess

    class IndexLocked(subprocess.CalledProcessError):
        """git refused the command for INDEX_LOCK_WAIT seconds: another process held `index.lock`. Nothing
        was changed."""

else:
    subprocess = _Subprocess()

    def __getattr__(name: str) -> type:
        if name == "IndexLocked":
            return _index_locked()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@cache
def _index_locked() -> type[subprocess.CalledProcessError]:
    """`IndexLocked`, defined when first raised or asked for (`subprocess` with it)."""
    import subprocess

    class IndexLocked(subprocess.CalledProcessError):
        """git refused the command for INDEX_LOCK_WAIT seconds: another process held `index.lock`. Nothing
        was changed."""

        __qualname__ = "IndexLocked"

    return IndexLocked


def _lock_refused(said: bytes, index: Path | None, before: tuple[int, int, int] | None) -> bool:
    """git refused for the index lock. Every command says so and dies before it changes anything; a merge
    (`index`: the file it would write) may say it in other words by git version (its strategy could not
    write the index, its stash of local changes failed) and write its merge state, so it counts only while
    the index file is the one it found."""
    if index is None:
        return b"index.lock': File exists" in said
    if before is None or _stat(index) != before:
        return False
    words = (b"index.lock", b"Unable to write index", b"stash failed", b"'stash' failed")
    return any(word in said for word in words) or index.with_name("index.lock").exists()


def _index_file(cwd: Path) -> Path | None:
    """The index of the checkout whose top folder is `cwd` (None elsewhere: a merge there is not retried)."""
    dot_git = Path(cwd) / ".git"
    git_dir = dot_git if dot_git.is_dir() else _gitfile_target(dot_git)
    return None if git_dir is None else git_dir / "index"


def _stat(path: Path | None) -> tuple[int, int, int] | None:
    """Which file `path` is (git replaces the index by renaming its lock over it), or None."""
    if path is None:
        return None
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def branch_commit(root: Path, branch: str) -> str:
    """The commit `refs/heads/{branch}` points at, or "" when there is no such branch."""
    return commit_of(root, f"refs/heads/{branch}")


def commit_of(root: Path, name: str) -> str:
    """The commit `name` (a ref, `HEAD`, `MERGE_HEAD`) points at, or "" when there is none."""
    try:
        return run_git(["rev-parse", "-q", "--verify", f"{name}^{{commit}}"], root).strip()
    except subprocess.CalledProcessError:
        return ""


def index_tree(root: Path) -> str | None:
    """The tree the index holds (written to the object store), or None while it holds a conflict."""
    try:
        return run_git(["write-tree"], root).strip()
    except subprocess.CalledProcessError:
        return None


def merged_tree(root: Path, ours: str, theirs: str) -> str | None:
    """The tree merging commit `theirs` into commit `ours` makes (no worktree or index touched), or None
    when it conflicts."""
    try:
        return run_git(["merge-tree", "--write-tree", "--no-messages", ours, theirs], root).split()[0]
    except subprocess.CalledProcessError:
        return None


def is_ancestor(cwd: Path, commit: str, of: str) -> bool:
    """`commit` is in the history of `of` (both commit ids or refs)."""
    try:
        run_git(["merge-base", "--is-ancestor", commit, of], cwd)
    except subprocess.CalledProcessError:
        return False
    return True


def in_history(root: Path, commit: str) -> bool:
    """`commit` is in HEAD's history (a commit unknown here is not)."""
    try:
        run_git(["merge-base", "--is-ancestor", commit, "HEAD"], root)
    except subprocess.CalledProcessError:
        return False
    return True


def staged(root: Path, path: str) -> tuple[str, bytes] | None:
    """The index's entry for `path` (its mode and bytes), or None when the index has none for it."""
    entry = run_git(["ls-files", "-s", "--", path], root).split()
    if len(entry) != 4:  # "MODE BLOB STAGE PATH"; several entries while a merge conflicts there
        return None
    return entry[0], run_git_bytes(["cat-file", "blob", entry[1]], root)


def stage(root: Path, path: str, mode: str, data: bytes) -> None:
    """Put `data` in the index as `path`, the working file left as it is (`data` is stored as given)."""
    blob = run_git_bytes(["hash-object", "-w", "--no-filters", "--stdin"], root, data).decode().strip()
    run_git(["update-index", "--cacheinfo", f"{mode},{blob},{path}"], root)


def status(cwd: Path, pathspec: str | None = None) -> MainStatus:
    """One `git status`: whether HEAD has a commit, and the changed or untracked paths."""
    return MainStatus(*gitstatus.records(run_git(gitstatus.status_args(pathspec), cwd)))


def worktree_state(repo: Repo, slug: str) -> Worktree:
    """Judged from files alone: trees/{slug}/.git must point into this repository's worktrees."""
    tree = repo.tree(slug)
    if not tree.exists():
        return Worktree(WorktreeState.ABSENT)
    if not tree.resolve().is_relative_to(repo.root.resolve()):
        return Worktree(WorktreeState.BROKEN, f"it leads to {tree.resolve()}, outside the repository")
    if not tree.is_dir():
        return Worktree(WorktreeState.BROKEN, "it is not a directory")
    dot_git = tree / ".git"
    if not dot_git.exists():
        if not any(tree.iterdir()):
            return Worktree(WorktreeState.ABSENT)  # an empty folder: `git worktree add` fills it
        return Worktree(WorktreeState.BROKEN, "it has files but no .git")
    if dot_git.is_dir():
        return Worktree(WorktreeState.BROKEN, "it holds a repository of its own")
    git_dir = _gitfile_target(dot_git)
    if git_dir is None or not git_dir.is_dir():
        return Worktree(WorktreeState.BROKEN, "its .git file points to a missing worktree entry")
    if _common_dir(git_dir) != repo.common_dir.resolve():
        return Worktree(WorktreeState.BROKEN, "it belongs to another repository")
    lock = _lock_reason(git_dir)
    if lock == LOCK_REASON:
        return Worktree(WorktreeState.UNFINISHED, "teleclaude's `git worktree add` was cut short")
    if lock == GIT_INITIALIZING:
        return Worktree(
            WorktreeState.BROKEN,
            "`git worktree add` was cut short and left it locked and half checked out",
            f"Remove it with `git worktree remove --force --force {layout.worktree(slug)}`, then call again.",
        )
    return Worktree(WorktreeState.PRESENT)


def _lock_reason(git_dir: Path) -> str | None:
    try:
        return (git_dir / "locked").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def main_head_ref(repo: Repo) -> str:
    """What the main checkout has checked out: `refs/heads/main`, or a commit id when detached."""
    head = (repo.common_dir / "HEAD").read_text(encoding="utf-8").strip()
    return head.removeprefix("ref:").strip()


def review_rounds(repo: Repo, slug: str) -> int:
    """Commits on the branch (not on main) that deleted the review findings: one per finished fix round."""
    findings = layout.item_file(slug, layout.REVIEW)
    out = run_git(
        ["log", "--format=%H", "--diff-filter=D", "HEAD", "--not", main_head_ref(repo), "--", findings],
        repo.tree(slug),
    )
    return len(out.split())


def merge_conflicts(repo: Repo, slug: str) -> tuple[str, ...]:
    """The files that would conflict if branch `slug` were merged into what the main checkout has checked
    out (`git merge-tree`: no worktree or index is touched); () when it merges cleanly."""
    args = [
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        main_head_ref(repo),
        f"refs/heads/{slug}",
    ]
    try:
        run_git(args, repo.root)
    except subprocess.CalledProcessError as error:
        if error.returncode != 1:
            raise
        names = error.stdout.decode("utf-8", errors="surrogateescape").splitlines()[1:]
        return tuple(name for name in names if name)
    return ()


def commits_ahead(repo: Repo, slug: str) -> int:
    """Commits on the branch of trees/{slug} that main does not have."""
    out = run_git(["rev-list", "--count", "HEAD", "--not", main_head_ref(repo)], repo.tree(slug))
    return int(out.strip() or 0)


def catch_up(repo: Repo, slug: str) -> None:
    """trees/{slug}'s branch fast-forwarded to what main has now, when it has no commit of its own (a worktree
    made ahead of its build, before main moved on); left as it is when git refuses (local changes in the
    way)."""
    with suppress(subprocess.CalledProcessError):
        if not commits_ahead(repo, slug):
            run_git(["merge", "--ff-only", "--quiet", main_head_ref(repo)], repo.tree(slug))


def add_worktree(repo: Repo, slug: str) -> None:
    """`git worktree add trees/{slug} -b {slug}`, reattaching the branch when it already exists.

    Refused when trees/ leads outside the repository or when an existing branch {slug} shares no history
    with HEAD. An unfinished worktree of our own (see `LOCK_REASON`) is removed and made again.
    """
    path = layout.worktree(slug)
    tree = repo.tree(slug)
    if not tree.resolve().is_relative_to(repo.root.resolve()):
        raise WorktreeError(
            f"{path} leads to {tree.resolve()}, outside the repository: git would make the worktree there.\n"
            f"Make {layout.TREES}/ a plain folder of the repository (remove the link), then call again."
        )
    exclude_trees(repo)
    try:
        if worktree_state(repo, slug).state is WorktreeState.UNFINISHED:
            run_git(["worktree", "remove", "--force", "--force", path], repo.root)
        run_git(["worktree", "prune"], repo.root)  # forget registered worktrees whose folders are gone
        branch = run_git(["for-each-ref", "--format=%(refname)", f"refs/heads/{slug}"], repo.root).strip()
        if branch and not _shares_history(repo, branch):
            raise WorktreeError(
                f"branch {slug} exists but shares no history with {main_head_ref(repo)}, so trees/{slug} "
                f"would hold none of its files.\nRename it (`git branch -m {slug} {slug}-old`) or delete it, "
                "then call again."
            )
        target = [path, slug] if branch else ["-b", slug, path]
        run_git(["worktree", "add", "--lock", "--reason", LOCK_REASON, *target], repo.root)
    except subprocess.CalledProcessError as error:
        said = (error.stderr or b"").decode("utf-8", "replace").strip()
        if error.cmd[1:3] != ["worktree", "add"] or not tree.joinpath(".git").is_file():
            raise WorktreeError(
                f"git could not create trees/{slug}: {said}\n"
                f"Resolve it (`git worktree list`, `git branch --list {slug}`), then call again."
            ) from error
        # git removes a worktree it failed to check out; this one was made, then post-checkout failed
        run_git(["worktree", "unlock", path], repo.root)
        raise WorktreeError(
            f"git made trees/{slug}, but its post-checkout hook failed:\n{said}\n"
            "Do by hand what the hook could not; the next call goes on with this worktree."
        ) from error
    run_git(["worktree", "unlock", path], repo.root)


def _shares_history(repo: Repo, branch: str) -> bool:
    try:
        run_git(["merge-base", "HEAD", branch], repo.root)
    except subprocess.CalledProcessError as error:
        if error.returncode == 1:  # no common ancestor
            return False
        raise
    return True


def exclude_trees(repo: Repo) -> None:
    """Add `/trees/` to info/exclude so the main checkout does not look dirty."""
    exclude = repo.common_dir / "info" / "exclude"
    line = f"/{layout.TREES}/"
    current = exclude.read_bytes() if exclude.exists() else b""
    if line.encode() in current.splitlines():
        return
    exclude.parent.mkdir(parents=True, exist_ok=True)
    separator = b"" if not current or current.endswith(b"\n") else b"\n"
    with exclude.open("ab") as handle:
        handle.write(separator + line.encode() + b"\n")
