"""The item branch travels: to a remote computer's clone before its worker starts, and back after each turn.

The planner reads files and git on the main checkout only, so a remote worker's work counts once its
commits are on the item branch here. Out: `git push` to a staging ref of the remote clone (a branch that is
checked out there cannot be pushed to), then the remote worktree `trees/{slug}` is created from it or fast-
forwarded to it. Back: `git fetch` of the remote branch into `refs/teleclaude/remotes/NAME/{slug}`, then the
local worktree fast-forwards to it. Both ends only fast-forward: diverged work is an error, never a merge.
Once the item is delivered here, `clean_up` removes its worktree and branch over there, as the finalize did
here, but only when the branch there holds nothing that main here lacks. `clean_up_delivered` does that for
every computer a session of the item ran on; `teleclaude finalize SLUG` calls it after its merge, outside the
project lock, so every delivery is cleaned up whoever orchestrated it (`teleclaude run`, an agent over MCP);
`teleclaude run` calls it again after a finalize it saw deliver the item (`clean_up_finalized`), for a
finalizer in a sandbox, which cannot.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from teleclaude.adapters import git as gitx
from teleclaude.adapters import ssh
from teleclaude.adapters.sessions_db import SessionStore
from teleclaude.adapters.settings import load_config
from teleclaude.config.profiles import Computer, UntrustedConfig
from teleclaude.planner.core import layout
from teleclaude.planner.core.roadmap import SLUG
from teleclaude.runtime.core.sessions import Session

log = logging.getLogger("teleclaude.runtime")

_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # what `git rev-parse --verify` prints
# runs on the remote computer: $1 the clone, $2 the slug (checked against SLUG), $3 the staging ref
_CHECK_OUT = (
    'set -e; cd -- "$1"; tree="trees/$2"; '
    'if [ -e "$tree/.git" ]; then git -C "$tree" merge -q --ff-only "$3"; '
    'else git worktree add -q -B "$2" "$tree" "$3"; fi; '
    'grep -qx "/trees/" .git/info/exclude 2>/dev/null || echo "/trees/" >> .git/info/exclude'
)


# runs on the remote computer: $1 the clone, $2 the slug (checked against SLUG), $3 its branch's tip as
# checked here (delivered; empty when it has no branch): a branch that moved since is left as it is
_CLEAN_UP = (
    'set -e; cd -- "$1"; tree="trees/$2"; '
    'if [ -n "$3" ] && [ "$(git rev-parse -q --verify "refs/heads/$2")" != "$3" ]; then '
    'echo "its branch $2 moved: left as it is" >&2; exit 3; fi; '
    'if [ -e "$tree/.git" ]; then git worktree remove --force "$tree"; fi; git worktree prune; '
    'if [ -n "$3" ]; then git update-ref -d "refs/heads/$2" "$3"; fi; '
    'git update-ref -d "refs/teleclaude/incoming/$2"'
)


class TravelError(ssh.RemoteError):
    pass


def item_slug(subfolder: str | None) -> str | None:
    """The slug of an item worktree `trees/{slug}`; None for any other folder."""
    parts = Path(subfolder).parts if subfolder else ()
    if len(parts) == 2 and parts[0] == layout.TREES and SLUG.fullmatch(parts[1]):
        return parts[1]
    return None


def send(computer: Computer, project: Path, slug: str, timeout: float) -> None:
    """Push the item branch to the remote clone and check it out there in trees/{slug}."""
    staging = f"refs/teleclaude/incoming/{slug}"
    ssh.reach(computer, timeout)  # else an unreachable computer is only a failed `git push`
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
    tracking = _fetch(computer, project, [slug])[slug]
    gitx.run_git(["merge", "-q", "--ff-only", tracking], project / layout.TREES / slug)


def bring_back_all(computer: Computer, project: Path, slugs: list[str]) -> list[str]:
    """`bring_back` of several items from one computer: one fetch of their branches, then each local
    worktree fast-forwarded; the slugs brought back (a worktree that could not be is left out)."""
    tracking = _fetch(computer, project, slugs)
    brought = []
    for slug, ref in tracking.items():
        with suppress(subprocess.CalledProcessError):  # its own `bring_back` tries again, and says why
            gitx.run_git(["merge", "-q", "--ff-only", ref], project / layout.TREES / slug)
            brought.append(slug)
    return brought


def _fetch(computer: Computer, project: Path, slugs: list[str]) -> dict[str, str]:
    """The item branches `slugs` of the remote clone fetched in one call; each slug's tracking ref here."""
    tracking = {slug: f"refs/teleclaude/remotes/{computer.name}/{slug}" for slug in slugs}
    refspecs = [f"refs/heads/{slug}:{ref}" for slug, ref in tracking.items()]
    _git(computer, project, "fetch", "-q", "--force", ssh.git_url(computer), *refspecs)
    return tracking


