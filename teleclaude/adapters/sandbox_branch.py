"""Which branch the sandboxed workers of a linked worktree may move (adapters/sandbox.py `link_branch` gives
them its folder): decided by teleclaude once, at the worktree's first sandboxed start, and kept where no
worker writes; never read again from the worktree's HEAD, which is in its admin folder, theirs to write.
Both go with the worktree when its item is finalized (`forget`). The git paths they are given read-write
stay in the git directory (`inside_git`)."""

from __future__ import annotations

import shlex
import shutil
from contextlib import suppress
from pathlib import Path

from teleclaude.adapters import fs
from teleclaude.adapters import git as gitx
from teleclaude.planner.core.terminal import printable

HEADS = "teleclaude-heads"  # in the git common dir: BRANCH (quoted), the refs/heads of its sandboxed workers
GIVEN = ".given"  # in HEADS (no branch's folder: a branch's name never starts with "."): ADMIN, its branch


class OtherBranch(gitx.WorktreeError):
    """A worktree's HEAD names another branch than the one its sandboxed workers were given."""


class OutsideGit(gitx.WorktreeError):
    """A path of the git directory a sandboxed worker would be given read-write leads out of it."""


def inside_git(repo: gitx.Repo, *paths: Path) -> None:
    """Each of `paths` (of the git directory, to be bound read-write into a worker's sandbox) is in the git
    directory where its links lead: a link an unsandboxed step planted there (`.git/objects` to `~/.ssh`)
    would bind where it leads, read-write. Else `OutsideGit`, before anything is made through it."""
    common = repo.common_dir.resolve()
    for path in paths:
        real = path.resolve()
        if not real.is_relative_to(common):
            raise OutsideGit(
                f'{printable(str(path))} leads to "{printable(str(real))}", out of the repository\'s git '
                f"directory ({printable(str(common))}): a sandboxed worker would be given it read-write. "
                "Nothing was started.\nLook at what made that link (git makes none there) and put back "
                "what git keeps there in its place, then call again."
            )


def own_branch(repo: gitx.Repo, admin: Path, tree: Path) -> str:
    """The branch the sandboxed workers of the worktree `tree` (admin folder `admin`) may move: its HEAD's at
    its first sandboxed start (what teleclaude checked out: no worker ran there before), kept where no worker
    writes. A worker writes its HEAD (in its admin folder): one naming another branch starts nothing
    (`OtherBranch`), one detached is given the kept branch. The admin folder made again (another inode: the
    worktree removed and added again outside) is a first start again."""
    head = gitx.worktree_branch(admin)
    kept = kept_branch(repo, admin)
    given = repo.common_dir / HEADS / GIVEN / admin.name
    if kept and head and head != kept:
        raise OtherBranch(
            f'{tree}\'s HEAD names branch "{printable(head)}", not the one its sandboxed workers were given, '
            f'branch="{kept}": a worker there may have changed it. Nothing was started.\n'
            f"Look at what it did, then check its branch out again outside "
            f"(`{shlex.join(['git', '-C', str(tree), 'checkout', kept])}`), or, if you changed its branch "
            f"yourself, remove {given}; then call again."
        )
    if not kept and head:
        given.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fs.atomic_write(given, f"{admin.stat().st_ino}\n{head}\n".encode(), follow=False)
    return kept or head


def kept_branch(repo: gitx.Repo, admin: Path) -> str:
    """The branch kept for the worktree of admin folder `admin` at its first sandboxed start; "" when none
    was, or for an admin folder made since (the worktree removed and added again outside)."""
    try:
        kept = (repo.common_dir / HEADS / GIVEN / admin.name).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError):
        return ""
    return kept[1] if len(kept) >= 2 and kept[0] == str(admin.stat().st_ino) else ""


def folder(own: str, admin: str) -> str:
    """The name of the folder in HEADS the sandboxed workers on branch `own` see as refs/heads (its slashes
    quoted); a detached worktree's workers (no branch) get one of their admin folder's, `@ADMIN`."""
    return own.replace("%", "%25").replace("/", "%2F") if own else f"@{admin}"


def forget(repo: gitx.Repo, admin: str | None, branch: str) -> None:
    """What the sandboxed workers of a worktree were given, removed with the worktree (admin folder named
    `admin`, None: gone already) and its branch: the branch's folder in HEADS, its admin folder's and the
    branch kept for it. A later worktree or branch of the same name starts afresh, and nothing piles up."""
    heads = repo.common_dir / HEADS
    places = [heads / folder(branch, "")] if branch else []
    places += [heads / folder("", admin), heads / GIVEN / admin] if admin else []
    for place in places:  # (a leftover that cannot go stays: the finalize is done)
        if place.is_dir() and not place.is_symlink():
            shutil.rmtree(place, ignore_errors=True)
        else:
            with suppress(OSError):
                place.unlink(missing_ok=True)
