"""`TELECLAUDE_TRACE=FILE`: the moments of a run's hand-overs, one line each (`mark`), for bench_fleet.py to
tell where a dispatch waits: a sandboxed worker's Stop hook (its time, once its mark is read), its news
heard, the lane through, next_work asked and answered, the worker's start submitted, its CLI at its prompt.
Off (one check of a module global) unless the variable is set when the run starts."""

from __future__ import annotations

import os
import threading
import time

_PATH = os.environ.get("TELECLAUDE_TRACE", "")


def mark(what: str, key: str, at: float | None = None) -> None:
    """`WALL_TIME THREAD WHAT KEY`, appended in one write (lines of threads and processes never mix); `at`:
    a moment told by another process (a sandboxed worker's Stop hook, by the mark it left), else now."""
    if not _PATH:
        return
    line = f"{time.time() if at is None else at:.4f} {threading.current_thread().name} {what} {key}\n"
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
