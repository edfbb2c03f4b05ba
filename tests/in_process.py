"""The CLI called in the test's own process (`teleclaude.cli.main`), its answer shaped as a process's: for the
many calls whose point is what a command answers, not the process around it (that is tested as a process)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest


def in_process(
    args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """`stdin`: what the command reads (a hook's JSON), as text and as bytes (`sys.stdin.buffer`)."""
    from teleclaude.cli import main

    out, err = io.StringIO(), io.StringIO()
    with monkeypatch.context() as patch:
        patch.chdir(cwd)
        patch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8"))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    return subprocess.CompletedProcess(["teleclaude", *args], code, out.getvalue(), err.getvalue())
