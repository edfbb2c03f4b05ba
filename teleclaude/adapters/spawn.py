"""A short command run with `os` alone, for the processes that run one or two: importing `subprocess` (with
`threading`, `selectors`, `signal`, `locale`) costs a hook more than the command, and the planner's cold path
(one `git status`) a sixth of Python's own start. Its standard input is /dev/null."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from signal import SIGPIPE, SIGXFSZ
else:
    from _signal import SIGPIPE, SIGXFSZ  # `signal`'s own numbers, without its enums

# the signals Python ignores and a command must not inherit ignored (as `subprocess` restores them): a git
# writing to a closed pipe dies of SIGPIPE, as it would started from a shell
DEFAULT = (SIGPIPE, SIGXFSZ)


def output(argv: list[str], env: Mapping[str, str] | None = None) -> bytes | None:
    """The command's output (found on PATH as `posix_spawnp` finds it; its errors to /dev/null), None unless
    it exits 0."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return None
    try:
        read, write = os.pipe()
    except OSError:
        os.close(null)
        return None
    try:
        try:
            actions = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, write, 1)]
            actions.append((os.POSIX_SPAWN_DUP2, null, 2))
            pid = os.posix_spawnp(
                argv[0], argv, os.environ if env is None else env, file_actions=actions, setsigdef=DEFAULT
            )
        except OSError:
            return None
        finally:
            os.close(write)
        chunks = []
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
        _, code = os.waitpid(pid, 0)
    finally:
        os.close(read)
        os.close(null)
    return b"".join(chunks) if os.waitstatus_to_exitcode(code) == 0 else None


def run(argv: list[str], env: Mapping[str, str]) -> tuple[int, bytes, bytes] | None:
    """The command's exit code, output and errors, as `subprocess.run(argv, env=env, capture_output=True)`
    has them; its errors kept in a memory file (Linux's `memfd_create`), so that neither pipe can fill
    while the other is read. None where there is no such file: `subprocess` then. Raises OSError as
    `subprocess` does (no such program)."""
    if not hasattr(os, "memfd_create"):
        return None
    errors = os.memfd_create("stderr", os.MFD_CLOEXEC)
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            read, write = os.pipe()
            try:
                actions = [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, write, 1)]
                actions.append((os.POSIX_SPAWN_DUP2, errors, 2))
                pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions, setsigdef=DEFAULT)
            except BaseException:
                os.close(read)
                raise
            finally:
                os.close(write)
        finally:
            os.close(null)
        try:
            chunks = []
            while chunk := os.read(read, 65536):
                chunks.append(chunk)
        finally:
            os.close(read)
            _, status = os.waitpid(pid, 0)
        os.lseek(errors, 0, os.SEEK_SET)
        said = []
        while chunk := os.read(errors, 65536):
            said.append(chunk)
        return os.waitstatus_to_exitcode(status), b"".join(chunks), b"".join(said)
    finally:
        os.close(errors)
