"""A short command run with `os` alone, for the hooks that run one: `subprocess` (with `threading`,
`selectors`, `signal`) costs a hook more than the command. Its standard input and errors are /dev/null."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing's own, without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping


def output(argv: list[str], env: Mapping[str, str] | None = None) -> bytes | None:
    """The command's output (found on PATH as `posix_spawnp` finds it), None unless it exits 0."""
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
            pid = os.posix_spawnp(argv[0], argv, os.environ if env is None else env, file_actions=actions)
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
