"""`teleclaude hook statusline`: an agent CLI's status-line command; keeps the usage the CLI reports in it.

Claude Code runs its `statusLine` command (its user settings.json) whenever its status line may change,
with the session's JSON on stdin, and shows what the command prints under its input. Since 2.1 that JSON
carries `rate_limits` for a subscriber (its 5-hour and 7-day windows: `used_percentage`, `resets_at`), read
from the API's `anthropic-ratelimit-unified-*` headers. The hook reads them with the driver's usage reader
and records them with the availability table (a worker on another computer: on its pane, record.py), so the
planner sees an agent near its limit before the limit ends a turn.

`--then COMMAND`: the status line the user had before `teleclaude install` put this one in its place. It is
run as Claude Code runs a status line (`/bin/sh -c COMMAND`, the same stdin, at most a few seconds), and what
it prints is shown instead of ours. Whatever fails here, the hook records nothing, still prints a line and
exits 0: the status line is never what breaks the CLI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, BinaryIO, TextIO

from teleclaude.runtime.hooks.record import record_usage, warn

if TYPE_CHECKING:
    from teleclaude.agents.profile import UsageWindow

THEIRS_TIMEOUT = 3.5  # Claude Code gives a status-line command 5 s in all (ours: up to 1 s more)
SHELL = "/bin/sh"  # what Claude Code (Node's `spawn(…, {shell: true})`) runs a command string with


def main(
    agent: str,
    then: str | None = None,
    stdin: BinaryIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    stdout = stdout or sys.stdout
    raw = _read(stdin or sys.stdin.buffer)
    text = raw.decode("utf-8", "replace")
    line = ""
    try:
        from teleclaude.agents import PROFILES

        reader = PROFILES[agent].usage.read
        now = datetime.now(UTC)
        windows = reader(text, now) if reader else ()
        record_usage(windows, "statusline")
        line = our_line(agent, text, windows, now)
    except Exception as error:  # record nothing; the line is still printed
        warn(f"{type(error).__name__}: {error}", "statusline")
    if then:
        line = theirs(then, raw) or line
    stdout.write((line or agent) + "\n")
    stdout.flush()
    return 0


def _read(stream: BinaryIO) -> bytes:
    try:
        return stream.read()
    except (OSError, ValueError):
        return b""


def theirs(command: str, raw: bytes) -> str:
    """What the user's own status line prints for this input; "" when it fails, hangs or prints nothing. One
    that hangs is ended with every process it started (its own process group), as Claude Code would."""
    try:
        process = subprocess.Popen(
            [SHELL, "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as error:
        warn(f"your status line did not run: {error}", "statusline")
        return ""
    try:
        out, _ = process.communicate(raw, timeout=THEIRS_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        warn(f"your status line took more than {THEIRS_TIMEOUT:g} s: ended", "statusline")
        return ""
    if process.returncode != 0:
        return ""
    return out.decode("utf-8", "replace").rstrip("\n")


def our_line(agent: str, raw: str, windows: Sequence[UsageWindow], now: datetime) -> str:
    """The model's name, then each window's use as `teleclaude agents` shows it: `Opus 4.8 · 5h 83% ↺ 19:00 ·
    7d 41% ↺ Sun 29 09:00` (resets in local time)."""
    from teleclaude.planner.core.render import usage_text
    from teleclaude.planner.core.terminal import printable

    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    model = data.get("model") if isinstance(data, dict) else None
    name = model.get("display_name") if isinstance(model, dict) else None
    usage = usage_text(windows, now, now.astimezone().tzinfo or UTC)
    shown = printable(name) if isinstance(name, str) and name else agent  # the model's name is the provider's
    return " · ".join(part for part in (shown, usage) if part)
