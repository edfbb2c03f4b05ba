"""`git status --porcelain=v2 -z` read into paths, and run with `os` alone for the stop hook (spawn.py).

`git.status` reads its output with `records` here. `changed` runs the same command without `subprocess`
(its `threading`, `selectors`, `signal`: with `pathlib` and `dataclasses`, what `git.py` imports costs more
than Python's own start), for `teleclaude hook stop` in a main checkout, where Claude Code runs it at every
turn's end.
"""

from __future__ import annotations

import os

from teleclaude.adapters.spawn import output

# how every git command of teleclaude's runs (git.py's run_git too): no optional lock taken (an agent's own
# git may hold the index), git's messages in English
GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}


def status_args(pathspec: str | None = None) -> list[str]:
    """`git status`'s arguments: every change, and with `pathspec` every untracked and ignored file in it."""
    args = ["status", "--porcelain=v2", "--branch", "-z"]
    if pathspec:
        args += ["--untracked-files=all", "--ignored=matching", "--", pathspec]
    return args


def records(out: str) -> tuple[bool, tuple[str, ...], tuple[str, ...]]:
    """Whether HEAD has a commit, the changed or untracked paths, and the ignored ones, of `status_args`'
    output."""
    has_commits, changes, ignored, skip = True, [], [], False
    for record in out.split("\0"):
        if skip or not record:
            skip = False
            continue
        if record == "# branch.oid (initial)":
            has_commits = False
        elif record.startswith("! "):
            ignored.append(record[2:])
        elif record[0] in "12u?":
            fields = {"1": 8, "2": 9, "u": 10, "?": 1}[record[0]]
            changes.append(record.split(" ", fields)[-1])
            skip = record[0] == "2"  # a rename is followed by its original path
    return has_commits, tuple(changes), tuple(ignored)


def changed(root: str, pathspec: str | None = None) -> tuple[str, ...] | None:
    """The changed or untracked paths in `pathspec` (None: anywhere) of the checkout `root`, as
    `git.status(root, pathspec)` has them; None when git could not say (not found, not a repository, any
    failure)."""
    out = output(["git", "-C", root, *status_args(pathspec)], {**os.environ, **GIT_ENV})
    return None if out is None else records(out.decode("utf-8", errors="surrogateescape"))[1]
