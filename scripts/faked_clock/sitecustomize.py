"""Loaded by every Python of a `scripts/year-ahead` run (through PYTHONPATH, and a .pth file that run writes
into .venv for the tests that set their own PYTHONPATH).

Under libfaketime with `FAKETIME_DONT_FAKE_MONOTONIC=1`, `time.sleep` fails with EINVAL: it sleeps until an
absolute monotonic deadline, which libfaketime moves by the fake offset. Sleeping in `select()` waits for a
relative timeout instead. Does nothing outside such a run.
"""

import os
import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


if os.environ.get("FAKETIME"):
    time.sleep = _sleep