def clean_up(computer: Computer, project: Path, slug: str, timeout: float) -> None:
    """The item is delivered here (merged into main, archived): remove its worktree `trees/{slug}`, its
    branch and staging ref from the remote clone, and its tracking ref here. A branch there with commits
    main here lacks (never brought back) stays, with its worktree: TravelError says so."""
    if not SLUG.fullmatch(slug):
        return
    tip = _tip_there(computer, slug, timeout)
    if tip and not (_COMMIT.fullmatch(tip) and gitx.in_history(project, tip)):
        raise TravelError(
            f"{computer.name}: its branch {slug} has commits that are not on main here (never brought back)"
        )
    _remove_there(computer, slug, tip, timeout)
    tracking = f"refs/teleclaude/remotes/{computer.name}/{slug}"
    gitx.run_git(["update-ref", "-d", tracking], project)


def _tip_there(computer: Computer, slug: str, timeout: float) -> str:
    """The commit of the item branch in the remote clone ("" when it has none); TravelError when ssh or git
    failed there (touch nothing then)."""
    branch = ["git", "-C", computer.project, "rev-parse", "-q", "--verify", f"refs/heads/{slug}^{{commit}}"]
    found = ssh.run(computer, branch, timeout, check=False)
    if found.returncode not in (0, 1):  # 1: no such branch; else ssh (255) or git failed
        why = " ".join(found.stderr.split()) or f"exit status {found.returncode}"
        raise TravelError(f"{computer.name}: could not read its branch {slug} there: {why}")
    return found.stdout.strip()


def _remove_there(computer: Computer, slug: str, tip: str, timeout: float) -> None:
    """The item's worktree and branch (at `tip`) removed from the computer's clone (`_CLEAN_UP`)."""
    ssh.run(computer, ["sh", "-c", _CLEAN_UP, "teleclaude-clean-up", computer.project, slug, tip], timeout)


def keep_given_up(computer: Computer, project: Path, slug: str, ref: str, timeout: float) -> bool:
    """A worker given up there (runtime/given_up.py) is ended and its computer answers again: the item
    branch there, when it holds commits that are neither on the item branch here nor in main's history (made
    since the last bring-back), is fetched to `ref`, which nothing merges; then its worktree and branch there
    are removed (`_CLEAN_UP`), so a later step of the item can go there again. True: commits were kept."""
    if not SLUG.fullmatch(slug):
        return False
    tip = _tip_there(computer, slug, timeout)
    if not tip:
        return False
    here = gitx.branch_commit(project, slug)
    known = bool(_COMMIT.fullmatch(tip)) and (
        gitx.in_history(project, tip) or (bool(here) and gitx.is_ancestor(project, tip, here))
    )
    if not known:
        _git(computer, project, "fetch", "-q", "--force", ssh.git_url(computer), f"refs/heads/{slug}:{ref}")
    _remove_there(computer, slug, tip, timeout)
    return not known


@dataclass(frozen=True)
class CleanedUp:
    """What became of a delivered item's worktree and branch in one other computer's clone."""

    computer: str
    slug: str
    left: str = ""  # why they were left there; empty when they were removed

    def text(self) -> str:
        if self.left:
            return f"left {layout.worktree(self.slug)} and branch {self.slug} on {self.computer}: {self.left}"
        return f"removed {layout.worktree(self.slug)} and its branch on {self.computer}"


