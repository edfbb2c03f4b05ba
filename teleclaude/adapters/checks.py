"""Run one `[checks]` command: an argument list (never a shell), in its own process group, killed with the
group at its timeout; its output's last lines kept, the rest only counted."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from teleclaude.config.checks import argv
from teleclaude.planner.core.gate import CommandRun, tail_of

KEEP_BYTES = 64 * 1024  # of the output's end: enough for the last lines
READ_GRACE = 5.0  # after the group is killed, for the output's reader to see the pipe closed


def run_command(command: str, cwd: Path, timeout: float, env: Mapping[str, str] | None = None) -> CommandRun:
    began = time.monotonic()
    try:
        process = subprocess.Popen(
            argv(command),
            cwd=cwd,
            env=dict(os.environ if env is None else env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killed with it
        )
    except OSError as error:
        why = error.strerror or str(error)
        return CommandRun(command, None, time.monotonic() - began, missing=f"{argv(command)[0]}: {why}")
    output = _Tail()
    reader = threading.Thread(target=output.read, args=(process.stdout,), daemon=True)
    reader.start()
    timed_out = False
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(process.pid)  # at the timeout, and what it left running after it exited
        process.wait()
    reader.join(READ_GRACE)
    seconds = time.monotonic() - began
    status = None if timed_out else process.returncode
    return CommandRun(command, status, seconds, tail_of(output.data()), output.count, timed_out)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class _Tail:
    def __init__(self) -> None:
        self.count = 0
        self.kept = bytearray()

    def read(self, stream) -> None:
        with stream:
            while chunk := stream.read1(65536):
                self.count += len(chunk)
                self.kept += chunk
                if len(self.kept) > 2 * KEEP_BYTES:
                    del self.kept[:-KEEP_BYTES]

    def data(self) -> bytes:
        return bytes(self.kept[-KEEP_BYTES:])
