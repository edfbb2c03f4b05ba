"""File system effects: reading a regular file if it is there, atomic replacement, the per-repository lock.

Project files are user input: a read opens without blocking (a FIFO never stalls a call that holds the
project lock) and accepts regular files of at most `MAX_FILE_BYTES` only; a rewrite never replaces bytes it
did not read.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from teleclaude.errors import ErrorCode, Failure

TYPE_CHECKING = False  # typing's own, without importing typing (every hook that records imports this module)
if TYPE_CHECKING:
    from typing import BinaryIO

LOCK_NAME = "teleclaude.lock"
MAX_FILE_BYTES = 16 * 1024 * 1024
REWRITE_ATTEMPTS = 20
REWRITE_PATIENCE = 10.0  # seconds: past the attempts, a busy (or slow) machine still gets this long


class LockTimeout(Failure):
    code = ErrorCode.LOCK_TIMEOUT
    next_step = "Wait for the other call to finish, then try again."


class FileError(Failure):
    code = ErrorCode.FILE_ERROR


class NotAFile(FileError):
    next_step = "Replace it with a regular file."


class FileTooLarge(FileError):
    next_step = f"Keep it under {MAX_FILE_BYTES // 2**20} MB (move finished items to done/ or split it)."


class OutsideRepository(FileError):
    next_step = "Replace the link with the file itself, or point it inside the repository."


class KeptChanging(FileError):
    next_step = "Let the other program finish saving it, then try again."


def read_bytes(path: Path, limit: int = MAX_FILE_BYTES) -> bytes | None:
    """The content of the regular file `path` (symlinks followed); None when there is no such file."""
    try:
        handle = _open_regular(path, limit)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with handle:
        return _read_all(handle, path, limit)


def read_tail(path: Path, size: int = 256 * 1024) -> list[str]:
    """The last `size` bytes of a regular file as lines (the first may be cut); [] when it cannot be read."""
    try:
        with _open_regular(path, limit=1 << 62) as handle:
            end = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, end - size))
            return handle.read(size).decode("utf-8", "replace").splitlines()
    except (OSError, FileError):
        return []


def read_head(path: Path, size: int) -> bytes:
    """The first `size` bytes of a regular file (symlinks followed); b"" when it cannot be read or is not
    one: a FIFO or a device is never opened (the open could wait for a writer, or act)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return b""
        with _open_regular(path, limit=1 << 62) as handle:  # (made something else meanwhile: refused)
            return handle.read(size)
    except (OSError, FileError):
        return b""


def inside(root: Path, path: Path) -> Path:
    """`path` with its links resolved, refused unless it stays inside `root` (links within it are fine)."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise OutsideRepository(f"{path} leads to {resolved}, outside the repository {root}")
    return resolved


def _open_regular(path: Path, limit: int = MAX_FILE_BYTES) -> BinaryIO:
    handle = os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb")
    info = os.fstat(handle.fileno())
    if not stat.S_ISREG(info.st_mode):
        handle.close()
        raise NotAFile(f"{path} is not a regular file ({_kind(info.st_mode)})")
    if info.st_size > limit:
        handle.close()
        raise FileTooLarge(f"{path} is larger than {limit} bytes")
    return handle


def _read_all(handle: BinaryIO, path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    handle.seek(0)
    data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(f"{path} is larger than {limit} bytes")
    return data


def _kind(mode: int) -> str:
    kinds = {stat.S_ISDIR: "a folder", stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a device"}
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


def make_private(*paths: Path) -> None:
    """Take group's and others' access away from those of `paths` that exist and are the user's own."""
    for path in paths:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            continue
        if info.st_mode & 0o077 and info.st_uid == os.getuid():
            with suppress(FileNotFoundError):  # SQLite removes its -wal file when its last connection closes
                os.chmod(path, stat.S_IMODE(info.st_mode) & ~0o077)