def clean_up_delivered(slug: str, cwd: str | os.PathLike | None = None) -> list[CleanedUp]:
    """The item is delivered here (`teleclaude finalize SLUG` merged it): `clean_up` in the clone of each
    configured computer a session of the item ran on (the session store knows), one after the other; what
    one of them refuses or cannot be reached for is said, never raised. Call it outside the project lock:
    ssh can be slow, and the planner waits on that lock."""
    if os.environ.get("TELECLAUDE_CHANNEL"):  # CHANNEL of adapters/sandbox.py: a sandboxed finalizer reaches
        return []  # no ssh key and no session store: `teleclaude run` cleans up after its finalize
    root = gitx.find_repo(cwd or os.getcwd()).root
    config = load_config(root).runtime
    untrusted = config.untrusted if config else None
    if untrusted and any(key.startswith("computers.") for key in untrusted.keys):
        raise UntrustedConfig(untrusted)  # its computers are not used: what is left there is said
    if config is None or not config.remotes or not SLUG.fullmatch(slug):
        return []  # no other computer: the session store is not even opened
    ran_on = SessionStore().computers_of(str(Path(root).resolve()), slug)
    said = []
    for name in sorted(ran_on):
        computer = config.remotes.get(name)
        if computer is None:
            continue  # this machine, or a computer no longer configured
        try:
            clean_up(computer, root, slug, config.ssh_timeout)
        except (ssh.RemoteError, subprocess.CalledProcessError) as error:
            log.info("item %s: could not clean up its worktree on %s: %s", slug, name, error)
            said.append(CleanedUp(name, slug, left=_said(name, error)))
        else:
            said.append(CleanedUp(name, slug))
    return said


def clean_up_finalized(slug: str, root: Path) -> list[CleanedUp]:
    """`clean_up_delivered` after a finalize `teleclaude run` saw end, outside any sandbox (a sandboxed
    finalizer reaches neither the other computers nor the session store): only once the item is delivered
    here, its branch merged into main or gone; after a finalize that did not merge, nothing is touched."""
    if not SLUG.fullmatch(slug):
        return []
    tip = gitx.branch_commit(root, slug)
    if tip and not gitx.in_history(root, tip):
        return []
    return clean_up_delivered(slug, cwd=root)


def _said(computer: str, error: ssh.RemoteError | subprocess.CalledProcessError) -> str:
    if isinstance(error, subprocess.CalledProcessError):  # the tracking ref here
        why = " ".join((error.stderr or b"").decode(errors="replace").split())
        return f"git update-ref here failed: {why or f'exit status {error.returncode}'}"
    return str(error).removeprefix(f"{computer}: ")  # ssh's errors name the computer: the line does already


def _git(computer: Computer, cwd: Path, *args: str) -> None:
    try:
        with ssh.connections(computer).short() as connection:
            gitx.run_git(["-c", f"core.sshCommand={ssh.git_ssh_command(computer, connection)}", *args], cwd)
    except subprocess.CalledProcessError as error:
        why = " ".join(error.stderr.decode(errors="replace").split())
        raise TravelError(f"git {args[0]} with {computer.name} failed: {why}") from None


class BringBack:
    """`Context.before_turn_end` with other computers: a turn that ended there brings its item's branch back
    here first (`bring_back_logged`). `ahead`: the turns of several workers about to be read (their
    computer woke the run) come back in one fetch a computer, not one fetch each as each is read, and are
    not fetched again meanwhile."""

    def __init__(self, computers: dict[str, Computer]) -> None:
        self.computers = computers
        self._brought: frozenset[str] = frozenset()  # ids of the sessions `ahead` brought back

    def __call__(self, session: Session) -> None:
        if session.id not in self._brought:
            bring_back_logged(self.computers, session)

    @contextmanager
    def ahead(self, sessions: list[Session]) -> Iterator[None]:
        groups: dict[tuple[str, str], dict[str, str]] = {}  # (computer, project) -> slug -> session id
        for session in sessions:
            slug = item_slug(session.subfolder)
            if session.computer in self.computers and slug is not None:
                groups.setdefault((session.computer, session.project), {})[slug] = session.id
        brought: set[str] = set()
        for (name, project), ids in groups.items():
            try:
                brought |= {ids[slug] for slug in bring_back_all(self.computers[name], Path(project), [*ids])}
            except (ssh.RemoteError, subprocess.CalledProcessError) as error:  # each fetched as it is read
                log.info("could not bring back %s from %s at once: %s", ", ".join(ids), name, error)
        self._brought = frozenset(brought)
        try:
            yield
        finally:
            self._brought = frozenset()


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
