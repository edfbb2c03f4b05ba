"""`teleclaude hooks install|uninstall|status`: the git hooks, in the hooks folder every worktree shares.

The folder is git's own answer (`git rev-parse --git-path hooks`): `core.hooksPath` when set, else the
common git dir's `hooks/`. A hook that is already there and is not ours is renamed to
`{name}.teleclaude-chained` and run first by ours (a failing chained pre-commit refuses the commit as
before); `uninstall` renames it back, byte for byte. The installed scripts name the Python interpreter that
ran `install` (shell-quoted), so they find teleclaude without a PATH.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from teleclaude import assets
from teleclaude.adapters import fs
from teleclaude.errors import ErrorCode, Failure

HOOKS = ("pre-commit", "post-commit")
CHAINED_SUFFIX = ".teleclaude-chained"
MARK = b"teleclaude-managed-hook"
PLACEHOLDER = "@PYTHON@"


class HooksError(Failure):
    """Hooks cannot be (un)installed; the message says what to do."""

    code = ErrorCode.FILE_ERROR


class HooksConflict(HooksError):
    code = ErrorCode.ALREADY_EXISTS


class HooksNotInRepo(HooksError):
    code = ErrorCode.NOT_A_GIT_REPO


@dataclass(frozen=True)
class HookStatus:
    name: str
    path: Path
    installed: bool  # ours is in place
    current: bool  # ours, and identical to what `install` would write now
    chained: bool  # a hook of the user's runs before ours
    foreign: bool  # a hook that is not ours sits at `path` (install will chain it)

    def describe(self) -> str:
        if self.installed:
            state = "installed" if self.current else "installed, outdated (run `teleclaude hooks install`)"
            return state + (f", runs your {self.name}{CHAINED_SUFFIX} first" if self.chained else "")
        if self.foreign:
            return "not installed (a hook of your own is there; install chains it)"
        return "not installed"


def hooks_dir(cwd: str | os.PathLike) -> Path:
    top = Path(_git(["rev-parse", "--show-toplevel"], Path(cwd)))
    hooks = Path(_git(["rev-parse", "--git-path", "hooks"], top))
    return hooks if hooks.is_absolute() else top / hooks


def _writable_hooks_dir(cwd: str | os.PathLike) -> Path:
    """`hooks_dir`; one in the working tree (a `core.hooksPath` the repository brings) must stay in it."""
    folder = hooks_dir(cwd)
    top = Path(_git(["rev-parse", "--show-toplevel"], Path(cwd)))
    if folder.is_relative_to(top) and not folder.is_relative_to(top / ".git"):
        try:
            fs.inside(top, folder)
        except fs.OutsideRepository as error:
            raise HooksError(error.explain()) from None
    return folder


def script(name: str, python: str | None = None) -> str:
    """The hook `name` as installed: the packaged template with the interpreter's path, shell-quoted."""
    template = assets.read_text("hooks", name)
    return template.replace(PLACEHOLDER, shlex.quote(python or sys.executable), 1)


def status(cwd: str | os.PathLike) -> tuple[HookStatus, ...]:
    folder = hooks_dir(cwd)
    return tuple(_status(folder, name) for name in HOOKS)


def install(cwd: str | os.PathLike, *, python: str | None = None) -> list[str]:
    """Install (or refresh) every hook; returns one line per hook saying what happened.

    `python` is the interpreter the hooks run teleclaude with (default: the one running this).
    """
    folder = _writable_hooks_dir(cwd)
    for name in HOOKS:  # check everything before changing anything
        if _occupied(folder / name) and not _ours(folder / name) and _occupied(_chained(folder, name)):
            raise HooksConflict(
                f"{folder / name} is not teleclaude's, and {_chained(folder, name).name} exists too.\n"
                "Merge or remove one of them by hand, then run `teleclaude hooks install` again.",
            )
    folder.mkdir(parents=True, exist_ok=True)
    return [_install_one(folder, name, python) for name in HOOKS]


def uninstall(cwd: str | os.PathLike) -> list[str]:
    folder = _writable_hooks_dir(cwd)
    return [_uninstall_one(folder, name) for name in HOOKS]


# --- one hook -----------------------------------------------------------------------------------------


def _install_one(folder: Path, name: str, python: str | None) -> str:
    path, wanted = folder / name, script(name, python).encode()
    if _ours(path):
        if path.read_bytes() == wanted:
            return f"{name}: already installed in {folder}"
        _write(path, wanted)
        return f"{name}: updated in {folder}"
    note = ""
    if _occupied(path):
        os.rename(path, _chained(folder, name))
        note = f" (your hook is now {name}{CHAINED_SUFFIX} and runs first)"
    _write(path, wanted)
    return f"{name}: installed in {folder}{note}"


def _uninstall_one(folder: Path, name: str) -> str:
    path, chained = folder / name, _chained(folder, name)
    removed = _ours(path)
    if removed:
        path.unlink()
    if _occupied(chained) and not _occupied(path):
        os.rename(chained, path)
        return f"{name}: removed; your own hook is back in place"
    return f"{name}: removed" if removed else f"{name}: not installed"


def _status(folder: Path, name: str) -> HookStatus:
    path = folder / name
    ours = _ours(path)
    current = ours and path.read_bytes() == script(name).encode()
    return HookStatus(
        name, path, ours, current, _occupied(_chained(folder, name)), _occupied(path) and not ours
    )


def _chained(folder: Path, name: str) -> Path:
    return folder / f"{name}{CHAINED_SUFFIX}"


def _occupied(path: Path) -> bool:
    return path.is_symlink() or path.exists()


def _ours(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as handle:
        return MARK in handle.read(200)


def _write(path: Path, data: bytes) -> None:
    """The hooks folder may be one the repository brings (`core.hooksPath`): a link there is replaced."""
    fs.atomic_write(path, data, follow=False, mode=0o755)


def _git(args: list[str], cwd: Path) -> str:
    if not cwd.is_dir():
        raise HooksNotInRepo(f"{cwd} is not a directory.\nRun this in a git repository.")
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise HooksNotInRepo(
            f"{cwd} is not in a git checkout ({done.stderr.strip() or 'git failed'}).\n"
            "Run this in a git repository with a working tree.",
        )
    return done.stdout.strip()
