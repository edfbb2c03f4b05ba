"""The item branch travels: to a remote computer's clone before its worker starts, and back after each turn.

The planner reads files and git on the main checkout only, so a remote worker's work counts once its
commits are on the item branch here. Out: `git push` to a staging ref of the remote clone (a branch that is
checked out there cannot be pushed to), then the remote worktree `trees/{slug}` is created from it or fast-
forwarded to it. Back: `git fetch` of the remote branch into `refs/teleclaude/remotes/NAME/{slug}`, then the
local worktree fast-forwards to it. Both ends only fast-forward: diverged work is an error, never a merge.
"""

from __future__ import annotations

import logging
import re
import subprocess
from pathlib import Path

from teleclaude.adapters import git as gitx
from teleclaude.adapters import ssh
from teleclaude.config.profiles import Computer
from teleclaude.planner.core import layout
from teleclaude.runtime.core.sessions import Session

log = logging.getLogger("teleclaude.runtime")

_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]*")
# runs on the remote computer: $1 the clone, $2 the slug (checked against _SLUG), $3 the staging ref
_CHECK_OUT = (
    'set -e; cd -- "$1"; tree="trees/$2"; '
    'if [ -e "$tree/.git" ]; then git -C "$tree" merge -q --ff-only "$3"; '
    'else git worktree add -q -B "$2" "$tree" "$3"; fi; '
    'grep -qx "/trees/" .git/info/exclude 2>/dev/null || echo "/trees/" >> .git/info/exclude'
)


class TravelError(ssh.RemoteError):
    pass


def item_slug(subfolder: str | None) -> str | None:
    """The slug of an item worktree `trees/{slug}`; None for any other folder."""
    parts = Path(subfolder).parts if subfolder else ()
    if len(parts) == 2 and parts[0] == layout.TREES and _SLUG.fullmatch(parts[1]):
        return parts[1]
    return None


def send(computer: Computer, project: Path, slug: str, timeout: float) -> None:
    """Push the item branch to the remote clone and check it out there in trees/{slug}."""
    staging = f"refs/teleclaude/incoming/{slug}"
    _git(computer, project, "push", "-q", "--force", ssh.git_url(computer), f"refs/heads/{slug}:{staging}")
    ssh.run(
        computer, ["sh", "-c", _CHECK_OUT, "teleclaude-checkout", computer.project, slug, staging], timeout
    )


def bring_back(computer: Computer, session: Session) -> None:
    """Fetch the remote item branch and fast-forward the local worktree to it (the planner reads that)."""
    slug = item_slug(session.subfolder)
    if slug is None:
        return
    project = Path(session.project)
    tracking = f"refs/teleclaude/remotes/{computer.name}/{slug}"
    _git(computer, project, "fetch", "-q", "--force", ssh.git_url(computer), f"refs/heads/{slug}:{tracking}")
    gitx.run_git(["merge", "-q", "--ff-only", tracking], project / layout.TREES / slug)


def _git(computer: Computer, cwd: Path, *args: str) -> None:
    try:
        gitx.run_git(["-c", f"core.sshCommand={ssh.git_ssh_command(computer)}", *args], cwd)
    except subprocess.CalledProcessError as error:
        why = " ".join(error.stderr.decode(errors="replace").split())
        raise TravelError(f"git {args[0]} with {computer.name} failed: {why}") from None


def bring_back_logged(computers: dict[str, Computer], session: Session) -> None:
    """`bring_back` for a turn that ended on another computer; a failure is logged (the planner then sees
    the branch as it was, and says what is missing)."""
    computer = computers.get(session.computer)
    if computer is None:
        return
    try:
        bring_back(computer, session)
    except (ssh.RemoteError, subprocess.CalledProcessError) as error:
        log.warning(
            "session %s: could not bring its branch back from %s: %s", session.id, computer.name, error
        )
