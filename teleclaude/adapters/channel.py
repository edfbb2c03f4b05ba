"""A hook's sealed mark written into a sandboxed worker's channel folder (adapters/sandbox.py), with `os`
alone: a sandboxed worker's stop runs at every turn's end, and sandbox.py (the git adapter, `subprocess`)
and fs.py (`pathlib`, `tempfile`) cost it more than Python's own start."""

from __future__ import annotations

import os
from stat import S_ISFIFO  # loaded by `os` already

WAKE = "wake"  # a channel's pipe on another computer (adapters/remote_sandbox.py): its relay reads it
LOOK = "look"  # a channel's pipe on this machine: the run watching the worker reads it (sandbox.listen)


def write_mark(folder: str, option: str, value: str) -> bool:
    """The mark, as a file named after its tmux option, replaced whole (as fs.py `atomic_write(follow=False,
    mode=0o600)`: a synced temporary file of a fresh name created exclusively beside it, then renamed over a
    link too, never through it). False when the folder refused it."""
    path = os.path.join(folder, option.lstrip("@"))
    temp = os.path.join(folder, f".{option.lstrip('@')}.{os.urandom(8).hex()}.tmp")
    data = value.encode()
    try:
        handle = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        try:
            while data:
                data = data[os.write(handle, data) :]
            os.fsync(handle)
            os.fchmod(handle, 0o600)
        finally:
            os.close(handle)
        os.replace(temp, path)
    except OSError:
        try:  # noqa: SIM105 (contextlib: more than this module's imports)
            os.unlink(temp)
        except OSError:
            pass
        return False
    return True


def wake(folder: str) -> None:
    """Poke the channel's relay, or the run watching its worker here (after a mark was left), when it has
    one; never blocks."""
    for name in (WAKE, LOOK):
        poke(os.path.join(folder, name))


def look_beside(store: str, session_id: str) -> str:
    """The pipe the run watching a local worker that is not sandboxed reads to be woken by its hooks (its
    stop's, after recording its turn's end in the database): beside the sandboxed workers' channels."""
    return f"{store}.channels/{session_id}.{LOOK}"


def poke(path: str) -> bool:
    """A byte into the pipe at `path` (never blocks); False when it is no pipe or nobody reads it."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # no such pipe, or nobody reading it
        return False
    try:
        return S_ISFIFO(os.fstat(fd).st_mode) and os.write(fd, b"\n") == 1
    except OSError:
        return False
    finally:
        os.close(fd)


def listen(path: str) -> int | None:
    """The pipe at `path` (made when missing), opened to read without blocking: readable once poked. Opened
    to write too, as a relay's is (remote_sandbox.py): a pipe all of whose writers have gone would read as at
    its end, readable at every select. None when it cannot be made or opened, or is no pipe."""
    try:
        try:  # noqa: SIM105 (contextlib: more than this module's imports)
            os.mkfifo(path, 0o600)
        except FileExistsError:
            pass
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    if not S_ISFIFO(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


READ_MOST = (
    1 << 20
)  # bytes of a file of the channel its own worker's hook reads back (os.read reads it at once)


def read_file(folder: str, name: str) -> str:
    """A file of the channel that its worker's hooks keep for themselves ("" for none, or a link)."""
    try:
        fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return os.read(fd, READ_MOST).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
