"""File system effects: reading a file if it is there, atomic replacement, and the per-repository lock."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from teleclaude.errors import ErrorCode, Failure

LOCK_NAME = "teleclaude.lock"


class LockTimeout(Failure):
    code = ErrorCode.LOCK_TIMEOUT
    next_step = "Wait for the other call to finish, then try again."


def read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a reader sees either the old or the new file, never half of one."""
    import tempfile  # only the rare write path pays for it

    path = path.resolve()  # rewrite the file a symlink points to, keep the link
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


@contextmanager
def project_lock(common_dir: Path, timeout: float = 60.0) -> Iterator[None]:
    """One planner at a time per repository; the lock lives in the git common dir shared by all worktrees."""
    deadline = time.monotonic() + timeout
    with open(common_dir / LOCK_NAME, "a+b") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LockTimeout(  # noqa: B904 - the busy lock is the expected cause, not an error
                        f"another teleclaude call held {common_dir / LOCK_NAME} for {timeout:.0f} s"
                    )
                time.sleep(0.01)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
