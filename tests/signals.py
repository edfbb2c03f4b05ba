"""Ctrl-C on a process a test started: a shell runs a background job (`pytest … &`) with SIGINT ignored, and
the processes it starts inherit that, so the test's SIGINT would do nothing."""

from __future__ import annotations

import signal


def ctrl_c_as_at_a_terminal() -> None:
    """`preexec_fn` of a Popen: the child takes SIGINT with its default action (Python: KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