def atomic_write(path: Path, data: bytes, *, follow: bool = True, mode: int | None = None) -> None:
    """Replace `path` with `data` so that a reader sees either the old or the new file, never half of one.

    `follow`: a symlink at `path` is kept and the file it leads to rewritten (a user's linked dotfile);
    else the link itself is replaced by a regular file, so nothing is ever written where it leads (what a
    repository brings). `mode` (default: the old file's) is set before the file takes `path`'s place.
    """
    if follow:
        path = path.resolve()
    _replace(_temp_copy(path, data, mode), path)


def rewrite(
    path: Path,
    change: Callable[[bytes], bytes | None],
    attempts: int = REWRITE_ATTEMPTS,
    patience: float = REWRITE_PATIENCE,
) -> bool:
    """Replace `path` with `change(its bytes)` atomically, unless `change` says None; True when it wrote.

    An edit saved meanwhile is never lost: right before the replace, the file must still be the one read
    (same inode, size, mtime and bytes), else `change` runs again on the new bytes. A write that reaches
    the old file between that check and the replace is seen afterwards and redone on top of ours.
    """
    path = path.resolve()
    source = _open_regular(path)
    ours: tuple[tuple[int, ...], bytes] | None = None  # what `path` holds once we replaced `source`
    deadline, tries = time.monotonic() + patience, 0
    try:
        while tries < attempts or time.monotonic() < deadline:
            tries += 1
            data, seen = _read_all(source, path), _stamp(os.fstat(source.fileno()))
            new = change(data)
            if new is None and ours is None:
                return False
            temp = _temp_copy(path, data if new is None else new)
            if not _holds(path, *(ours or (seen, data))):
                os.unlink(temp)
                source.close()
                source, ours = _open_regular(path), None
                continue
            _replace(temp, path)
            if _stamp(os.fstat(source.fileno())) == seen:
                return True
            ours = (_stamp(os.stat(path)), data if new is None else new)
    finally:
        source.close()
    raise KeptChanging(f"{path} changed on every one of {tries} attempts to update it")


def _replace(temp: str, path: Path) -> None:
    try:
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _stamp(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _holds(path: Path, stamp: tuple[int, ...], data: bytes) -> bool:
    """Whether `path` is still the file with `stamp`, holding exactly `data`."""
    try:
        with _open_regular(path) as handle:
            return _stamp(os.fstat(handle.fileno())) == stamp and _read_all(handle, path) == data
    except (FileNotFoundError, FileError):
        return False


def _temp_copy(path: Path, data: bytes, mode: int | None = None) -> str:
    """A synced temporary file next to `path` holding `data`, with `mode` (default: that of the regular
    file at `path`). Every temporary file of the package is made here: under a fresh random name, created
    exclusively (`mkstemp`: O_EXCL, so a link planted under any name is never followed), in the target's
    own folder, as CPython writes a `.pyc`."""
    import tempfile  # only the rare write path pays for it

    if mode is None:
        with suppress(OSError):
            info = path.lstat()
            mode = stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temp, mode)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return temp


@contextmanager
def project_lock(common_dir: Path, timeout: float = 60.0, shared: bool = False) -> Iterator[None]:
    """One planner at a time per repository; the lock lives in the git common dir shared by all worktrees.
    `shared`: for a call that only reads, held beside other readers, never beside a writer."""
    deadline = time.monotonic() + timeout
    how = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    with open(common_dir / LOCK_NAME, "a+b") as handle:
        while True:
            try:
                fcntl.flock(handle, how | fcntl.LOCK_NB)
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


@contextmanager
def try_lock(path: Path) -> Iterator[bool]:
    """An exclusive lock on `path` if nobody holds it (True), else False at once; held until the block ends
    or the process does (a crashed holder frees it)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def holding(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (made, then removed) while the block runs: `held` tells another process
    whether its holder is still alive, as the kernel drops the lock when the holder dies, even by kill -9.
    A file that cannot be made leaves the block unguarded (`held` then says None)."""
    try:
        handle = open(path, "a+b")  # noqa: SIM115 - closed below
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def held(path: Path) -> bool | None:
    """Whether a live process holds `path` (`holding`); None when there is no such file."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below, whichever way the lock goes
    except FileNotFoundError:
        return None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False
